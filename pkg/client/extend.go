// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"slices"
	"strconv"
	"sync/atomic"
	"time"
)

// Extend declares that the work loop is about to wait up to d in a call
// that cannot report meanwhile (a model request of minutes, a long tool),
// and returns the function that ends the wait:
//
//	end := c.Extend(5 * time.Minute)
//	answer, err := llm.Complete(ctx, prompt)
//	end()
//
// It sends EXTEND_TIMEOUT_USEC=d, so the supervisor knows, and bounds it:
// hermeskilld lets extensions in a row run at most its max_extension past
// the heartbeat timeout. While the wait lasts Heartbeat keeps the agent
// vouched for, with EXTEND_TIMEOUT_USEC (WATCHDOG=1 to systemd), for at
// most d: a call that hangs past its declared time is not vouched for.
// Extend and end both count as activity of the work loop (see Heartbeat).
//
// Waits may overlap (one per goroutine): the longest open one counts. end
// may be called more than once, and from any goroutine; calls after the
// first do nothing. A d of 0 or less declares nothing. The no-op client
// returns a function that does nothing.
func (c *Client) Extend(d time.Duration) (end func()) {
	if !c.supervised {
		return func() {}
	}
	now := c.clock()
	c.active.Store(now)
	if d <= 0 {
		return func() {}
	}
	until := now + int64(min(d, maxDuration-time.Duration(now)))

	c.mu.Lock()
	c.waits = append(c.waits, until)
	c.waitEnd.Store(slices.Max(c.waits))
	c.sendUsec("EXTEND_TIMEOUT_USEC=", d)
	c.mu.Unlock()

	var ended atomic.Bool
	return func() {
		if !ended.CompareAndSwap(false, true) {
			return
		}
		c.mu.Lock()
		if i := slices.Index(c.waits, until); i >= 0 {
			c.waits = slices.Delete(c.waits, i, i+1)
		}
		last := int64(0)
		if len(c.waits) > 0 {
			last = slices.Max(c.waits)
		}
		c.waitEnd.Store(last)
		c.mu.Unlock()
		c.touch()
	}
}

// sendUsec sends prefix followed by d in microseconds, rounded up (a wait of
// a nanosecond is not one of 0 µs). The caller holds c.mu.
func (c *Client) sendUsec(prefix string, d time.Duration) {
	usec := uint64(d / time.Microsecond)
	if d%time.Microsecond != 0 {
		usec++
	}
	c.buf = strconv.AppendUint(append(c.buf[:0], prefix...), usec, 10)
	c.send(c.buf)
}
