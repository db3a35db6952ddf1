// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"sync"
	"sync/atomic"
)

// Async appends from one goroutine of its own, so no caller ever waits on
// the file (the flock other writers hold, an fsync): a kill must never wait
// for its record. Events are written in the order they were queued.
type Async struct {
	l       *Log
	ch      chan Event
	onErr   func(error)
	dropped atomic.Uint64
	failed  atomic.Uint64
	done    chan struct{}

	mu     sync.RWMutex // Close against Append: no send on a closed channel
	closed bool
}

// NewAsync starts the writer. queue bounds the events waiting to be
// written; onErr (may be nil) hears about every failed append.
func NewAsync(l *Log, queue int, onErr func(error)) *Async {
	a := &Async{l: l, ch: make(chan Event, queue), onErr: onErr, done: make(chan struct{})}
	go a.run()
	return a
}

func (a *Async) run() {
	defer close(a.done)
	for ev := range a.ch {
		if err := a.l.Append(ev); err != nil {
			a.failed.Add(1)
			if a.onErr != nil {
				a.onErr(err)
			}
		}
	}
}

// Append queues ev without blocking. It reports false, and counts the
// event as dropped, when the queue is full (the disk is stuck) or the log
// is closed (a late caller during a shutdown).
func (a *Async) Append(ev Event) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		a.dropped.Add(1)
		return false
	}
	select {
	case a.ch <- ev:
		return true
	default:
		a.dropped.Add(1)
		return false
	}
}

// Head is the log's Head: the last line written, not the events still
// queued. It never waits for the writer goroutine or the disk.
func (a *Async) Head() (Head, bool) { return a.l.Head() }

// Dropped is how many events were dropped because the queue was full (or
// the log closed).
func (a *Async) Dropped() uint64 { return a.dropped.Load() }

// Failed is how many queued events the log failed to append (a full
// disk, an unwritable file): each was reported to onErr, and is missing
// from the log.
func (a *Async) Failed() uint64 { return a.failed.Load() }

// Close writes what is queued, then closes the log; later Appends are
// dropped and counted. Calling it again returns the same.
func (a *Async) Close() error {
	a.mu.Lock()
	first := !a.closed
	if first {
		a.closed = true
		close(a.ch)
	}
	a.mu.Unlock()
	<-a.done
	if !first {
		return nil
	}
	return a.l.Close()
}
