// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package client

import "time"

// SetClock replaces the clock that paces reconnects.
func SetClock(c *Client, now func() time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = now
}

// BeatInterval returns the interval Heartbeat uses when given 0.
func BeatInterval(c *Client) time.Duration { return c.beatInterval() }

// SetWatchdog sets the heartbeat timeout as WATCHDOG_USEC would. Call it
// before Heartbeat starts.
func SetWatchdog(c *Client, d time.Duration) { c.watchdog = d }

// Tick runs one tick of Heartbeat with its default interval.
func Tick(c *Client) { c.vouch(c.window(c.beatInterval())) }
