// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package fdreserve keeps a few descriptors in reserve for the kill path
// and the record: when an operation fails because the process is out of
// descriptors (EMFILE, ENFILE), Do gives the reserve back to the kernel,
// retries the operation once, and takes the reserve again.
//
// The reserve is process-wide, as the descriptor table is. It is best
// effort: a descriptor freed for the retry may be taken by another
// goroutine first (the gateway and the control socket bound their
// connections so that this is rare), and then the retry fails as the
// first try did, and the caller records what it could not do.
package fdreserve

import (
	"errors"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Size is how many descriptors Hold keeps: enough for a cgroup.kill, a
// /proc scan (the directory and one stat file at a time) and a
// certificate's write (the file, its directory, a lock) at once.
const Size = 16

var (
	mu   sync.Mutex
	held []int

	// Used counts the operations that needed the reserve.
	used atomic.Uint64
)

// Hold fills the reserve up to Size descriptors (of /dev/null, close on
// exec, so no child inherits them). Calling it again tops the reserve up.
// Its error is that of the first descriptor it could not get; what it got
// is kept.
func Hold() error {
	mu.Lock()
	defer mu.Unlock()
	for len(held) < Size {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		held = append(held, fd)
	}
	return nil
}

// Held is how many descriptors are in reserve.
func Held() int {
	mu.Lock()
	defer mu.Unlock()
	return len(held)
}

// Used is how many operations were retried on the reserve.
func Used() uint64 { return used.Load() }

// Exhausted reports whether err says the process or the system is out of
// descriptors.
func Exhausted(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE)
}

// Do runs f; when f fails for want of descriptors, it frees the reserve,
// runs f again and returns what the retry returned, then takes the
// reserve back (as far as descriptors allow). Concurrent Dos that fail
// share one release.
func Do(f func() error) error {
	err := f()
	if !Exhausted(err) {
		return err
	}
	used.Add(1)
	mu.Lock()
	for _, fd := range held {
		unix.Close(fd)
	}
	held = held[:0]
	mu.Unlock()
	err = f()
	_ = Hold()
	return err
}
