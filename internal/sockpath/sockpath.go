// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package sockpath holds the rule every AF_UNIX socket path must meet,
// whoever binds or connects it: it fits in struct sockaddr_un's sun_path,
// 108 bytes on Linux including the terminating NUL (unix(7)). A longer
// path cannot be bound at all, and the kernel does not say why.
package sockpath

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Max is the longest socket path, in bytes: sun_path less its NUL.
const Max = len(unix.RawSockaddrUnix{}.Path) - 1

// ErrTooLong: a socket path does not fit in sun_path.
var ErrTooLong = errors.New("socket path too long for sun_path (max " + fmt.Sprint(Max) + " bytes)")

// Check returns nil when path fits in sun_path, and else ErrTooLong
// wrapped with the path and its length.
func Check(path string) error {
	if len(path) > Max {
		return fmt.Errorf("%q (%d bytes): %w", path, len(path), ErrTooLong)
	}
	return nil
}
