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

// StatsSnapshot is a point-in-time copy of Stats. Each datagram read is
// counted in Received, then in Accepted or in one drop counter; Accepted
// moves just after the message is queued on C(), so a fast consumer may see
// a message a moment before it is counted.
type StatsSnapshot struct {
	Received     uint64 `json:"received"`
	Accepted     uint64 `json:"accepted"`
	Oversize     uint64 `json:"oversize"`
	Malformed    uint64 `json:"malformed"`
	BadFields    uint64 `json:"bad_fields"`
	Forged       uint64 `json:"forged"`
	Unverifiable uint64 `json:"unverifiable"`
	RateLimited  uint64 `json:"rate_limited"`
	Overflow     uint64 `json:"overflow"`
	FDsClosed    uint64 `json:"fds_closed"`
	ReadErrors   uint64 `json:"read_errors"`
	Directives   uint64 `json:"directives_sent"`
	DirDropped   uint64 `json:"directives_dropped"`
	// MaxIntakeLag is the longest a datagram waited, from its arrival
	// (the kernel's stamp) to its reading; read by a poller only.
	MaxIntakeLag time.Duration `json:"max_intake_lag_ns"`
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
		MaxIntakeLag: time.Duration(s.maxLag.Load()),
	}
}
