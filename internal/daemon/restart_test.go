// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/config"
)

func TestRestartBackoffDoublesAndCaps(t *testing.T) {
	p := config.Restart{Backoff: time.Second, MaxBackoff: 5 * time.Second, MaxRestarts: 100, Window: time.Hour,
		StableAfter: time.Minute}
	now := time.Unix(1_000_000, 0)
	var h restarts
	var delays []time.Duration
	for range 5 {
		var at time.Time
		var failed string
		h, at, failed = h.next(p, "bot", time.Second, now)
		require.Empty(t, failed)
		delays = append(delays, at.Sub(now))
		now = at.Add(time.Second) // ran a second, then crashed
	}
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}, delays)

	// A run that lasted stable_after resets the backoff.
	_, at, _ := h.next(p, "bot", time.Minute, now)
	require.Equal(t, time.Second, at.Sub(now))
}

func TestRestartCrashLoop(t *testing.T) {
	p := config.Restart{Backoff: time.Second, MaxBackoff: time.Second, MaxRestarts: 3, Window: 10 * time.Minute}
	now := time.Unix(1_000_000, 0)
	var h restarts
	for i := range 3 {
		var failed string
		h, _, failed = h.next(p, "bot", 0, now.Add(time.Duration(i)*time.Minute))
		require.Empty(t, failed, "restart %d", i+1)
	}
	_, _, failed := h.next(p, "bot", 0, now.Add(3*time.Minute))
	require.True(t, strings.HasPrefix(failed, "crash loop: 3 restarts within 10m"), failed)
	require.Contains(t, failed, "hermeskilld release bot")

	// Restarts that fell out of the window no longer count.
	_, _, failed = h.next(p, "bot", 0, now.Add(11*time.Minute))
	require.Empty(t, failed)
}

// The history is a value: deciding never changes the caller's copy.
func TestRestartIsPure(t *testing.T) {
	p := config.Restart{Backoff: time.Second, MaxBackoff: time.Minute, MaxRestarts: 5, Window: time.Hour}
	now := time.Unix(1_000_000, 0)
	h := restarts{at: []time.Time{now.Add(-2 * time.Hour), now.Add(-time.Minute)}, failures: 1}
	before := restarts{at: append([]time.Time(nil), h.at...), failures: h.failures}
	h2, at1, _ := h.next(p, "bot", 0, now)
	_, at2, _ := h.next(p, "bot", 0, now)
	require.Equal(t, before, h, "the input history is untouched")
	require.Equal(t, at1, at2, "same inputs, same decision")
	require.Len(t, h2.at, 2, "the restart two hours ago left the window; this one joined it")
}
