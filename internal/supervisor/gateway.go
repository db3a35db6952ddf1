// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"strings"
	"sync"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/fault"
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// meterQueue hands the gateway's records of one run to its loop. The
// gateway calls Request on the request's goroutine and must never wait:
// records are queued (a run's requests are few) and the loop is kicked.
type meterQueue struct {
	mu    sync.Mutex
	recs  []gateway.Record
	ready chan struct{}
	fail  func(*fault.Error) // the run's Fail
}

var (
	_ gateway.Observer      = (*meterQueue)(nil)
	_ gateway.FaultObserver = (*meterQueue)(nil)
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

func (q *meterQueue) Request(r gateway.Record) {
	q.mu.Lock()
	q.recs = append(q.recs, r)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take returns the records queued so far.
func (q *meterQueue) take() []gateway.Record {
	q.mu.Lock()
	defer q.mu.Unlock()
	recs := q.recs
	q.recs = nil
	return recs
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
