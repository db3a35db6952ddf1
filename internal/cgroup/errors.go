// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import "errors"

// Errors a caller can match with errors.Is. Each is returned wrapped with
// the path or the reason it applies to.
var (
	// ErrUnavailable: there is no cgroup v2 hierarchy this process may
	// write to; containment falls back to process groups.
	ErrUnavailable = errors.New("cgroup: no writable cgroup v2 hierarchy")

	// ErrFreezeUnsupported: the cgroup has no cgroup.freeze (Linux < 5.2).
	ErrFreezeUnsupported = errors.New("cgroup: cgroup.freeze not supported")

	// ErrKillIncomplete: the fallback kill (no cgroup.kill) still found
	// processes it had not signalled when its bound ran out, i.e. the
	// tree forked faster than it could be killed.
	ErrKillIncomplete = errors.New("cgroup: processes left unsignalled")

	// ErrBusy: the cgroup could not be removed because processes are
	// still in it (for instance in uninterruptible sleep after SIGKILL).
	ErrBusy = errors.New("cgroup: still populated")
)

// errNoUnifiedLine: /proc/PID/cgroup names no cgroup v2 cgroup (a pure
// cgroup v1 host, or a kernel without cgroup2). Detect wraps it in
// ErrUnavailable.
var errNoUnifiedLine = errors.New(`no "0::" line`)
