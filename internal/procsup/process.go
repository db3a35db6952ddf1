// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/landlock"
)

// StartError is a failure to start the command, with the shell-convention
// exit status it maps to: 127 not found, 126 not executable.
type StartError struct {
	Code int
	Err  error
}

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// Spec is what to run.
type Spec struct {
	// Path is the file to execute; empty means Argv[0], looked up in
	// PATH when it has no slash.
	Path string
	Argv []string
	Env  []string
	Dir  string
	// Files are the child's stdin, stdout, stderr; nil means /dev/null.
	Stdin, Stdout, Stderr *os.File
	// Foreground, when set, is our controlling terminal, whose foreground
	// process group we are: the child's own group becomes it before the
	// child execs (SysProcAttr.Foreground, with every signal blocked, so
	// no SIGTTOU), as a shell gives a job the terminal. Not for helpers.
	Foreground *os.File
	// Credential runs the child as another user (daemon `user:`).
	Credential *syscall.Credential
	// CgroupFD, when > 0, starts the child straight into that cgroup
	// (clone3 CLONE_INTO_CGROUP), so not one instruction runs outside it.
	CgroupFD int
	// NetNS, when > 0, is a network namespace's descriptor: the child is
	// born in it (package netns).
	NetNS int
	// Helper starts a process of hermeskilld's own (the keeper) rather
	// than an agent: without PR_SET_PDEATHSIG, since it must outlive us,
	// in a session of its own, so that a terminal's signals or a kill of
	// our process group do not reach it, and never counted in an agent's
	// process tree.
	Helper bool
	// Landlock, when it restricts anything, confines the child in a
	// Landlock domain before it executes Path, through our own binary
	// started as an exec stage (package execstage); Start fails with a
	// *ConfineError, the command never run, when that cannot be done.
	// Not for helpers.
	Landlock landlock.Ruleset
}

// ExitStatus is how a process ended, from its raw wait status.
type ExitStatus struct {
	Code       int // valid when !Signaled
	Signaled   bool
	Signal     syscall.Signal
	CoreDumped bool
	UserCPU    time.Duration
	SysCPU     time.Duration
	MaxRSS     int64 // bytes, from getrusage of the main process
}

// ShellCode is the status a shell would report: the code, or 128+signal.
func (e ExitStatus) ShellCode() int {
	if e.Signaled {
		return 128 + int(e.Signal)
	}
	return e.Code
}

func (e ExitStatus) String() string {
	if e.Signaled {
		s := "killed by " + unix.SignalName(e.Signal)
		if e.CoreDumped {
			s += " (core dumped)"
		}
		return s
	}
	return fmt.Sprintf("exited with code %d", e.Code)
}

// Process is a started child. Exactly one goroutine waits on it.
//
// It holds one pidfd for the child, never two: os.StartProcess keeps a
// duplicate of a pidfd asked for through SysProcAttr.PidFD in its
// os.Process, so where the Runtime waits on its own pidfd (PollWait) it
// releases the os.Process at once and signals through the same pidfd it
// waits on. A daemon of a thousand agents saves a thousand descriptors.
type Process struct {
	proc *os.Process // nil when pidfd is set
	// pidfd is the child's pidfd (PollWait), as a File: its reference
	// count keeps the descriptor number from being closed under a signal
	// in flight and reused for another file (the wait closes it once the
	// child is reaped).
	pidfd   *os.File
	pid     int
	started time.Time
	done    chan struct{}
	status  ExitStatus
	exited  time.Time
	reaped  func() // called once reaped, before Done is closed
}

// PID is the child's pid.
func (p *Process) PID() int { return p.pid }

// Started is when the child was started.
func (p *Process) Started() time.Time { return p.started }

// Done is closed once the child has been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Status is the exit status; valid once Done is closed.
func (p *Process) Status() ExitStatus { <-p.done; return p.status }

// ExitedAt is when the exit was observed; valid once Done is closed.
func (p *Process) ExitedAt() time.Time { <-p.done; return p.exited }

// SignalGroup sends sig to the child's process group (its own: Start
// puts it there), as a shell signals a job — SIGCONT after a stop from
// the terminal. Once the child is reaped nothing is sent: its group id
// may then name someone else's group.
func (p *Process) SignalGroup(sig syscall.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	err := unix.Kill(-p.pid, sig)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// TakeStop reports whether the child is stopped and by which signal,
// consuming the report (waitid(2) WSTOPPED: one per stop; its exit stays
// for its owner to reap). Used on SIGCHLD by whoever cares about stops.
func (p *Process) TakeStop() (syscall.Signal, bool) {
	select {
	case <-p.done:
		return 0, false
	default:
	}
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, p.pid, &info, unix.WSTOPPED|unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || siginfoPID(&info) != p.pid || info.Code != cldStopped {
			return 0, false
		}
		return syscall.Signal(siginfoStatus(&info)), true
	}
}

// Signal sends sig through the pidfd (pidfd_send_signal(2)), so a recycled
// pid is never signalled. An exited process is not an error.
func (p *Process) Signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return nil // reaped (and its handle released)
	default:
	}
	var err error
	if p.pidfd != nil {
		err = signalPidfd(p.pidfd, sig)
	} else {
		err = p.proc.Signal(sig)
	}
	if err == nil || errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	select {
	case <-p.done:
		return nil // reaped while we signalled
	default:
		return err
	}
}

func (p *Process) wait(r *reaper) {
	defer close(p.done)
	var (
		st  ExitStatus
		err error
	)
	if p.pidfd != nil {
		st, err = waitPidfd(p.pidfd)
		p.pidfd.Close()
	} else {
		// Not asked for (Options.PollWait), or a kernel without pidfds:
		// os.Process waits (waitid(P_PIDFD) in a blocked thread).
		st, err = p.waitProcess()
		_ = p.proc.Release()
	}
	p.exited = time.Now()
	if p.reaped != nil {
		p.reaped()
	}
	r.released(p.pid)
	if err != nil {
		// Cannot happen unless someone else reaped our child; report a
		// death by SIGKILL rather than a success.
		p.status = ExitStatus{Signaled: true, Signal: syscall.SIGKILL}
		return
	}
	p.status = st
}

func (p *Process) waitProcess() (ExitStatus, error) {
	st, err := p.proc.Wait()
	if err != nil {
		return ExitStatus{}, err
	}
	ws := st.Sys().(syscall.WaitStatus)
	es := ExitStatus{Code: ws.ExitStatus(), UserCPU: st.UserTime(), SysCPU: st.SystemTime()}
	if ws.Signaled() {
		es.Signaled, es.Signal, es.CoreDumped = true, ws.Signal(), ws.CoreDump()
	}
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		es.MaxRSS = ru.Maxrss * 1024
	}
	return es, nil
}

// lookPath resolves argv[0] like a shell would, mapping failures to the
// shell's exit statuses.
func lookPath(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err == nil {
		return path, nil
	}
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return "", &StartError{Code: 127, Err: fmt.Errorf("%s: command not found", name)}
	}
	return "", &StartError{Code: 126, Err: fmt.Errorf("%s: %w", name, err)}
}

// startError maps an exec failure to 126/127.
func startError(path string, err error) error {
	var se *StartError
	if errors.As(err, &se) {
		return err
	}
	switch {
	case errors.Is(err, syscall.ENOENT):
		return &StartError{Code: 127, Err: fmt.Errorf("%s: %w", path, err)}
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EISDIR):
		return &StartError{Code: 126, Err: fmt.Errorf("%s: %w", path, err)}
	}
	return fmt.Errorf("start %s: %w", path, err)
}
