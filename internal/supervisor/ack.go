// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"sync"
	"time"
)

// stopAck is the acknowledgement of a run's STOP directive. A client that
// has armed the agent's own stop path (the Python client raising
// HermeskillTerminated in the main thread, the Go client cancelling the
// agent's context) answers the STOP with STOPPING=1, and the ladder then
// withholds the cooperative signal (escalate.Plan.Acked), which would
// otherwise interrupt the very handler that saves the agent's work.
//
// Only an answer from an address the STOP went to, read after it was
// sent, acknowledges it: a STOPPING=1 the agent sent by itself earlier, or
// from a client that never got the STOP, is no answer to it. The sender
// has passed the socket's checks by then (kernel credentials, a process of
// the tree, the agent's uid), as every message the loop sees has.
type stopAck struct {
	mu     sync.Mutex
	to     map[string]struct{} // nil until the STOP is sent
	sentAt time.Time           // set as the STOP is about to be sent (begin)
	// early are the STOPPING=1 read while the STOP was being sent, before
	// its addresses were known: a quick client can answer before
	// BroadcastTo returns.
	early []reply
	done  chan struct{} // closed once acknowledged
	acked bool
}

type reply struct {
	client string
	at     time.Time
}

func newStopAck() *stopAck { return &stopAck{done: make(chan struct{})} }

// begin records that the STOP is about to be sent.
func (a *stopAck) begin(at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sentAt = at
}

// sent records that the STOP went to addrs, and applies the answers read
// while it was being sent.
func (a *stopAck) sent(addrs []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.to = make(map[string]struct{}, len(addrs))
	for _, addr := range addrs {
		a.to[addr] = struct{}{}
	}
	for _, r := range a.early {
		a.check(r)
	}
	a.early = nil
}

// answer is a STOPPING=1 from client, read at at; it reports whether it
// acknowledged the STOP (the first that does closes done).
func (a *stopAck) answer(client string, at time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sentAt.IsZero() {
		return false // no STOP yet: the agent stops by itself
	}
	if a.to == nil {
		if len(a.early) < maxEarly {
			a.early = append(a.early, reply{client, at})
		}
		return false
	}
	return a.check(reply{client, at})
}

// maxEarly bounds the answers kept while the STOP is being sent: an agent
// that sends STOPPING=1 in a loop cannot grow the run's memory.
const maxEarly = 16

func (a *stopAck) check(r reply) bool {
	if a.acked || r.client == "" || r.at.Before(a.sentAt) {
		return false
	}
	if _, ok := a.to[r.client]; !ok {
		return false
	}
	a.acked = true
	close(a.done)
	return true
}

// ackPoll is how often the socket is read while the ladder waits for the
// acknowledgement, when a poller reads it in batches (the daemon's): the
// poller's own interval would add up to its length to every wait.
const ackPoll = 2 * time.Millisecond

// awaitAck reads the socket every ackPoll until the STOP is acknowledged
// or wait has passed, so that an answer reaches the loop at once; its
// goroutine ends by itself. Without a poller the socket's own reader
// reads at once, and nothing is started.
func (r *Run) awaitAck(wait time.Duration) {
	if !r.sock.Polled() || wait <= 0 {
		return
	}
	go func() {
		t := time.NewTicker(ackPoll)
		defer t.Stop()
		end := time.NewTimer(wait)
		defer end.Stop()
		for {
			select {
			case <-r.ack.done:
				return
			case <-end.C:
				return
			case <-t.C:
				r.sock.Sync()
			}
		}
	}()
}
