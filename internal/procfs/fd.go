// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import "golang.org/x/sys/unix"

// NumFDs returns the number of open file descriptors of the process, the
// entries of /proc/PID/fd. A zombie, or a process whose main thread has
// exited, has none listed. The error wraps ErrNoProcess when the process
// does not exist, and [io/fs.ErrPermission] when the caller may not ptrace it
// (proc(5): the directory needs PTRACE_MODE_READ_FSCREDS).
//
// On a real proc filesystem since Linux 6.2 the count is the st_size of the
// directory (torvalds/linux@f1f1f2569901), a stat(2) instead of a listing,
// and the cost no longer grows with the number of descriptors, which is the
// case the fds check exists for. Elsewhere (older kernels, fixtures) it
// counts the entries with getdents64(2).
func (fs FS) NumFDs(pid int) (int, error) {
	path := fs.path(pid, "fd")
	if n, ok := fs.fdCountFromSize(path); ok {
		return n, nil
	}
	n, err := countDirents(path)
	if err != nil {
		return 0, wrapErr("fd", pid, err)
	}
	return n, nil
}

// fdCountFromSize returns the st_size of the fd directory at path when the
// root is a proc filesystem and the kernel reports a count there. Any error
// sends the caller to the listing, which reports it properly.
func (fs FS) fdCountFromSize(path string) (int, bool) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil || st.Size <= 0 {
		return 0, false
	}
	// Directories of other file systems have sizes too (4096 on ext4):
	// trust st_size only on procfs.
	if !fs.isProcfs() {
		return 0, false
	}
	return int(st.Size), true
}

// isProcfs reports whether Root is a proc filesystem (not a fixture).
func (fs FS) isProcfs() bool {
	var sfs unix.Statfs_t
	return unix.Statfs(fs.Root, &sfs) == nil && sfs.Type == unix.PROC_SUPER_MAGIC
}

// countDirents counts the entries of the directory at path.
func countDirents(path string) (int, error) {
	n := 0
	err := readDirNames(path, func([]byte) { n++ })
	if err != nil {
		return 0, err
	}
	return n, nil
}
