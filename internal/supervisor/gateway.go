// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
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
	paused  *gateway.Pause  // a request that did not fit paused the grant
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
	_ gateway.PauseObserver   = (*meterQueue)(nil)
)

// Paused is a request that did not fit in the budget, held by the gateway
// (on_budget: pause).
func (q *meterQueue) Paused(p gateway.Pause) { q.put(wireEvent{at: p.At, paused: &p}) }

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

// budget is the cap the gateway holds the run's requests to: the cost
// and tokens checks' kill thresholds, in enforce mode (in shadow mode
// nothing is refused: the checks record what they would have done). With
// on_budget: pause a request that does not fit is held, not refused.
func budget(a *config.Agent) gateway.Budget {
	var b gateway.Budget
	if a.Mode == config.ModeShadow {
		return b
	}
	if c := a.Checks.Cost; c != nil {
		b.CostUSD = c.Kill
	}
	if t := a.Checks.Tokens; t != nil {
		b.Tokens = t.Kill
	}
	b.Pause = a.OnBudget == config.OnBudgetPause
	return b
}

// setBudget gives the run's grant the budget of a, when it has one.
func (r *Run) setBudget(a *config.Agent) {
	if r.grant != nil {
		r.grant.SetBudget(budget(a))
	}
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

// strippedVars are the names of the provider variables (gateway.ProviderVar)
// an agent would have got but for the gateway, by where they came from;
// a name the agent file's env: sets is only in file.
type strippedVars struct{ inherited, file []string }

// withoutProviderVars is base (hermeskilld's environment, KEY=VALUE) and
// extra (the agent file's env:) without the variables the gateway
// replaces, and the names it removed, sorted. Every other variable passes:
// OPENAI_AGENTS_DISABLE_TRACING, a default model, a log level.
func withoutProviderVars(base []string, extra map[string]string) ([]string, map[string]string, strippedVars) {
	var s strippedVars
	keptExtra := make(map[string]string, len(extra))
	for k, v := range extra {
		if gateway.ProviderVar(k) {
			s.file = append(s.file, k)
			continue
		}
		keptExtra[k] = v
	}
	keptBase := slices.DeleteFunc(slices.Clone(base), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		if !gateway.ProviderVar(k) {
			return false
		}
		if _, inFile := extra[k]; !inFile {
			s.inherited = append(s.inherited, k)
		}
		return true
	})
	slices.Sort(s.file)
	slices.Sort(s.inherited)
	s.inherited = slices.Compact(s.inherited)
	return keptBase, keptExtra, s
}

// logStripped says, once per name and never with a value, which provider
// variables the agent did not get: replaced are those the grant sets
// itself (given), removed those it gets none of. From hermeskilld's
// environment that is the gateway doing its work (info); from the agent
// file it is a setting that is not honoured (warn).
func logStripped(log *zap.Logger, s strippedVars, given []string) {
	set := make(map[string]bool, len(given))
	for _, kv := range given {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	fields := func(names []string) []zap.Field {
		var replaced, removed []string
		for _, k := range names {
			if set[k] {
				replaced = append(replaced, k)
			} else {
				removed = append(removed, k)
			}
		}
		var fs []zap.Field
		if len(replaced) > 0 {
			fs = append(fs, zap.Strings("replaced", replaced))
		}
		if len(removed) > 0 {
			fs = append(fs, zap.Strings("removed", removed))
		}
		return fs
	}
	if len(s.inherited) > 0 {
		log.Info("LLM gateway: provider credentials and endpoints of hermeskilld's environment not passed to the agent",
			fields(s.inherited)...)
	}
	if len(s.file) > 0 {
		log.Warn("LLM gateway: the agent file's env: sets provider credentials or endpoints, which are the gateway's: not passed to the agent",
			fields(s.file)...)
	}
}

// certMetered is the certificate's metered block: the grant's snapshot
// without what only the gateway counts.
func certMetered(m gateway.Metered) *certs.Metered { return &m.Metered }
