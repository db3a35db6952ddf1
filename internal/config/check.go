// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/denials"
	"github.com/hermeskill/hermeskilld/internal/landlock"
)

// What a configuration needs from the host it runs on is checked apart
// from parsing: ParseDaemon and ParseAgent accept any user, group or
// command, because files are written on one machine and used on another
// (and the documentation's examples name users this host need not have).
// The daemon runs these checks when it starts, when SIGHUP reloads its
// file and whenever it applies an agent file; `check-config` runs them
// on the files it is given. Each problem is an *Error of kind ErrHost at
// the line of its key.

// ErrNoAgentsDir is wrapped by the error of Daemon.CheckHost for an
// agents_dir that does not exist and is not the default one (which the
// daemon creates). A mistyped path would otherwise give a daemon that
// watches an empty directory and runs none of the agents the operator
// declared.
var ErrNoAgentsDir = errors.New("agents_dir does not exist")

// errNoLandlock: writable needs what this kernel lacks.
var errNoLandlock = errors.New("needs the kernel's Landlock (Linux 5.13 or later, with landlock in its lsm= list), which this host lacks: the agent would not start")

// CheckHost checks the daemon file against this host, as the daemon does
// when it starts and when SIGHUP reloads the file:
//   - control.read_group and control.operators_group name groups that
//     exist (a name, or a numeric gid the group database knows);
//   - defaults.user names a user that exists;
//   - agents_dir is a directory; only the default may be missing (see
//     CreatesAgentsDir). A missing one wraps ErrNoAgentsDir, a file
//     syscall.ENOTDIR.
//
// Errors name c.Source and the line of their key (the file is read again
// for the lines; without it they have none); several are joined.
func (c *Daemon) CheckHost() error {
	hc := newHostCheck(c.Source, nil, reflect.ValueOf(DefaultDaemon()).Elem())
	for _, g := range []struct{ key, name string }{
		{"control.read_group", c.Control.ReadGroup},
		{"control.operators_group", c.Control.OperatorsGroup},
	} {
		if g.name != "" {
			hc.add(g.key, lookupGroup(g.name))
		}
	}
	if name := c.Defaults.Agent().User; name != "" {
		_, err := UserCredential(name)
		hc.add("defaults.user", err)
	}
	fi, err := os.Stat(c.AgentsDir)
	switch {
	case errors.Is(err, fs.ErrNotExist) && c.CreatesAgentsDir():
	case errors.Is(err, fs.ErrNotExist):
		hc.add("agents_dir", &hostError{msg: c.AgentsDir + " does not exist (create it, or correct agents_dir)", err: ErrNoAgentsDir})
	case err != nil:
		hc.add("agents_dir", err)
	case !fi.IsDir():
		hc.add("agents_dir", fmt.Errorf("%s: %w", c.AgentsDir, syscall.ENOTDIR))
	}
	return hc.err()
}

// CreatesAgentsDir reports whether the daemon creates agents_dir when it
// starts: it is the default, /etc/hermeskill/agents.d (which `make
// install` and the package make), and it does not exist.
func (c *Daemon) CreatesAgentsDir() bool {
	if c.AgentsDir != DefaultDaemon().AgentsDir {
		return false
	}
	_, err := os.Stat(c.AgentsDir)
	return errors.Is(err, fs.ErrNotExist)
}

// CheckHost checks agent a against this host, as it will be started (the
// daemon's way: see procsup.Runtime.Start):
//   - user names a user that exists;
//   - cwd is a directory that user can enter (search permission on it and
//     on every directory above it);
//   - each writable path exists, and the kernel has Landlock to confine
//     writes to them;
//   - with checks.denials, Landlock's denials can be counted: the kernel
//     logs them (Linux 6.15) and its audit log is on and readable;
//   - the command resolves, as it will at the start: a name without a
//     slash through this process's PATH (the daemon's PATH, not the agent
//     file's env), a relative path from cwd; and that user (its uid, its
//     group and its supplementary groups) may execute the file: a regular
//     file with execute permission for it, on a file system not mounted
//     noexec, every directory on the way searchable by it.
//
// The kernel is asked, as that user (see kernelExec): its answer covers
// the owner, group and other bits, POSIX ACLs, root's capabilities (root
// may search anything and execute a file with any execute bit) and
// noexec mounts. Only root can ask as another user: run by anyone else,
// CheckHost of an agent of another user with a cwd or a command reports
// at the line of user that the check needs root. What this process
// cannot stat itself (check-config run by a user who may not look inside
// a directory) is not reported.
//
// data is the content a was parsed from (its file a.Source), for the
// lines of the errors; nil reads a.Source again. Errors name a.Source and
// the line of their key; several are joined.
func (a *Agent) CheckHost(data []byte) error {
	hc := newHostCheck(a.Source, data, reflect.ValueOf(DefaultAgent()).Elem())
	cred, err := UserCredential(a.User)
	if err != nil {
		hc.add("user", err)
		return hc.err()
	}
	who := describeUser(a.User, cred)
	hasCommand := len(a.Command) > 0 && a.Command[0] != ""
	if !mayAsk(cred) && (a.Cwd != "" || hasCommand) {
		hc.add("user", fmt.Errorf("checking what %s may enter and execute %w (it runs as uid %d)", who, errNeedsRoot, os.Geteuid()))
		return hc.err()
	}
	if a.Cwd != "" {
		if err := checkDir(cred, a.Cwd); err != nil {
			hc.add("cwd", fmt.Errorf("%s: %s cannot enter it: %w", a.Cwd, who, err))
		}
	}
	for i, p := range a.Writable {
		if _, err := os.Stat(p); err != nil {
			hc.add(fmt.Sprintf("writable[%d]", i), err)
		}
	}
	if abi := landlock.ABI(); a.Writable != nil && abi < landlock.FilesABI {
		hc.add("writable", errNoLandlock)
	}
	if a.Checks.Denials != nil {
		if abi := landlock.ABI(); abi < landlock.LoggingABI {
			hc.add("checks.denials", fmt.Errorf("needs the kernel's Landlock to log denials (ABI %d, Linux 6.15; this kernel has %d): the agent would not start", landlock.LoggingABI, abi))
		} else if err := denials.Available(); err != nil {
			hc.add("checks.denials", fmt.Errorf("%w: the agent would not start", err))
		}
	}
	if hasCommand {
		path, how, err := resolveCommand(a.Command[0], a.Cwd)
		if err == nil {
			err = checkExec(cred, path)
			if err != nil {
				err = fmt.Errorf("%s%s: %s cannot execute it: %w", path, how, who, err)
			}
		}
		hc.add("command", err)
	}
	return hc.err()
}

// CheckRunAs checks that this process may start a as its user: root may
// run an agent as any user, another process only as itself (hermeskilld
// changes users only as root). data is as for CheckHost; the error is at
// the line of user.
func (a *Agent) CheckRunAs(data []byte) error {
	cred, err := UserCredential(a.User)
	if err != nil || cred == nil || os.Geteuid() == 0 || int(cred.Uid) == os.Geteuid() {
		return nil // an unknown user is CheckHost's to report
	}
	hc := newHostCheck(a.Source, data, reflect.ValueOf(DefaultAgent()).Elem())
	hc.add("user", fmt.Errorf("running the agent as %s needs hermeskilld to run as root (it runs as uid %d)", describeUser(a.User, cred), os.Geteuid()))
	return hc.err()
}

// CheckEnter says why cred may not enter dir (search permission on it and
// on every directory above it, as CheckHost checks cwd), nil when it may.
// As for CheckHost, only root can ask about another user.
func CheckEnter(cred *syscall.Credential, dir string) error {
	return checkDir(cred, dir)
}

// UserCredential resolves a user as the daemon runs an agent as it: a
// name, else a numeric uid; its uid, its primary group and its
// supplementary groups. "" is this process's own user: nil, nil.
func UserCredential(name string) (*syscall.Credential, error) {
	if name == "" {
		return nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		if _, numErr := strconv.ParseUint(name, 10, 32); numErr != nil {
			return nil, unknownUser(name, err)
		}
		if u, err = user.LookupId(name); err != nil {
			return nil, unknownUser(name, err)
		}
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user %q: %w", name, err)
	}
	c := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	if ids, err := u.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				c.Groups = append(c.Groups, uint32(n))
			}
		}
	}
	return c, nil
}

func unknownUser(name string, err error) error {
	var byName user.UnknownUserError
	var byID user.UnknownUserIdError
	if errors.As(err, &byName) || errors.As(err, &byID) {
		return fmt.Errorf("no user %q on this host", name)
	}
	return fmt.Errorf("user %q: %w", name, err)
}

// lookupGroup says whether the group database knows group, a name or a
// numeric gid.
func lookupGroup(name string) error {
	_, err := user.LookupGroup(name)
	if err == nil {
		return nil
	}
	if _, numErr := strconv.ParseUint(name, 10, 32); numErr == nil {
		if _, err = user.LookupGroupId(name); err == nil {
			return nil
		}
	}
	var byName user.UnknownGroupError
	var byID user.UnknownGroupIdError
	if errors.As(err, &byName) || errors.As(err, &byID) {
		return fmt.Errorf("no group %q on this host (create it, or correct the name)", name)
	}
	return fmt.Errorf("group %q: %w", name, err)
}

// describeUser names who an agent runs as in messages.
func describeUser(name string, cred *syscall.Credential) string {
	if name == "" {
		return fmt.Sprintf("hermeskilld's own user (uid %d)", os.Geteuid())
	}
	return fmt.Sprintf("user %q (uid %d)", name, cred.Uid)
}

// resolveCommand finds the file argv0 names as procsup does when it
// starts it: a name without a slash through this process's PATH, a
// relative path from cwd (the child changes directory before exec), else
// from our working directory. how says where a name was found, for
// messages.
func resolveCommand(argv0, cwd string) (path, how string, err error) {
	if filepath.Base(argv0) == argv0 {
		p, err := exec.LookPath(argv0)
		if err != nil {
			return "", "", fmt.Errorf("%s: not found in PATH (%s) as hermeskilld resolves it", argv0, os.Getenv("PATH"))
		}
		if !filepath.IsAbs(p) {
			if p, err = filepath.Abs(p); err != nil {
				return "", "", err
			}
		}
		return p, fmt.Sprintf(" (%s in PATH)", argv0), nil
	}
	if filepath.IsAbs(argv0) {
		return filepath.Clean(argv0), "", nil
	}
	base := cwd
	if base == "" {
		if base, err = os.Getwd(); err != nil {
			return "", "", err
		}
	}
	return filepath.Join(base, argv0), "", nil
}

// checkExec says why cred may not execute path, nil when it may.
func checkExec(cred *syscall.Credential, path string) error {
	dirs := pathDirs(path)
	access, err := kernelExec(cred, append(dirs, path))
	if err != nil {
		return err
	}
	if err := searchable(dirs, access); err != nil {
		return err
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrPermission):
		return nil // we cannot look ourselves: not known to fail
	case errors.Is(err, fs.ErrNotExist):
		return errors.New("it does not exist")
	case err != nil:
		return err
	case fi.IsDir():
		return errors.New("it is a directory")
	case !fi.Mode().IsRegular():
		return fmt.Errorf("it is not a regular file (%s)", fi.Mode().Type())
	case access[path] == nil:
		return nil
	}
	// The kernel refuses to execute any file of a noexec mount.
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err == nil && st.Flags&unix.ST_NOEXEC != 0 {
		return errors.New("its file system is mounted noexec")
	}
	if errors.Is(access[path], unix.EACCES) {
		return fmt.Errorf("no execute permission (%s)", ownerMode(fi))
	}
	return access[path]
}

// checkDir says why cred may not enter dir, nil when it may.
func checkDir(cred *syscall.Credential, dir string) error {
	dirs := pathDirs(dir)
	access, err := kernelExec(cred, append(dirs, dir))
	if err != nil {
		return err
	}
	if err := searchable(dirs, access); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrPermission):
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return errors.New("it does not exist")
	case err != nil:
		return err
	case !fi.IsDir():
		return errors.New("it is not a directory")
	case errors.Is(access[dir], unix.EACCES):
		return fmt.Errorf("no search permission (%s)", ownerMode(fi))
	}
	return access[dir]
}

// pathDirs are the directories the kernel must search to reach path:
// those above the path as written, and those above the path with its
// symbolic links resolved, from the root, each once.
func pathDirs(path string) []string {
	dirs := ancestors(path)
	if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
		dirs = append(dirs, ancestors(real)...)
	}
	seen := map[string]bool{}
	return slices.DeleteFunc(dirs, func(d string) bool {
		dup := seen[d]
		seen[d] = true
		return dup
	})
}

// searchable says which of dirs (pathDirs') may not be searched, by the
// kernel's answers in access (kernelExec's), nil when all may. The first
// refused is named: each is reached through those before it.
func searchable(dirs []string, access map[string]error) error {
	for _, d := range dirs {
		fi, err := os.Stat(d)
		switch {
		case errors.Is(err, fs.ErrPermission):
			return nil // not known to fail (see Agent.CheckHost)
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("%s does not exist", d)
		case err != nil:
			return err
		case !fi.IsDir():
			return fmt.Errorf("%s is not a directory", d)
		case errors.Is(access[d], unix.EACCES):
			return fmt.Errorf("it may not search %s (%s)", d, ownerMode(fi))
		case access[d] != nil:
			return access[d]
		}
	}
	return nil
}

// ancestors are the directories above the absolute path p, from the root.
func ancestors(p string) []string {
	p = filepath.Clean(p)
	var out []string
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		out = append(out, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	slices.Reverse(out)
	return out
}

func ownerMode(fi fs.FileInfo) string {
	st := fi.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("mode %04o, owner %d:%d", fi.Mode().Perm(), st.Uid, st.Gid)
}

// hostError is a message that wraps a sentinel without repeating its text.
type hostError struct {
	msg string
	err error
}

func (e *hostError) Error() string { return e.msg }
func (e *hostError) Unwrap() error { return e.err }

// hostCheck collects the problems of one file, located at the lines of
// their keys.
type hostCheck struct {
	file string
	d    *decoder // only for the lines of the keys
	errs []*Error
}

// newHostCheck reads the lines of the keys of file (data, or the file
// read again when data is nil), a file of the schema of into.
func newHostCheck(file string, data []byte, into reflect.Value) *hostCheck {
	d := newDecoder(file)
	if data == nil && file != "" {
		data, _ = os.ReadFile(file)
	}
	if root, ok := d.document(data); ok && root != nil {
		d.mapping(root, "", into, scope{})
	}
	return &hostCheck{file: file, d: d}
}

// add records err (nil: nothing) at the line of key.
func (hc *hostCheck) add(key string, err error) {
	if err == nil {
		return
	}
	hc.errs = append(hc.errs, &Error{File: hc.file, Line: hc.d.lineOf(key), Key: key, Kind: ErrHost, Err: err})
}

func (hc *hostCheck) err() error {
	sort.SliceStable(hc.errs, func(i, j int) bool { return hc.errs[i].Line < hc.errs[j].Line })
	return joinErrors(hc.errs)
}
