// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// maxAddressLen is the longest address x/sys/unix accepts: sun_path is 108
// bytes and a path needs its terminating NUL (see unix(7)).
// internal/sockpath.Max again, because agents import this package alone: it uses only the standard library and x/sys.
const maxAddressLen = len(unix.RawSockaddrUnix{}.Path) - 1

// parseAddress turns a socket address into a sockaddr. addr is an absolute
// path, or "@name" for Linux's abstract namespace, where '@' stands for the
// leading NUL byte (the convention of systemd's NOTIFY_SOCKET).
func parseAddress(addr string) (*unix.SockaddrUnix, error) {
	switch {
	case len(addr) < 2 || (addr[0] != '/' && addr[0] != '@'):
		return nil, fmt.Errorf("%w: %q: want an absolute path or @name", ErrBadAddress, addr)
	case len(addr) > maxAddressLen:
		return nil, fmt.Errorf("%w: %q: longer than %d bytes", ErrBadAddress, addr, maxAddressLen)
	}
	return &unix.SockaddrUnix{Name: addr}, nil
}

// envAddress returns the supervisor's address from the environment:
// HERMESKILL_SOCKET wins over NOTIFY_SOCKET; empty means unset.
func envAddress() (name, addr string) {
	for _, name := range []string{"HERMESKILL_SOCKET", "NOTIFY_SOCKET"} {
		if addr := os.Getenv(name); addr != "" {
			return name, addr
		}
	}
	return "", ""
}

// WatchdogFromEnv returns the watchdog timeout this process's supervisor
// (hermeskilld, or systemd with WatchdogSec=) expects it to keep:
// WATCHDOG_USEC as a duration, or 0 when it is unset or meant for another
// process (WATCHDOG_PID), as sd_watchdog_enabled(3) reads them. FromEnv
// uses it; so does hermeskilld, to keep systemd's watchdog.
//
// Errors: ErrBadWatchdog when WATCHDOG_USEC is not a positive whole number
// of microseconds that fits a time.Duration.
func WatchdogFromEnv() (time.Duration, error) {
	v := os.Getenv("WATCHDOG_USEC")
	if v == "" {
		return 0, nil
	}
	if pid := os.Getenv("WATCHDOG_PID"); pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return 0, nil
	}
	usec, err := strconv.ParseUint(v, 10, 63)
	if err != nil || usec == 0 || usec > uint64(maxDuration/time.Microsecond) {
		return 0, fmt.Errorf("%w: %q", ErrBadWatchdog, v)
	}
	return time.Duration(usec) * time.Microsecond, nil
}

const maxDuration = time.Duration(1<<63 - 1)
