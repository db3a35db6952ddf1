// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package execstage confines an agent between fork and exec. Go's fork
// code runs no Go code between fork(2) and execve(2), and
// landlock_restrict_self(2) confines only the thread that calls it. So an
// agent to be confined is started as hermeskilld's own binary again
// (/proc/self/exe: the file it runs, even if replaced on disk since) with
// Arg0 as argv[0]: the stage confines its one locked thread and execve(2)s
// the agent from it. The pid, process group, session, terminal, cgroup,
// credentials and parent-death signal are the fork's, kept across both
// execve(2)s (a parent-death signal is cleared only by a set-user-ID
// program); the agent's argv and environment are passed untouched.
//
// The stage runs from this package's init, before the packages a
// supervising hermeskilld needs (HTTP, YAML, metrics) are initialized: a
// binary that imports the package becomes a stage when started as one
// (its argv, and descriptor 3 a pipe), and is otherwise unaffected.
//
// # Protocol
//
//	argv: hermeskilld-exec v1 ABI signals|- N WRITABLE... PATH ARGV...
//
// N is the number of writable paths, -1 when files are not confined. On
// failure the stage writes one line on descriptor 3 (close-on-exec, so a
// successful execve(2) closes it unwritten) and exits with status 125:
//
//	execve ERRNO             the agent's execve(2) failed
//	confine ERRNO MESSAGE    the confinement could not be applied: the agent
//	                         was never run
package execstage

import (
	"bufio"
	"errors"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/landlock"
)

// Exe is what the parent executes: its own binary.
const Exe = "/proc/self/exe"

const (
	// Arg0 marks a stage's argv.
	Arg0    = "hermeskilld-exec"
	version = "v1"
	fd      = 3
	// exitStatus is the stage's after a reported failure.
	exitStatus = 125
)

// Argv is the stage's argv for ruleset r (on a kernel of Landlock ABI
// abi), running path with argv; the caller gives the stage a pipe's write
// end as descriptor 3 and reads the other end with Result.
func Argv(r landlock.Ruleset, abi int, path string, argv []string) []string {
	scope := "-"
	if r.ScopeSignals {
		scope = "signals"
	}
	n := -1
	if r.Writable != nil {
		n = len(r.Writable)
	}
	out := []string{Arg0, version, strconv.Itoa(abi), scope, strconv.Itoa(n)}
	out = append(out, r.Writable...)
	return append(append(out, path), argv...)
}

// parse is Argv's inverse; ok is false for any other argv.
func parse(args []string) (r landlock.Ruleset, abi int, path string, argv []string, ok bool) {
	if len(args) < 5 || args[0] != Arg0 || args[1] != version {
		return r, 0, "", nil, false
	}
	abi, err := strconv.Atoi(args[2])
	if err != nil {
		return r, 0, "", nil, false
	}
	switch args[3] {
	case "signals":
		r.ScopeSignals = true
	case "-":
	default:
		return r, 0, "", nil, false
	}
	n, err := strconv.Atoi(args[4])
	if err != nil || n < -1 || len(args) < 5+max(n, 0)+2 {
		return r, 0, "", nil, false
	}
	rest := args[5:]
	if n >= 0 {
		r.Writable, rest = append([]string{}, rest[:n]...), rest[n:]
	}
	return r, abi, rest[0], rest[1:], true
}

func init() {
	r, abi, path, argv, ok := parse(os.Args)
	if !ok {
		return
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return
	}
	unix.CloseOnExec(fd)
	// The domain is this thread's: the execve(2) must come from it.
	runtime.LockOSThread()
	if err := landlock.RestrictSelf(r, abi); err != nil {
		fail("confine", err)
	}
	fail("execve", syscall.Exec(path, argv, syscall.Environ()))
}

// fail reports err on the stage's descriptor and exits.
func fail(step string, err error) {
	var errno syscall.Errno
	errors.As(err, &errno)
	line := step + " " + strconv.Itoa(int(errno))
	if step != "execve" {
		line += " " + strings.ReplaceAll(err.Error(), "\n", " ")
	}
	_, _ = unix.Write(fd, []byte(line+"\n"))
	os.Exit(exitStatus)
}

// Failure is what a stage reported instead of executing the agent.
type Failure struct {
	// Exec: the agent's execve(2) failed; otherwise the confinement.
	Exec  bool
	Errno syscall.Errno // 0 when no system call failed
	Msg   string        // the confinement's error; empty for Exec
}

func (f *Failure) Error() string {
	if f.Exec {
		return "execve: " + f.Errno.Error()
	}
	return f.Msg
}

func (f *Failure) Unwrap() error {
	if f.Errno == 0 {
		return nil
	}
	return f.Errno
}

// ErrTimeout: the stage neither executed the agent nor reported a failure
// in time.
var ErrTimeout = errors.New("the exec stage did not execute the agent in time")

// Result reads what the stage reported on r until end of file, within
// wait: nil once the agent was executed, else a *Failure or ErrTimeout.
func Result(r *os.File, wait time.Duration) error {
	_ = r.SetReadDeadline(time.Now().Add(wait))
	line, err := bufio.NewReader(r).ReadString('\n')
	switch {
	case errors.Is(err, io.EOF) && line == "":
		return nil // closed by the agent's execve(2)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return ErrTimeout
	}
	step, rest, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	num, msg, _ := strings.Cut(rest, " ")
	n, _ := strconv.Atoi(num)
	f := &Failure{Exec: step == "execve", Errno: syscall.Errno(n), Msg: msg}
	if !f.Exec && msg == "" {
		f.Msg = "the exec stage failed: " + strconv.Quote(line)
	}
	return f
}
