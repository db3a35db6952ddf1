// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestNextBeat is the rule of Heartbeat, to the nanosecond: WATCHDOG=1
// while the work loop called within the window, else EXTEND_TIMEOUT_USEC
// while a declared wait lasts (never past its end), else nothing.
func TestNextBeat(t *testing.T) {
	const s = int64(time.Second)
	window := 3 * time.Second
	for _, tc := range []struct {
		name                 string
		now, active, waitEnd int64
		kind                 beat
		extend               time.Duration
	}{
		{"just called", 10 * s, 10 * s, 0, beatWatchdog, 0},
		{"called a nanosecond inside the window", 13*s - 1, 10 * s, 0, beatWatchdog, 0},
		{"called exactly a window ago", 13 * s, 10 * s, 0, beatNone, 0},
		{"silent for long", time.Hour.Nanoseconds(), 10 * s, 0, beatNone, 0},
		{"a call after now (another goroutine)", 10 * s, 10*s + 1, 0, beatWatchdog, 0},
		{"a recent call wins over a wait", 10 * s, 9 * s, 100 * s, beatWatchdog, 0},
		{"silent inside a long wait: the window", 20 * s, 10 * s, 100 * s, beatExtend, window},
		{"silent near the end of a wait: what is left", 99 * s, 10 * s, 100 * s, beatExtend, time.Second},
		{"a nanosecond left", 100*s - 1, 10 * s, 100 * s, beatExtend, 1},
		{"the wait is over", 100 * s, 10 * s, 100 * s, beatNone, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind, d := nextBeat(tc.now, tc.active, tc.waitEnd, window)
			require.Equal(t, tc.kind, kind)
			require.Equal(t, tc.extend, d)
		})
	}
}

func TestWindow(t *testing.T) {
	c := newClient()
	require.Equal(t, 3*time.Second, c.window(time.Second), "three intervals without WATCHDOG_USEC")
	require.Equal(t, maxDuration, c.window(maxDuration/2), "saturated")
	c.watchdog = 600 * time.Millisecond
	require.Equal(t, 600*time.Millisecond, c.window(10*time.Millisecond), "the heartbeat timeout")
}
