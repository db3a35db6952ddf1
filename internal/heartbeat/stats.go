// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat

import (
	"sync/atomic"
	"time"
)

// Stats are the socket's counters, updated by its reader goroutine.
type Stats struct {
	received, accepted                atomic.Uint64
	oversize, malformed, badFields    atomic.Uint64
	forged, unverifiable, rateLimited atomic.Uint64
	overflow, fdsClosed, readErrors   atomic.Uint64
	directivesSent, directivesDropped atomic.Uint64
	maxLag                            atomic.Int64 // ns

	// The stream socket's connections (its messages are counted above).
	streamAccepted, streamRefused  atomic.Uint64
	streamOverLimit, streamDropped atomic.Uint64
}

// lag records how long a datagram waited in the kernel to be read.
func (s *Stats) lag(d time.Duration) {
	for {
		old := s.maxLag.Load()
		if int64(d) <= old || s.maxLag.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

// StatsSnapshot is a point-in-time copy of Stats. Each message read (a
// datagram, or a message of a stream connection) is counted in Received,
// then in Accepted or in one drop counter; Accepted moves just after the
// message is queued on C(), so a fast consumer may see a message a moment
// before it is counted. A stream connection refused at accept is counted
// in StreamRefused or StreamOverLimit only: nothing was read from it.
type StatsSnapshot struct {
	Received     uint64
	Accepted     uint64
	Oversize     uint64
	Malformed    uint64
	BadFields    uint64
	Forged       uint64
	Unverifiable uint64
	RateLimited  uint64
	Overflow     uint64
	FDsClosed    uint64
	ReadErrors   uint64
	Directives   uint64 // directives sent
	DirDropped   uint64 // directives dropped
	// MaxIntakeLag is the longest a datagram waited, from its arrival
	// (the kernel's stamp) to its reading; read by a poller only.
	MaxIntakeLag time.Duration

	// Stream connections: accepted; refused for their peer's
	// credentials (uid, not of the tree, gone); refused because
	// MaxStreamConns were open; and closed by hermeskilld (a message
	// over 8 KiB, a directive not taken in time).
	StreamAccepted  uint64
	StreamRefused   uint64
	StreamOverLimit uint64
	StreamDropped   uint64
}

// Dropped is every datagram read but not delivered.
func (s StatsSnapshot) Dropped() uint64 {
	return s.Oversize + s.Malformed + s.Forged + s.Unverifiable + s.RateLimited + s.Overflow
}

func (s *Stats) snapshot() StatsSnapshot {
	return StatsSnapshot{
		Received: s.received.Load(), Accepted: s.accepted.Load(),
		Oversize: s.oversize.Load(), Malformed: s.malformed.Load(), BadFields: s.badFields.Load(),
		Forged: s.forged.Load(), Unverifiable: s.unverifiable.Load(), RateLimited: s.rateLimited.Load(),
		Overflow: s.overflow.Load(), FDsClosed: s.fdsClosed.Load(), ReadErrors: s.readErrors.Load(),
		Directives: s.directivesSent.Load(), DirDropped: s.directivesDropped.Load(),
		MaxIntakeLag:   time.Duration(s.maxLag.Load()),
		StreamAccepted: s.streamAccepted.Load(), StreamRefused: s.streamRefused.Load(),
		StreamOverLimit: s.streamOverLimit.Load(), StreamDropped: s.streamDropped.Load(),
	}
}
