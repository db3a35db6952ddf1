// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"context"
	"time"
)

const (
	defaultBeatInterval = time.Second
	minBeatInterval     = time.Millisecond
	// windowBeats is the vouching window in beat intervals when
	// WATCHDOG_USEC is unset: the ratio the default interval keeps to it.
	windowBeats = 3
)

// Heartbeat beats in the background, for as long as the work loop is alive,
// until ctx ends or the client is closed. Run it in its own goroutine:
//
//	go c.Heartbeat(ctx, 0)
//
// Every interval (0 means a third of WATCHDOG_USEC, or 1s when it is unset),
// starting at once, it sends
//
//   - WATCHDOG=1 when the work loop called the client within the window:
//     any method that reports (Ready, Beat, Progress, Usage, ToolCall,
//     Error, Status, Stopping, Trigger, DumpSignal), or Extend and the end
//     of a wait. The creation of the client counts too. The window is
//     WATCHDOG_USEC, or three intervals when it is unset;
//   - else, while a wait declared with Extend lasts, EXTEND_TIMEOUT_USEC of
//     the window or what is left of the wait, whichever is shorter (to
//     systemd, which cannot extend a watchdog: WATCHDOG=1);
//   - else nothing: a work loop that stopped calling the client is no
//     longer vouched for, and the supervisor's heartbeat timeout kills it
//     at most about two timeouts after its last call.
//
// A goroutine that only proves the process lives must never keep a wedged
// agent alive: that is why it stops. Call some method of the client once
// per step of the work loop, and declare waits longer than the timeout.
// The no-op client returns at once.
func (c *Client) Heartbeat(ctx context.Context, interval time.Duration) {
	if !c.supervised {
		return
	}
	if interval <= 0 {
		interval = c.beatInterval()
	}
	window := c.window(interval)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		c.vouch(window)
		select {
		case <-ctx.Done():
			return
		case <-c.done:
			return
		case <-ticker.C:
		}
	}
}

// beatInterval is the default heartbeat interval: a third of the timeout, so
// that one late or dropped beat does not kill the agent.
func (c *Client) beatInterval() time.Duration {
	if c.watchdog <= 0 {
		return defaultBeatInterval
	}
	return max(c.watchdog/3, minBeatInterval)
}

// window is how long after the work loop's last call Heartbeat still
// vouches for it: the heartbeat timeout, or windowBeats intervals.
func (c *Client) window(interval time.Duration) time.Duration {
	if c.watchdog > 0 {
		return c.watchdog
	}
	if interval > maxDuration/windowBeats {
		return maxDuration
	}
	return windowBeats * interval
}

// beat is what one tick of Heartbeat sends.
type beat int

const (
	beatNone     beat = iota // nothing: no call within the window, no wait
	beatWatchdog             // WATCHDOG=1
	beatExtend               // EXTEND_TIMEOUT_USEC=n
)

// nextBeat decides one tick of Heartbeat at now, from when the work loop
// last called the client (active) and when the open waits end (waitEnd, 0
// for none), all in nanoseconds of the same monotonic clock. For beatExtend
// it also returns the extension.
func nextBeat(now, active, waitEnd int64, window time.Duration) (beat, time.Duration) {
	switch {
	case now-active < int64(window):
		return beatWatchdog, 0
	case now < waitEnd:
		return beatExtend, min(window, time.Duration(waitEnd-now))
	}
	return beatNone, 0
}

// vouch runs one tick of Heartbeat. It is not activity of the work loop.
func (c *Client) vouch(window time.Duration) {
	kind, d := nextBeat(c.clock(), c.active.Load(), c.waitEnd.Load(), window)
	if kind == beatNone {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if kind == beatWatchdog || c.systemd {
		c.send(msgWatchdog)
		return
	}
	c.sendUsec("EXTEND_TIMEOUT_USEC=", d)
}

// clock reads the monotonic clock, in nanoseconds since the client's
// creation.
func (c *Client) clock() int64 { return int64(time.Since(c.epoch)) }

// touch records that the work loop called the client now: one atomic store.
func (c *Client) touch() { c.active.Store(c.clock()) }
