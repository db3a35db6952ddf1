// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"sync/atomic"
	"time"
)

// deadman is the dead-man's switch of control_plane.fail_closed_after: a
// host that has not heard from its control plane for after (no poll
// answered) trips it once, and is armed again by the next contact. The
// clock starts when it is made: a host that never reaches its control
// plane trips after that long.
type deadman struct {
	after time.Duration
	trip  func(unreachable time.Duration)
	last  atomic.Int64 // time.Time.UnixNano of the last contact
}

func newDeadman(after time.Duration, trip func(unreachable time.Duration)) *deadman {
	m := &deadman{after: after, trip: trip}
	m.last.Store(time.Now().UnixNano())
	return m
}

// contact records that the control plane answered. A nil deadman does
// nothing.
func (m *deadman) contact() {
	if m != nil {
		m.last.Store(time.Now().UnixNano())
	}
}

// check trips the switch when the last contact is at least after old at
// now and the switch is armed; it returns whether it is tripped.
func (m *deadman) check(now time.Time, tripped bool) bool {
	since := now.Sub(time.Unix(0, m.last.Load()))
	if since < m.after {
		return false
	}
	if !tripped {
		m.trip(since)
	}
	return true
}

// run checks the switch every tenth of after (at least every second,
// at most every 10ms) until ctx ends.
func (m *deadman) run(ctx context.Context) {
	t := time.NewTicker(min(max(m.after/10, 10*time.Millisecond), time.Second))
	defer t.Stop()
	tripped := false
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			tripped = m.check(now, tripped)
		}
	}
}
