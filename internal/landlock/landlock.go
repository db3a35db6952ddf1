// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package landlock confines a thread, and everything it executes, with the
// kernel's Landlock LSM: signals scoped to the thread's own domain, and
// writes allowed only beneath a list of paths. It owns the three system
// calls and which access rights each ABI version knows; it never decides
// what an agent gets (that is the caller's).
//
// What a domain does (landlock(7), the kernel's
// Documentation/userspace-api/landlock.rst):
//
//   - A process in a domain cannot ptrace a process outside it (every ABI):
//     "the tracee must be in a sub-domain of the tracer".
//   - With LANDLOCK_SCOPE_SIGNAL (ABI 6, Linux 6.12) it cannot send a signal
//     to a process outside it, whatever its uid and capabilities; signals
//     from outside into the domain are unaffected, and so are signals the
//     kernel sends (SIGCHLD to the parent, a parent-death signal).
//   - The file system rights it handles are denied except beneath the paths
//     a rule grants them on; rights it does not handle (here: reading,
//     listing and executing) stay as they were. Files opened before the
//     restriction keep what they were opened with.
//
// A domain is inherited by every child and kept across execve(2); it can
// only be narrowed, never left. landlock_restrict_self(2) confines the
// calling thread only: the caller locks its goroutine to its thread and
// executes the program from that thread.
//
// References: landlock(7), landlock_create_ruleset(2), landlock_add_rule(2),
// landlock_restrict_self(2); https://docs.kernel.org/userspace-api/landlock.html
package landlock

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The ABI versions that brought what hermeskilld uses.
const (
	// FilesABI confines writes (Linux 5.13).
	FilesABI = 1
	// SignalsABI scopes signals (Linux 6.12).
	SignalsABI = 6
	// LoggingABI logs denials through the audit subsystem, also after an
	// execve(2) when asked to (Linux 6.15).
	LoggingABI = 7
)

// Matchable errors.
var (
	// ErrUnsupported: the kernel lacks the ABI a ruleset needs.
	ErrUnsupported = errors.New("not supported by this kernel's Landlock")
	// ErrEmpty: a ruleset that restricts nothing (the kernel refuses it).
	ErrEmpty = errors.New("empty ruleset")
)

// ABI returns the kernel's Landlock ABI version, 0 when the kernel has no
// Landlock: not built (ENOSYS) or not enabled at boot (EOPNOTSUPP, the lsm=
// list lacks it).
func ABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// Ruleset is what a domain restricts.
type Ruleset struct {
	// ScopeSignals denies signals to processes outside the domain.
	ScopeSignals bool
	// Writable, when not nil, are the only paths beneath which files may
	// be written, created, removed, renamed or truncated; everything else
	// is read-only. Each must exist.
	Writable []string
}

// Restricts reports whether r restricts anything.
func (r Ruleset) Restricts() bool { return r.ScopeSignals || r.Writable != nil }

// String names what r restricts, the way status and certificates say it:
// "signals", "files", "signals+files", or "none".
func (r Ruleset) String() string {
	var parts []string
	if r.ScopeSignals {
		parts = append(parts, "signals")
	}
	if r.Writable != nil {
		parts = append(parts, "files")
	}
	if parts == nil {
		return "none"
	}
	return strings.Join(parts, "+")
}

// Needs is the ABI version r needs; 0 when it restricts nothing.
func (r Ruleset) Needs() int {
	switch {
	case r.ScopeSignals:
		return SignalsABI
	case r.Writable != nil:
		return FilesABI
	}
	return 0
}

// writeRights are the file system rights that change something, as the
// kernel of ABI abi knows them: REFER (ABI 2: linking or renaming into
// another directory; without it, ABI 1 denies that everywhere) and
// TRUNCATE (ABI 3) on top of ABI 1's. Reading, listing, executing and
// device ioctls (IOCTL_DEV, ABI 5) are not handled: they stay allowed.
func writeRights(abi int) uint64 {
	r := uint64(unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_CHAR |
		unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO |
		unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_MAKE_SYM)
	if abi >= 2 {
		r |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		r |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	return r
}

// fileRights are the rights that apply to a file that is not a directory
// (the kernel refuses a rule granting the others on one: EINVAL).
const fileRights = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE

// rulesetAttr is struct landlock_ruleset_attr up to the field ABI 6 added;
// the kernel zero-fills fields it knows past a shorter struct and refuses
// non-zero bytes past its own (copy_struct_from_user).
type rulesetAttr struct {
	handledAccessFS  uint64
	handledAccessNet uint64
	scoped           uint64
}

// RestrictSelf confines the calling thread by r, on a kernel of Landlock
// ABI abi (from ABI). Without CAP_SYS_ADMIN the thread is given
// no_new_privs first, as the kernel requires (prctl(2)
// PR_SET_NO_NEW_PRIVS: execve(2) then never grants privileges, set-user-ID
// bits included). Errors are *os.SyscallError of the failed call,
// *fs.PathError of a writable path that cannot be opened, ErrEmpty and
// ErrUnsupported.
func RestrictSelf(r Ruleset, abi int) error {
	if !r.Restricts() {
		return ErrEmpty
	}
	if need := r.Needs(); abi < need {
		return fmt.Errorf("Landlock ABI %d, needs %d: %w", abi, need, ErrUnsupported)
	}
	var attr rulesetAttr
	if r.ScopeSignals {
		attr.scoped = unix.LANDLOCK_SCOPE_SIGNAL
	}
	if r.Writable != nil {
		attr.handledAccessFS = writeRights(abi)
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return os.NewSyscallError("landlock_create_ruleset", errno)
	}
	defer unix.Close(int(fd))
	for _, p := range r.Writable {
		if err := allow(int(fd), p, attr.handledAccessFS); err != nil {
			return err
		}
	}
	var flags uintptr
	if abi >= LoggingABI {
		// The agent is executed after the restriction, and denials after
		// an execve(2) are logged only with this flag; package denials
		// counts them. Nothing is logged while the kernel's auditing is
		// off.
		flags = unix.LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON
	}
	if err := restrict(int(fd), flags); err != nil {
		return err
	}
	return nil
}

// allow grants rights beneath path (a file: the rights a file has).
func allow(ruleset int, path string, rights uint64) error {
	pfd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		rights &= fileRights
	}
	rule := unix.LandlockPathBeneathAttr{Allowed_access: rights, Parent_fd: int32(pfd)}
	// struct landlock_path_beneath_attr is packed: 12 bytes, not the 16
	// of Go's layout.
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
	if errno != 0 {
		return &os.PathError{Op: "landlock_add_rule", Path: path, Err: errno}
	}
	return nil
}

// restrict enforces the ruleset on the calling thread, asking for
// no_new_privs only when the kernel requires it (EPERM: neither it nor
// CAP_SYS_ADMIN).
func restrict(ruleset int, flags uintptr) error {
	_, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), flags, 0)
	if errno == unix.EPERM {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return os.NewSyscallError("prctl PR_SET_NO_NEW_PRIVS", err)
		}
		_, _, errno = unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), flags, 0)
	}
	if errno != 0 {
		return os.NewSyscallError("landlock_restrict_self", errno)
	}
	return nil
}
