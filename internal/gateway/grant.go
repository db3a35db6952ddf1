// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"context"
	"crypto/sha256"
	"sort"
	"sync"
	"time"

	"github.com/hermeskill/hermeskilld/internal/certs"
)

// Grant is one agent run's access to the gateway: its handle, its
// requests in flight and what they used.
type Grant struct {
	g       *Gateway
	agentID string
	handle  string
	sum     [sha256.Size]byte
	obs     Observer

	mu       sync.Mutex
	members  func() []int // the run's processes; nil: any connection may use the handle
	revoked  *Revocation  // nil: not revoked
	closed   bool
	inflight map[*flight]struct{}
	// what its requests used (Metered)
	requests, refused, errors, incomplete, usageUnknown int64
	models                                              map[string]*certs.ModelUsage
	first, last                                         time.Time
}

// flight is a request of the grant between its admission and its record.
type flight struct {
	cancel context.CancelCauseFunc
}

// cutError is why a request in flight was ended by the gateway.
type cutError struct {
	status int // answered when the response has not started
	code   string
	msg    string
	rev    *Revocation // set for a revocation
}

func (e *cutError) Error() string { return e.msg }

func (e *cutError) problem() problem {
	p := problem{status: e.status, code: e.code, msg: e.msg}
	if e.rev != nil {
		p.check, p.reason = e.rev.Check, e.rev.Reason
	}
	return p
}

var (
	errShutdown    = &cutError{status: 503, code: "gateway_shutting_down", msg: "hermeskilld's LLM gateway is shutting down"}
	errGrantClosed = &cutError{status: 403, code: "run_ended", msg: "this run's access to the model ended with the run (hermeskilld)"}
)

func revokedError(rev *Revocation) *cutError {
	msg := "hermeskilld revoked this run's access to the model"
	if rev.Check != "" {
		msg += " (check " + rev.Check + ")"
	}
	if rev.Reason != "" {
		msg += ": " + rev.Reason
	}
	return &cutError{status: 403, code: "access_revoked", msg: msg, rev: rev}
}

// SetMembers makes the handle good only on connections from the run's
// processes, as members lists them (the run's tree, when asked). Set it
// once the run's main process is started, before it could send a request.
func (gr *Grant) SetMembers(members func() []int) {
	gr.mu.Lock()
	gr.members = members
	gr.mu.Unlock()
}

func (gr *Grant) membersFunc() func() []int {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	return gr.members
}

// AgentID is the id the grant was made for.
func (gr *Grant) AgentID() string { return gr.agentID }

// Env is the agent's environment for the gateway: for each upstream its
// base URL and, as its API key, the grant's handle. The openai-style
// upstream named "openai" (else the first of that style) is given as
// OPENAI_BASE_URL and OPENAI_API_KEY, the anthropic one likewise as
// ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY; any other upstream NAME as
// HERMESKILL_LLM_<NAME>_BASE_URL and HERMESKILL_LLM_<NAME>_API_KEY (NAME
// upper-cased, '-' as '_'). Entries are "KEY=VALUE", in the order of the
// configured upstreams.
func (gr *Grant) Env() []string {
	out := make([]string, 0, 2*len(gr.g.env))
	for _, e := range gr.g.env {
		out = append(out, e.baseURL+"="+gr.g.baseURL(e.name), e.key+"="+gr.handle)
	}
	return out
}

// Revoke refuses the grant's new requests from now on (403 in the
// provider's error format, with check and reason) and cuts those in
// flight: a stream gets a final error event and ends, a request still
// waiting for its response gets the 403. A request already answered in
// full is not cut, even if its record is still on its way to the
// Observer. Revoke returns when it happened and how many requests it cut;
// a later call changes nothing and returns the first revocation.
func (gr *Grant) Revoke(check, reason string) Revocation {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	if gr.revoked != nil {
		return *gr.revoked
	}
	rev := &Revocation{At: time.Now(), Check: check, Reason: reason, InFlight: len(gr.inflight)}
	gr.revoked = rev
	cause := revokedError(rev)
	for fl := range gr.inflight {
		fl.cancel(cause)
	}
	return *rev
}

// Close forgets the handle once the run is over: its requests are refused
// and those in flight cut. Metered still answers.
func (gr *Grant) Close() {
	gr.g.forget(gr)
	gr.mu.Lock()
	defer gr.mu.Unlock()
	if gr.closed {
		return
	}
	gr.closed = true
	for fl := range gr.inflight {
		fl.cancel(errGrantClosed)
	}
}

// admit registers a request about to go upstream, or says why it may not.
func (gr *Grant) admit(fl *flight) *cutError {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	switch {
	case gr.revoked != nil:
		return revokedError(gr.revoked)
	case gr.closed:
		return errGrantClosed
	}
	gr.inflight[fl] = struct{}{}
	return nil
}

// landed takes fl out of flight: its response is complete.
func (gr *Grant) landed(fl *flight) {
	gr.mu.Lock()
	delete(gr.inflight, fl)
	gr.mu.Unlock()
}

// arrived tells a TrafficObserver that a request arrived at.
func (gr *Grant) arrived(at time.Time) {
	if to, ok := gr.obs.(TrafficObserver); ok {
		to.Arrived(at)
	}
}

// gone tells a TrafficObserver that a request that arrived ended at
// without a record.
func (gr *Grant) gone(at time.Time) {
	if to, ok := gr.obs.(TrafficObserver); ok {
		to.Gone(at)
	}
}

// report counts rec, then tells the observer.
func (gr *Grant) report(rec Record) {
	gr.mu.Lock()
	if gr.first.IsZero() {
		gr.first = rec.At
	}
	gr.last = rec.At
	switch {
	case rec.Refused:
		gr.refused++
	default:
		gr.requests++
		if !rec.Cut && (rec.Status >= 400 || rec.Err != "") {
			gr.errors++
		}
		if rec.Incomplete {
			gr.incomplete++
		}
		if rec.UsageUnknown {
			gr.usageUnknown++
		}
		if rec.Model != "" || rec.Tokens() > 0 {
			m := gr.models[rec.Model]
			if m == nil {
				m = &certs.ModelUsage{Model: rec.Model, Priced: true}
				gr.models[rec.Model] = m
			}
			m.Requests++
			m.InputTokens += rec.InputTokens
			m.OutputTokens += rec.OutputTokens
			m.CachedInputTokens += rec.CachedInputTokens
			m.CostUSD += rec.CostUSD
			if rec.Tokens() > 0 && !rec.Priced {
				m.Priced = false
			}
			if rec.UsageUnknown {
				m.UsageUnknown++
			}
		}
	}
	gr.mu.Unlock()
	if gr.obs != nil {
		gr.obs.Request(rec)
	}
}

// Metered is a snapshot of what the grant's requests used so far.
func (gr *Grant) Metered() Metered {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	m := Metered{Incomplete: gr.incomplete, InFlight: len(gr.inflight), Metered: certs.Metered{Requests: gr.requests, Refused: gr.refused, Errors: gr.errors,
		UsageUnknown: gr.usageUnknown, CostKnown: gr.usageUnknown == 0, FirstRequestAt: gr.first, LastRequestAt: gr.last,
		Models: make([]certs.ModelUsage, 0, len(gr.models))}}
	if gr.revoked != nil {
		m.RevokedAt = gr.revoked.At
	}
	for _, mu := range gr.models {
		m.Models = append(m.Models, *mu)
		m.Tokens += mu.InputTokens + mu.OutputTokens
		m.CostUSD += mu.CostUSD
		m.CostKnown = m.CostKnown && mu.Priced
	}
	sort.Slice(m.Models, func(i, j int) bool { return m.Models[i].Model < m.Models[j].Model })
	return m
}
