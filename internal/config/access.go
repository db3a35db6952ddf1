// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Whether a user may enter a directory or execute a file is asked of the
// kernel rather than worked out from modes and ACLs: a thread takes the
// user's uid, gid and supplementary groups, as the agent will run, and
// calls faccessat2(2) with AT_EACCESS for each path. The kernel applies
// everything it applies at exec time: the mode bits, POSIX ACLs, root's
// capabilities, a noexec mount, security modules.
//
// The change of credentials is made with raw system calls, which change
// the calling thread only (syscall.Setuid and its kin change every thread
// of the process). The thread is locked to its goroutine and never
// unlocked, so the Go runtime ends it when the goroutine returns instead
// of running other goroutines on it; nor does the runtime clone new
// threads from a locked one. Only the effective ids (and with them the
// file system ids, which the permission checks use) are the user's: the
// real and saved uid stay root's, so that no process of that user may
// signal the thread (a SIGKILL or SIGSTOP sent to one thread stops the
// whole process) or trace it.

// errNeedsRoot: only root may take another user's credentials.
var errNeedsRoot = errors.New("needs hermeskilld to run as root")

// mayAsk says whether this process can ask the kernel what cred may do:
// nil is this process itself, another user needs root.
func mayAsk(cred *syscall.Credential) bool {
	euid := os.Geteuid()
	return cred == nil || euid == 0 || int(cred.Uid) == euid
}

// kernelExec asks the kernel whether cred may execute each of paths
// (search a directory, execute a file). The answer for a path is nil when
// it may, else faccessat2's error as an *os.PathError (unix.EACCES when
// it may not). cred nil is this process, as is cred of our own uid when
// we are not root (such an agent runs with our credentials); root takes
// cred's. Another user's answers need root: errNeedsRoot.
func kernelExec(cred *syscall.Credential, paths []string) (map[string]error, error) {
	euid := os.Geteuid()
	switch {
	case cred == nil || euid != 0 && int(cred.Uid) == euid:
		return accessAll(paths, func() bool { return os.Getuid() == euid && os.Getgid() == os.Getegid() }), nil
	case euid != 0:
		return nil, errNeedsRoot
	}
	type result struct {
		access map[string]error
		err    error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// The main thread is never ended: a goroutine locked to it
			// that returns leaves it parked for good, with the
			// credentials it had. Held here, it cannot run the probe
			// started again, which takes another thread.
			access, err := kernelExec(cred, paths)
			runtime.UnlockOSThread()
			done <- result{access, err}
			return
		}
		// Never unlocked: the thread ends with this goroutine.
		if err := setThreadCredential(cred); err != nil {
			done <- result{err: fmt.Errorf("take the credentials of uid %d: %w", cred.Uid, err)}
			return
		}
		done <- result{access: accessAll(paths, func() bool { return setThreadRealIDs(cred) == nil })}
	}()
	r := <-done
	return r.access, r.err
}

// accessAll calls faccessat2(X_OK, AT_EACCESS) for each path. Without
// faccessat2 (kernels before 5.8, or a seccomp filter that refuses
// system calls it does not know), plain faccessat, which checks the real
// ids, answers the same question once realIDs has made them the
// effective ones (it is called once, and says whether it could).
func accessAll(paths []string, realIDs func() bool) map[string]error {
	out := make(map[string]error, len(paths))
	plain, asked := false, false
	for _, p := range paths {
		op, err := "faccessat2", error(nil)
		if !plain {
			err = unix.Faccessat2(unix.AT_FDCWD, p, unix.X_OK, unix.AT_EACCESS)
			if !asked && (errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM)) {
				asked, plain = true, realIDs()
			}
		}
		if plain {
			op, err = "faccessat", unix.Faccessat(unix.AT_FDCWD, p, unix.X_OK, 0)
		}
		if err != nil {
			err = &os.PathError{Op: op, Path: p, Err: err}
		}
		out[p] = err
	}
	return out
}

// setThreadCredential gives the calling thread cred's supplementary
// groups, and its gid and uid as effective ids (and file system ids), in
// that order: once the effective uid is not root, the thread has no
// capabilities left to change the others. The real and saved ids stay
// ours. The caller must have locked the thread and must never unlock it.
func setThreadCredential(cred *syscall.Credential) error {
	groups := cred.Groups
	var list unsafe.Pointer
	if len(groups) > 0 {
		list = unsafe.Pointer(&groups[0])
	}
	if _, _, e := syscall.RawSyscall(sysSetgroups, uintptr(len(groups)), uintptr(list), 0); e != 0 {
		return os.NewSyscallError("setgroups", e)
	}
	return setThreadIDs(keep, uintptr(cred.Gid), keep, uintptr(cred.Uid))
}

// setThreadRealIDs makes cred's gid and uid the real ids of the calling
// thread as well, which setThreadCredential made its effective ones (an
// unprivileged thread may). A process of that user may then signal the
// thread: only plain faccessat, on kernels without faccessat2, needs it.
func setThreadRealIDs(cred *syscall.Credential) error {
	return setThreadIDs(uintptr(cred.Gid), keep, uintptr(cred.Uid), keep)
}

// keep leaves an id of setresgid and setresuid as it is.
const keep = ^uintptr(0)

// setThreadIDs sets the real and effective gid, then uid, of the calling
// thread (setresgid, setresuid; the saved ids are kept).
func setThreadIDs(rgid, egid, ruid, euid uintptr) error {
	if _, _, e := syscall.RawSyscall(sysSetresgid, rgid, egid, keep); e != 0 {
		return os.NewSyscallError("setresgid", e)
	}
	if _, _, e := syscall.RawSyscall(sysSetresuid, ruid, euid, keep); e != 0 {
		return os.NewSyscallError("setresuid", e)
	}
	return nil
}
