// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package control

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// MemberFunc reports whether the user uid, whose process runs with primary
// group gid, is a member of the group named group. ServerOptions.Member
// defaults to InGroup.
type MemberFunc func(uid, gid int, group string) (bool, error)

// InGroup is the default MemberFunc: true when gid is the group's id, or
// when the user database (os/user: /etc/group, or NSS with cgo) lists the
// group among uid's groups. It is looked up on every request, so adding
// somebody to a group takes effect without restarting the daemon. A group
// that does not exist has no members.
//
// SO_PEERCRED carries the caller's uid and gid only, not its supplementary
// groups; membership is therefore the user's as the database says, not the
// process's (a process that dropped a group still counts as a member).
func InGroup(uid, gid int, group string) (bool, error) {
	g, err := lookupGroup(group)
	if err != nil {
		var unknown user.UnknownGroupError
		if errors.As(err, &unknown) {
			return false, nil
		}
		return false, err
	}
	if g.Gid == strconv.Itoa(gid) {
		return true, nil
	}
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		var unknown user.UnknownUserIdError
		if errors.As(err, &unknown) {
			return false, nil
		}
		return false, err
	}
	ids, err := u.GroupIds()
	if err != nil {
		return false, fmt.Errorf("groups of %s: %w", u.Username, err)
	}
	return slices.Contains(ids, g.Gid), nil
}

// lookupGroup finds a group by name, or by number when group is one (a
// gid the group database does not list still names a group).
func lookupGroup(group string) (*user.Group, error) {
	if _, err := strconv.ParseUint(group, 10, 32); err == nil {
		if g, err := user.LookupGroupId(group); err == nil {
			return g, nil
		}
		return &user.Group{Gid: group, Name: group}, nil
	}
	return user.LookupGroup(group)
}

// CallerName is the form a caller is recorded under (Caller.Name,
// KillRequest.Operator, the audit log): "uid:1000(alice)", or "uid:1000"
// when the user database does not know the uid.
func CallerName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return fmt.Sprintf("uid:%d(%s)", uid, u.Username)
	}
	return "uid:" + strconv.Itoa(uid)
}

// peerKey is the context key of a connection's peer.
type peerKey struct{}

// peer is what ConnContext learnt about a connection.
type peer struct {
	caller Caller
	err    error // SO_PEERCRED failed: the connection is refused every request
}

// connContext stores the peer's SO_PEERCRED credentials in the
// connection's context (unix(7): they are the credentials the peer had
// when it called connect(2)).
func connContext(ctx context.Context, c net.Conn) context.Context {
	p := &peer{}
	p.caller, p.err = peerCred(c)
	return context.WithValue(ctx, peerKey{}, p)
}

func peerCred(c net.Conn) (Caller, error) {
	// A bounded listener's connection wraps the socket's.
	for {
		w, ok := c.(interface{ Unwrap() net.Conn })
		if !ok {
			break
		}
		c = w.Unwrap()
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Caller{}, fmt.Errorf("peer credentials: %T is not a Unix connection", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Caller{}, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Caller{}, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return Caller{}, fmt.Errorf("peer credentials: %w", os.NewSyscallError("getsockopt SO_PEERCRED", credErr))
	}
	uid := int(cred.Uid)
	return Caller{PID: int(cred.Pid), UID: uid, GID: int(cred.Gid), Name: CallerName(uid)}, nil
}

// callerFrom returns the caller of a request.
func callerFrom(ctx context.Context) (Caller, error) {
	p, ok := ctx.Value(peerKey{}).(*peer)
	if !ok {
		return Caller{}, errors.New("peer credentials: not a control socket connection")
	}
	return p.caller, p.err
}

// Access levels of the endpoints.
type access int

const (
	accessRead   access = iota // list, status, certificates, events
	accessChange               // kill, estop, release
)

// authorizer decides who may do what.
type authorizer struct {
	readGroup, opsGroup string
	member              MemberFunc
	owner               int                // ServerOptions.OwnerUID
	refuse              func(Caller) error // ServerOptions.Refuse
}

// allow returns nil when c may perform an operation of level need, else
// an error matching ErrForbidden that says which group is needed.
func (a *authorizer) allow(c Caller, need access, what string) error {
	if a.refuse != nil {
		if err := a.refuse(c); err != nil {
			return err
		}
	}
	if c.UID == 0 || a.owner != 0 && c.UID == a.owner {
		return nil
	}
	ok, err := a.in(c, a.opsGroup)
	if err != nil {
		return err
	}
	if !ok && need == accessRead {
		if ok, err = a.in(c, a.readGroup); err != nil {
			return err
		}
	}
	if ok {
		return nil
	}
	needs, grouped := a.needs(need)
	who := c.Name + " is not root"
	if grouped {
		who = c.Name + " is neither"
	}
	return fmt.Errorf("%w: %s requires %s; %s", ErrForbidden, what, needs, who)
}

func (a *authorizer) in(c Caller, group string) (bool, error) {
	if group == "" {
		return false, nil
	}
	ok, err := a.member(c.UID, c.GID, group)
	if err != nil {
		return false, fmt.Errorf("group %s: %w", group, err)
	}
	return ok, nil
}

// needs names what a level requires, for the 403 message; grouped is
// false when only root qualifies.
func (a *authorizer) needs(need access) (text string, grouped bool) {
	var groups []string
	if need == accessRead && a.readGroup != "" {
		groups = append(groups, a.readGroup)
	}
	if a.opsGroup != "" && !slices.Contains(groups, a.opsGroup) {
		groups = append(groups, a.opsGroup)
	}
	if len(groups) == 0 {
		if need == accessRead {
			return "root (neither control.read_group nor control.operators_group is set)", false
		}
		return "root (control.operators_group is not set)", false
	}
	return "root or membership of group " + strings.Join(groups, " or "), true
}
