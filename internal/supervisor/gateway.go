// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"strings"
	"sync"
	"time"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/fault"
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// meterQueue hands the gateway's view of one run's traffic to its loop:
// each request's arrival, and its record (or, for one that left none, its
// end). The gateway calls it on the request's goroutine and must never
// wait: what it is told is queued in order (a run's requests are few) and
// the loop is kicked.
type meterQueue struct {
	mu    sync.Mutex
	evs   []wireEvent
	ready chan struct{}
	fail  func(*fault.Error) // the run's Fail
}

// wireEvent is one thing the gateway told of a request: its arrival at
// at, its end at at without a record (gone), or its record.
type wireEvent struct {
	at      time.Time
	arrived bool
	rec     *gateway.Record // nil: an arrival, or an end without a record
}

// end is when the request ended: its response's end, for a record.
func (ev wireEvent) end() time.Time {
	if ev.rec != nil {
		return ev.rec.At.Add(ev.rec.Duration)
	}
	return ev.at
}

var (
	_ gateway.TrafficObserver = (*meterQueue)(nil)
	_ gateway.FaultObserver   = (*meterQueue)(nil)
)

// Fault is a panic in the gateway's handling of one of the run's
// requests: the run is killed for internal_error (its spend can no longer
// be trusted to be counted).
func (q *meterQueue) Fault(e *fault.Error) {
	if q.fail != nil {
		q.fail(e)
	}
}

func newMeterQueue() *meterQueue { return &meterQueue{ready: make(chan struct{}, 1)} }

// Arrived is a request of the run arriving at the gateway.
func (q *meterQueue) Arrived(at time.Time) { q.put(wireEvent{at: at, arrived: true}) }

// Gone is a request that arrived and ended without a record.
func (q *meterQueue) Gone(at time.Time) { q.put(wireEvent{at: at}) }

// Request is a request's record, as its response ended.
func (q *meterQueue) Request(r gateway.Record) { q.put(wireEvent{rec: &r}) }

func (q *meterQueue) put(ev wireEvent) {
	q.mu.Lock()
	q.evs = append(q.evs, ev)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take returns what was queued so far, in the order the gateway told it.
// Without a gateway there is nothing.
func (q *meterQueue) take() []wireEvent {
	if q == nil {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.evs
	q.evs = nil
	return evs
}

// readyC is the queue's kick; nil (a receive that never fires) without a
// gateway.
func (q *meterQueue) readyC() <-chan struct{} {
	if q == nil {
		return nil
	}
	return q.ready
}

// wireTools are a record's tool calls as the engine counts them.
func wireTools(r gateway.Record) []symptoms.ToolCall {
	if len(r.ToolCalls) == 0 {
		return nil
	}
	out := make([]symptoms.ToolCall, len(r.ToolCalls))
	for i, t := range r.ToolCalls {
		out[i] = symptoms.ToolCall{Name: t.Name, ArgsSHA256: t.ArgsSHA256}
	}
	return out
}

// llmEnv are the variables an agent inherits that would point its SDKs
// elsewhere than the gateway, or send the operator's organisation with
// someone else's key: with the gateway on they are not passed.
func llmEnv(kv string) bool {
	k, _, _ := strings.Cut(kv, "=")
	return strings.HasPrefix(k, "OPENAI_") || strings.HasPrefix(k, "ANTHROPIC_") || strings.HasPrefix(k, "HERMESKILL_LLM_")
}

// certMetered is the certificate's metered block: the grant's snapshot
// without what only the gateway counts.
func certMetered(m gateway.Metered) *certs.Metered { return &m.Metered }
