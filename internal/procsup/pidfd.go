// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup

import (
	"errors"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// waitPidfd waits for the child behind pidfd to exit and reaps it. A
// pidfd becomes readable when its process exits (pidfd_open(2)), so the
// wait is a netpoller registration, not a thread blocked in waitid(2);
// the reap is waitid(P_PIDFD, WNOHANG), which — unlike waitid(P_ALL) —
// cannot take any other child's status. f is the pidfd, made by
// newPidfdFile; the caller closes it.
func waitPidfd(f *os.File) (ExitStatus, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return ExitStatus{}, err
	}
	var (
		info   unix.Siginfo
		rusage unix.Rusage
		werr   error
		reaped bool
	)
	err = rc.Read(func(fd uintptr) bool {
		for {
			info = unix.Siginfo{}
			werr = unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG, &rusage)
			if werr == unix.EINTR {
				continue
			}
			break
		}
		if werr != nil {
			return true // a real error: stop waiting
		}
		reaped = siginfoPID(&info) != 0
		return reaped // not exited yet: wait until the pidfd is readable
	})
	if err != nil {
		return ExitStatus{}, err
	}
	if werr != nil {
		return ExitStatus{}, os.NewSyscallError("waitid P_PIDFD", werr)
	}
	return exitStatus(&info, &rusage), nil
}

// newPidfdFile makes the File of a pidfd, non-blocking so that waitPidfd
// waits in the netpoller. On error the pidfd is closed.
func newPidfdFile(pidfd int) (*os.File, error) {
	if err := unix.SetNonblock(pidfd, true); err != nil {
		unix.Close(pidfd)
		return nil, os.NewSyscallError("fcntl O_NONBLOCK", err)
	}
	return os.NewFile(uintptr(pidfd), "pidfd"), nil
}

// signalPidfd sends sig through f (pidfd_send_signal(2)). The process
// having exited is os.ErrProcessDone; the pidfd closed (the child reaped)
// too.
func signalPidfd(f *os.File, sig syscall.Signal) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.PidfdSendSignal(int(fd), sig, nil, 0) }); err != nil {
		if errors.Is(err, os.ErrClosed) {
			return os.ErrProcessDone
		}
		return err
	}
	if errors.Is(serr, unix.ESRCH) {
		return os.ErrProcessDone
	}
	if serr != nil {
		return os.NewSyscallError("pidfd_send_signal", serr)
	}
	return nil
}

// siginfoStatus reads si_status: the SIGCHLD union holds si_pid, si_uid,
// then si_status (see siginfoPID for the union's offset).
func siginfoStatus(info *unix.Siginfo) int {
	const ptr = unsafe.Sizeof(uintptr(0))
	const off = (12 + ptr - 1) &^ (ptr - 1)
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(info), off+8)))
}

// CLD_* codes of siginfo_t for SIGCHLD (<asm-generic/siginfo.h>).
const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
	// cldStopped: stopped by a signal, si_status (waitid WSTOPPED).
	cldStopped = 5
)

// exitStatus decodes a waitid siginfo: si_code says how the child ended,
// si_status is the exit code or the signal (waitid(2)).
func exitStatus(info *unix.Siginfo, ru *unix.Rusage) ExitStatus {
	status := siginfoStatus(info)
	es := ExitStatus{
		UserCPU: time.Duration(ru.Utime.Nano()),
		SysCPU:  time.Duration(ru.Stime.Nano()),
		MaxRSS:  ru.Maxrss * 1024,
	}
	switch info.Code {
	case cldExited:
		es.Code = status
	case cldKilled, cldDumped:
		es.Signaled, es.Signal, es.CoreDumped = true, syscall.Signal(status), info.Code == cldDumped
	}
	return es
}
