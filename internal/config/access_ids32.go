// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux && (386 || arm)

package config

import "golang.org/x/sys/unix"

// The system calls that take 32-bit ids: on 386 and arm the ones without
// the suffix take 16-bit ids.
const (
	sysSetgroups = unix.SYS_SETGROUPS32
	sysSetresgid = unix.SYS_SETRESGID32
	sysSetresuid = unix.SYS_SETRESUID32
)
