// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup

import (
	"errors"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reaper reaps every child that is not a managed process: orphans
// reparented to us (we are a child subreaper, or PID 1). It never reaps a
// managed process — that one's owner waits on it through its pidfd — by
// peeking first with waitid(WNOWAIT) and reaping only the pid it saw.
type reaper struct {
	// mu is held by Start across fork+register, so a child that exits
	// immediately is never mistaken for an orphan before it is registered.
	mu      sync.Mutex
	managed map[int]chan struct{} // closed once the owner reaped the pid

	orphans atomic.Uint64
	onReap  func(pid int, ws unix.WaitStatus)

	sigs      chan os.Signal
	kick      chan struct{}
	stop      chan struct{}
	closeOnce sync.Once
	done      chan struct{}
}

func newReaper(onReap func(int, unix.WaitStatus)) *reaper {
	r := &reaper{
		managed: make(map[int]chan struct{}),
		onReap:  onReap,
		sigs:    make(chan os.Signal, 1),
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	signal.Notify(r.sigs, syscall.SIGCHLD)
	go r.loop()
	return r
}

func (r *reaper) close() {
	r.closeOnce.Do(func() {
		signal.Stop(r.sigs)
		close(r.stop)
	})
	<-r.done
}

// manage registers pid; the caller holds r.mu.
func (r *reaper) manageLocked(pid int) {
	r.managed[pid] = make(chan struct{})
}

// released is called by a managed process's owner once it reaped it.
func (r *reaper) released(pid int) {
	r.mu.Lock()
	ch := r.managed[pid]
	delete(r.managed, pid)
	r.mu.Unlock()
	if ch != nil {
		close(ch)
	}
	r.poke()
}

func (r *reaper) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *reaper) loop() {
	defer close(r.done)
	for {
		r.reapAll()
		select {
		case <-r.sigs:
		case <-r.kick:
		case <-r.stop:
			return
		}
	}
}

// reapAll reaps every waitable orphan, deferring to owners of managed pids.
func (r *reaper) reapAll() {
	for {
		r.mu.Lock()
		pid, err := peekZombie()
		if err != nil || pid == 0 {
			r.mu.Unlock()
			return
		}
		if ch, ok := r.managed[pid]; ok {
			r.mu.Unlock()
			// Its owner is blocked in waitid on the pidfd and reaps it
			// now; once it has, waitid can report the next zombie.
			select {
			case <-ch:
				continue
			case <-r.stop:
				return
			}
		}
		var ws unix.WaitStatus
		got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		r.mu.Unlock()
		if err == nil && got == pid {
			r.orphans.Add(1)
			if r.onReap != nil {
				r.onReap(pid, ws)
			}
		}
	}
}

// peekZombie returns the pid of a child that has exited, without reaping
// it (waitid(2) WNOWAIT), 0 when none has, or ECHILD when we have no child.
func peekZombie() (int, error) {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if err != nil {
		return 0, err
	}
	return siginfoPID(&info), nil
}

// siginfoPID reads si_pid: the siginfo union follows si_signo, si_errno
// and si_code, aligned to the pointer size (offset 16 on 64-bit Linux, 12 on
// 32-bit; <asm-generic/siginfo.h>), and for SIGCHLD si_pid comes first.
func siginfoPID(info *unix.Siginfo) int {
	const ptr = unsafe.Sizeof(uintptr(0))
	const off = (12 + ptr - 1) &^ (ptr - 1)
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(info), off)))
}

// hasChildren reports whether this process has any child, live or zombie.
func hasChildren() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WSTOPPED|unix.WCONTINUED|unix.WNOHANG|unix.WNOWAIT, nil)
	return !errors.Is(err, unix.ECHILD)
}
