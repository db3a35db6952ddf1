// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package control_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/control/controltest"
	"github.com/hermeskill/hermeskilld/internal/testnobody"
)

// requireRoot skips tests that need to run a client as another user.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root: runs the client as uid 65534")
	}
}

// nobodyGroup is the name of group 65534 ("nogroup" on Debian, "nobody"
// elsewhere): the primary group of the helper, whose uid is 65534.
func nobodyGroup(t *testing.T) string {
	t.Helper()
	g, err := user.LookupGroupId("65534")
	if err != nil {
		t.Skipf("no group 65534: %v", err)
	}
	return g.Name
}

// TestAuthorization runs the client as uid 65534, a real other user, so
// that the server sees it through SO_PEERCRED.
func TestAuthorization(t *testing.T) {
	requireRoot(t)
	bin := testnobody.Executable(t)
	group := nobodyGroup(t)

	t.Run("in no group", func(t *testing.T) {
		// The membership function says the helper is in no group: the
		// server refuses it, naming the groups.
		b := fake()
		c := serveNobody(t, b, control.ServerOptions{ReadGroup: group, OperatorsGroup: "hk-ops", Member: nobodyMember})
		r := asUser(t, bin, "list", c.Path())
		assert.Equal(t, "forbidden", r.Kind)
		assert.Contains(t, r.Msg, "group "+group+" or hk-ops")
		assert.Contains(t, r.Msg, "uid:65534", "the caller as SO_PEERCRED names it")
		r = asUser(t, bin, "kill", c.Path())
		assert.Equal(t, "forbidden", r.Kind)
		assert.Contains(t, r.Msg, "killing agents requires root or membership of group hk-ops")
		assert.Empty(t, b.Calls(), "a refused request is neither audited nor acted on")
	})

	t.Run("read group", func(t *testing.T) {
		// The default membership (os/user): 65534's primary group is the
		// read group, so it may list and not kill.
		b := fake()
		c := serveNobody(t, b, control.ServerOptions{ReadGroup: group})
		r := asUser(t, bin, "list", c.Path())
		assert.Equal(t, "ok", r.Kind, r.Msg)
		assert.Equal(t, 3, r.N)
		r = asUser(t, bin, "kill", c.Path())
		assert.Equal(t, "forbidden", r.Kind)
		assert.Contains(t, r.Msg, "requires root (control.operators_group is not set)")
		assert.Empty(t, b.Calls())
		assert.Equal(t, control.StateRunning, b.Agent("alpha").State)
	})

	t.Run("operators group", func(t *testing.T) {
		b := fake()
		c := serveNobody(t, b, control.ServerOptions{OperatorsGroup: group})
		r := asUser(t, bin, "kill", c.Path())
		assert.Equal(t, "ok", r.Kind, r.Msg)
		assert.Equal(t, 1, r.N)
		assert.Equal(t, []string{"audit POST /v1/kill", "kill"}, b.Calls())
		a := b.Audits()[0]
		assert.Equal(t, 65534, a.Caller.UID, "audited with the caller's uid")
		assert.Equal(t, 65534, a.Caller.GID)
		assert.Equal(t, control.CallerName(65534), a.Body.(control.KillRequest).Operator)
		assert.Equal(t, control.CallerName(65534), b.Agent("alpha").Quarantine.Operator)
	})

	t.Run("owner", func(t *testing.T) {
		// supervise's own socket: its user may kill (and resume) without
		// any group.
		b := fake()
		c := serveNobody(t, b, control.ServerOptions{OwnerUID: 65534, Member: nobodyMember})
		r := asUser(t, bin, "kill", c.Path())
		assert.Equal(t, "ok", r.Kind, r.Msg)
		assert.Equal(t, []string{"audit POST /v1/kill", "kill"}, b.Calls())
	})

	t.Run("membership lookup fails", func(t *testing.T) {
		b := fake()
		c := serveNobody(t, b, control.ServerOptions{ReadGroup: group,
			Member: func(int, int, string) (bool, error) { return false, errors.New("nss down") }})
		r := asUser(t, bin, "list", c.Path())
		assert.Equal(t, "other", r.Kind)
		assert.Contains(t, r.Msg, "500")
		assert.Contains(t, r.Msg, "nss down")
	})

	t.Run("no groups", func(t *testing.T) {
		// Only root may do anything: the helper connects (everyone may)
		// and is refused by the server, which says why.
		b := fake()
		c := serveNobody(t, b, control.ServerOptions{})
		r := asUser(t, bin, "list", c.Path())
		assert.Equal(t, "forbidden", r.Kind)
		assert.Contains(t, r.Msg, "uid:65534")
		assert.Empty(t, b.Calls())
	})
}

// serveNobody is serve on a socket in a directory uid 65534 can reach.
func serveNobody(t *testing.T, b control.Backend, opts control.ServerOptions) *control.Client {
	t.Helper()
	opts.Path = filepath.Join(testnobody.Dir(t), "control.sock")
	_, c := serve(t, b, opts)
	return c
}

// TestSocketMode: 0666 whatever the umask (everyone may connect; the
// server authorises each request by SO_PEERCRED), owned by root.
func TestSocketMode(t *testing.T) {
	requireRoot(t)
	for _, umask := range []int{0o000, 0o077} {
		t.Run("umask "+strconv.FormatInt(int64(umask), 8), func(t *testing.T) {
			old := syscall.Umask(umask)
			defer syscall.Umask(old)
			path := filepath.Join(shortDir(t), "control.sock")
			s := control.NewServer(fake(), control.ServerOptions{Path: path, ReadGroup: nobodyGroup(t), OperatorsGroup: "hk-ops-none"})
			require.NoError(t, s.Listen())
			defer s.Close()
			fi, err := os.Stat(path)
			require.NoError(t, err)
			assert.Equal(t, os.ModeSocket|control.SocketMode, fi.Mode())
			assert.Equal(t, uint32(0), fi.Sys().(*syscall.Stat_t).Uid)
		})
	}
}

func TestInGroup(t *testing.T) {
	u, err := user.Current()
	require.NoError(t, err)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	g, err := user.LookupGroupId(u.Gid)
	require.NoError(t, err)

	ok, err := control.InGroup(uid, gid, g.Name)
	require.NoError(t, err)
	assert.True(t, ok, "the primary group")
	ok, err = control.InGroup(uid, -1, g.Name)
	require.NoError(t, err)
	assert.True(t, ok, "the user database lists the primary group among the user's groups")
	ok, err = control.InGroup(uid, gid, "hk-no-such-group")
	require.NoError(t, err)
	assert.False(t, ok, "a missing group has no members")

	// A group named by its number, as the configuration allows.
	ok, err = control.InGroup(uid, gid, u.Gid)
	require.NoError(t, err)
	assert.True(t, ok, "the primary group by number")
	ok, err = control.InGroup(uid, gid, "4000000")
	require.NoError(t, err)
	assert.False(t, ok, "a gid nobody has")
	ok, err = control.InGroup(uid, 4000000, "4000000")
	require.NoError(t, err)
	assert.True(t, ok, "a gid the group database does not list still matches the caller's gid")

	if grp, err := user.LookupGroupId("65534"); err == nil && u.Uid == "0" {
		ok, err = control.InGroup(0, 0, grp.Name)
		require.NoError(t, err)
		assert.False(t, ok, "root is not in %s (root's powers come from its uid)", grp.Name)
	}
}

func TestCallerName(t *testing.T) {
	if u, err := user.LookupId("0"); err == nil {
		assert.Equal(t, "uid:0("+u.Username+")", control.CallerName(0))
	}
	assert.Equal(t, "uid:4000000", control.CallerName(4000000))
}

// TestRootAlwaysAllowed: no group configured, root may do everything.
func TestRootAlwaysAllowed(t *testing.T) {
	requireRoot(t)
	_, c := serve(t, fake(), control.ServerOptions{Member: nobodyMember})
	_, err := c.Kill(context.Background(), control.KillRequest{ID: "alpha", Reason: "root"})
	require.NoError(t, err)
}

// Refuse comes before every rule, root's too: supervise's socket refuses
// its agent's processes (here, by pid, the test itself), which run as its
// user, so that an agent cannot resume itself past its budget.
func TestRefuseBeforeRoot(t *testing.T) {
	requireRoot(t)
	b := controltest.New(control.DaemonInfo{Version: "test"},
		control.AgentStatus{AgentInfo: control.AgentInfo{ID: "paused-bot", State: control.StatePaused}})
	refused := true
	_, c := serve(t, b, control.ServerOptions{Member: nobodyMember, Refuse: func(cl control.Caller) error {
		if refused && cl.PID == os.Getpid() {
			return fmt.Errorf("%w: the agent's own processes may not change its run", control.ErrForbidden)
		}
		return nil
	}})
	ctx := context.Background()
	_, err := c.Resume(ctx, control.ResumeRequest{ID: "paused-bot", CostUSD: 2})
	require.ErrorIs(t, err, control.ErrForbidden)
	require.Contains(t, err.Error(), "the agent's own processes")
	require.Empty(t, b.Calls(), "neither audited nor acted on")

	refused = false
	_, err = c.Resume(ctx, control.ResumeRequest{ID: "paused-bot"})
	require.ErrorIs(t, err, control.ErrBadInput, "a resume names the new budget")
	res, err := c.Resume(ctx, control.ResumeRequest{ID: "paused-bot", CostUSD: 2})
	require.NoError(t, err)
	require.Equal(t, control.StateRunning, res.State)
	require.Equal(t, []string{"audit POST /v1/resume", "resume"}, b.Calls())
	require.Equal(t, 2.0, b.Audits()[0].Body.(control.ResumeRequest).CostUSD)
	_, err = c.Resume(ctx, control.ResumeRequest{ID: "paused-bot", CostUSD: 3})
	require.ErrorIs(t, err, control.ErrConflict, "not paused any more")
}

// Another user cannot take the control socket's descriptors: past its
// per-user bound each connection is answered 503 and closed, and root
// (an operator) is still served while those connections are held.
func TestConnectionBoundsPerUser(t *testing.T) {
	requireRoot(t)
	bin := testnobody.Executable(t)
	c := serveNobody(t, fake(), control.ServerOptions{MaxConns: 3, MaxConnsPerUser: 2})

	cmd := exec.Command(bin, c.Path())
	cmd.Env = append(os.Environ(), helperEnv+"=flood", "GORACE=atexit_sleep_ms=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: testnobody.Credential()}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { stdin.Close(); cmd.Wait() }) //nolint:errcheck // the helper's end
	var r helperResult
	require.NoError(t, json.NewDecoder(stdout).Decode(&r))
	t.Logf("flood as 65534: %+v", r)
	assert.Equal(t, 2, r.N, "connections held by another user")
	assert.Equal(t, strings.Repeat("503 ", floodConns-2), r.Msg)

	// While they are held: root is served, and its own connections past
	// the total are, too (only its per-user bound applies).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	agents, err := c.List(ctx)
	require.NoError(t, err)
	assert.Len(t, agents, 3)
	root := control.NewClient(c.Path())
	defer root.Close()
	_, err = root.Info(ctx)
	require.NoError(t, err, "root's second connection, over the total")
}
