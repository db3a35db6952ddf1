// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Kill sends SIGKILL to every process of the group and its sub-cgroups.
// It does not wait for them to die: WaitEmpty does.
//
// cgroup.kill (Linux 5.14): "Writing "1" to the file causes the cgroup
// and all descendant cgroups to be killed ... Killing a cgroup tree will
// deal with concurrent forks appropriately and is protected against
// migrations" (cgroup-v2.rst). Without the file, or in a threaded cgroup
// where the write fails with EOPNOTSUPP, Kill signals the processes one
// by one, through pidfds, until a pass over cgroup.procs finds none it
// has not already killed (see killEach).
//
// Errors: ErrKillIncomplete when the fallback ran out of passes; the
// error of the write or of the listing otherwise.
func (g *Group) Kill() error {
	if !g.m.fallbackKill {
		err := writeFile(filepath.Join(g.dir, "cgroup.kill"), "1")
		if err == nil {
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("kill %s: %w", g.dir, err)
		}
	}
	if err := g.killEach(); err != nil {
		return fmt.Errorf("kill %s: %w", g.dir, err)
	}
	return nil
}

// Bounds of the fallback kill: a tree forking faster than it is killed
// gets this many passes over cgroup.procs, for at most this long.
const (
	killPasses = 100
	killBound  = 2 * time.Second
)

// killEach is systemd's cg_kill() loop (src/basic/cgroup-util.c): list
// the processes, SIGKILL each one not yet signalled, and repeat "to avoid
// racing against processes which fork quicker than we can kill them".
//
// It stops at the first pass that finds no process it has not already
// killed. That pass is complete: it read cgroup.procs after every
// process listed before had a SIGKILL pending, a child forked before its
// parent got the signal is already listed (cgroup.procs gains it during
// fork), and one forked after it is never born (fork fails once a fatal
// signal is pending).
//
// "Already killed" is tracked by pidfd, not by pid: a pid listed again
// after its process died belongs to a new process (pid reuse), which the
// pidfd of the old one exposes by being readable (pidfd_open(2): "the file
// descriptor becomes readable when the process terminates").
func (g *Group) killEach() error {
	killed := make(map[int]proc)
	defer func() {
		for _, p := range killed {
			p.close()
		}
	}()
	// failed holds the processes the kernel refused to signal (EPERM):
	// reported once, not retried on every pass.
	failed := make(map[int]error)
	deadline := time.Now().Add(killBound)
	for pass := 0; pass < killPasses && time.Now().Before(deadline); pass++ {
		pids, err := g.PIDs()
		if err != nil {
			return err
		}
		fresh := 0
		for _, pid := range pids {
			if _, ok := failed[pid]; ok {
				continue
			}
			if p, ok := killed[pid]; ok {
				if !p.exited() {
					continue
				}
				p.close()
				delete(killed, pid)
			}
			p, err := openProc(pid)
			if err == nil {
				err = p.signal(unix.SIGKILL)
			}
			switch {
			case err == nil:
				killed[pid] = p
				fresh++
				continue
			case !errors.Is(err, unix.ESRCH):
				failed[pid] = fmt.Errorf("pid %d: %w", pid, err)
			}
			p.close()
		}
		if fresh == 0 {
			errs := make([]error, 0, len(failed))
			for _, err := range failed {
				errs = append(errs, err)
			}
			return errors.Join(errs...)
		}
	}
	return ErrKillIncomplete
}

// Signal sends sig once to every process of the group and its
// sub-cgroups (for the SIGTERM and SIGCONT steps of the ladder) and
// returns how many were signalled. A process that exited in between
// (ESRCH) is neither counted nor an error; other failures are joined
// into the error after the rest were signalled.
func (g *Group) Signal(sig syscall.Signal) (int, error) {
	pids, err := g.PIDs()
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, pid := range pids {
		p, err := openProc(pid)
		if err == nil {
			err = p.signal(sig)
			p.close()
		}
		switch {
		case err == nil:
			n++
		case !errors.Is(err, unix.ESRCH):
			errs = append(errs, fmt.Errorf("signal pid %d: %w", pid, err))
		}
	}
	return n, errors.Join(errs...)
}

// proc is one process to signal: a pidfd where the kernel has them
// (pidfd_open(2), Linux 5.3), so a recycled pid is never signalled; the
// bare pid (fd -1) on older kernels.
type proc struct {
	pid, fd int
}

func openProc(pid int) (proc, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case err == nil:
		return proc{pid: pid, fd: fd}, nil
	case errors.Is(err, unix.ENOSYS):
		return proc{pid: pid, fd: -1}, nil
	default:
		return proc{pid: pid, fd: -1}, os.NewSyscallError("pidfd_open", err)
	}
}

func (p proc) signal(sig syscall.Signal) error {
	if p.fd < 0 {
		return os.NewSyscallError("kill", unix.Kill(p.pid, sig))
	}
	// pidfd_send_signal(2): "If the process has terminated, the call
	// fails with ESRCH", whatever now holds the pid.
	return os.NewSyscallError("pidfd_send_signal", unix.PidfdSendSignal(p.fd, sig, nil, 0))
}

// exited reports, without blocking, whether the process has terminated
// (its pidfd polls readable). Without a pidfd it cannot tell, and says no.
func (p proc) exited() bool {
	if p.fd < 0 {
		return false
	}
	fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n > 0
	}
}

func (p proc) close() {
	if p.fd >= 0 {
		_ = unix.Close(p.fd)
	}
}
