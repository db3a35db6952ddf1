// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

var (
	// ErrNoProcess means the process does not exist (any more): its /proc
	// entry is gone (ENOENT) or it was reaped while being read (ESRCH).
	// A zombie still exists until it is reaped.
	ErrNoProcess = errors.New("no such process")
	// ErrMalformed means a proc file did not have the format proc(5) gives.
	ErrMalformed = errors.New("malformed proc file")
	// ErrPartial means a record was returned with some fields unread; the
	// error also wraps the cause of each.
	ErrPartial = errors.New("partial record")
)

// wrapErr adds short context ("stat 42: …") to an error of a read of
// /proc/PID/what, turning ENOENT and ESRCH into ErrNoProcess. The errno stays
// matchable too.
func wrapErr(what string, pid int, err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("%s %d: %w (%w)", what, pid, ErrNoProcess, err)
	}
	return fmt.Errorf("%s %d: %w", what, pid, err)
}

// malformed returns an ErrMalformed saying which file and why.
func malformed(file, why string) error {
	return fmt.Errorf("%w: %s: %s", ErrMalformed, file, why)
}
