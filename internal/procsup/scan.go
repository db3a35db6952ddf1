// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup

import (
	"sync"
	"sync/atomic"

	"github.com/hermeskill/hermeskilld/internal/procfs"
)

// scanner shares scans of /proc among concurrent callers. A scan reads
// every process's stat: a few milliseconds with a thousand processes, and
// the daemon stopping a thousand agents at once asks for one per agent.
//
// A caller never gets a scan that began before it asked: it joins the
// scan queued behind the one in flight (or starts one), so what it sees
// is as fresh as a scan of its own would be, and any number of callers
// arriving together cost at most two scans. The snapshot returned is
// shared: callers only read it.
type scanner struct {
	fs procfs.FS

	mu     sync.Mutex
	flight *scanCall // the scan running, nil when none
	queued *scanCall // the scan that starts when flight ends

	runs atomic.Uint64 // scans run
}

type scanCall struct {
	done chan struct{}
	snap procfs.Snapshot
	err  error
}

func newScanner(fs procfs.FS) *scanner { return &scanner{fs: fs} }

// Scan returns a snapshot of every process taken after the call began.
func (s *scanner) Scan() (procfs.Snapshot, error) {
	s.mu.Lock()
	if s.flight == nil {
		c := &scanCall{done: make(chan struct{})}
		s.flight = c
		s.mu.Unlock()
		s.run(c)
		return c.snap, c.err
	}
	c, first := s.queued, false
	if c == nil {
		c, first = &scanCall{done: make(chan struct{})}, true
		s.queued = c
	}
	prev := s.flight
	s.mu.Unlock()
	if !first {
		<-c.done
		return c.snap, c.err
	}
	// The first caller queued runs the queued scan once the one in
	// flight, which may have begun before any of its callers asked, ends.
	<-prev.done
	s.mu.Lock()
	s.flight, s.queued = c, nil
	s.mu.Unlock()
	s.run(c)
	return c.snap, c.err
}

// run scans for c and retires it.
func (s *scanner) run(c *scanCall) {
	s.runs.Add(1)
	c.snap, c.err = s.fs.Scan()
	s.mu.Lock()
	if s.flight == c {
		s.flight = nil
	}
	s.mu.Unlock()
	close(c.done)
}
