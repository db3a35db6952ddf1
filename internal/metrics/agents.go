// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hermeskill/hermeskilld/internal/fdbudget"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
)

// AgentSample is one agent's state at scrape time.
type AgentSample struct {
	ID    string
	State string // the daemon's state: running, backoff, quarantined, failed, …
	// Heartbeats counts the agent's accepted heartbeats; it may restart
	// from 0 when the agent restarts (rate() handles counter resets).
	Heartbeats uint64
	Heartbeat  heartbeat.StatsSnapshot
	// What the agent reported about itself, and what the LLM gateway
	// metered (Metered: the gateway carries its traffic).
	Progress, Tokens, MeteredTokens uint64
	CostUSD, MeteredCostUSD         float64
	Metered                         bool
	LastHeartbeat                   time.Time // zero: none yet
}

// DropReasons are the reason label values of
// hermeskill_datagrams_dropped_total, in the order they are exported.
var DropReasons = []string{"oversize", "malformed", "forged", "unverifiable", "rate_limited", "overflow"}

func dropped(s heartbeat.StatsSnapshot) []uint64 {
	return []uint64{s.Oversize, s.Malformed, s.Forged, s.Unverifiable, s.RateLimited, s.Overflow}
}

// StreamResults are the result label values of
// hermeskill_stream_connections_total, in the order they are exported.
var StreamResults = []string{"accepted", "refused", "over_limit", "dropped"}

func streamConns(s heartbeat.StatsSnapshot) []uint64 {
	return []uint64{s.StreamAccepted, s.StreamRefused, s.StreamOverLimit, s.StreamDropped}
}

// SetSource sets the function the per-agent series are read from at each
// scrape (nil: none). It is called on the scraping goroutine, so it must be
// quick and safe for concurrent use.
func (m *Metrics) SetSource(f func() []AgentSample) {
	m.state.mu.Lock()
	defer m.state.mu.Unlock()
	m.state.source = f
}

// SetOutbox sets the control plane outbox's figures (outbox.Stats):
// pending and parked items now, delivered and failed attempts since start.
// The outbox series appear once it has been called.
func (m *Metrics) SetOutbox(pending, parked int, delivered, failures uint64) {
	m.state.mu.Lock()
	defer m.state.mu.Unlock()
	f := &outboxFigures{pending: pending, parked: parked, delivered: delivered, failures: failures}
	if ob := m.state.outbox; ob != nil {
		f.rejected, f.receipts = ob.rejected, ob.receipts
	}
	m.state.outbox = f
}

// SetOutboxReceipts sets what became of the directive receipts
// (outbox.Stats.Receipts): queued, sent, parked, dropped.
func (m *Metrics) SetOutboxReceipts(queued, sent, parked, dropped uint64) {
	m.state.mu.Lock()
	defer m.state.mu.Unlock()
	if m.state.outbox == nil {
		m.state.outbox = &outboxFigures{}
	}
	m.state.outbox.receipts = [4]uint64{queued, sent, parked, dropped}
}

// SetOutboxRejected sets how many certificates the outbox refused because
// it was full (outbox.Stats.Rejected).
func (m *Metrics) SetOutboxRejected(rejected uint64) {
	m.state.mu.Lock()
	defer m.state.mu.Unlock()
	if m.state.outbox == nil {
		m.state.outbox = &outboxFigures{}
	}
	m.state.outbox.rejected = rejected
}

// SetAuditSource sets where the audit log's losses are read at each
// scrape: events the log failed to append, and events dropped because its
// queue was full (audit.Async's Failed and Dropped). The series appear
// once it has been called.
func (m *Metrics) SetAuditSource(f func() (failed, dropped uint64)) {
	m.state.mu.Lock()
	defer m.state.mu.Unlock()
	m.state.audit = f
}

// SetTelemetrySource sets where the OpenTelemetry export's figures are
// read at each scrape: what it exported, and what it lost because its
// queue was full (dropped), its export failed or was rejected (failed), or
// it was still queued at exit (unsent). The series appear once it has
// been called.
func (m *Metrics) SetTelemetrySource(f func() (exported, dropped, failed, unsent uint64)) {
	m.state.mu.Lock()
	defer m.state.mu.Unlock()
	m.state.telemetry = f
}

type outboxFigures struct {
	pending, parked               int
	delivered, failures, rejected uint64
	receipts                      [4]uint64 // by receiptResults
}

// receiptResults are hermeskill_receipts_total's result label values.
var receiptResults = [4]string{"queued", "sent", "parked", "dropped"}

// The families written at scrape time.
var (
	famAgents     = family{namespace + "_agents", "gauge", "Agents by state."}
	famHeartbeats = family{namespace + "_heartbeats_total", "counter", "Heartbeats accepted, by agent."}
	famDropped    = family{namespace + "_datagrams_dropped_total", "counter",
		"Heartbeat socket datagrams dropped, by agent and reason."}
	famStream = family{namespace + "_stream_connections_total", "counter",
		"Stream socket connections, by agent and result: accepted, refused (credentials), over_limit, dropped (closed by hermeskilld)."}
	famProgress = family{namespace + "_agent_progress", "gauge",
		"The agent's PROGRESS step counter, by agent (of its current run)."}
	famTokens = family{namespace + "_agent_tokens", "gauge",
		"Tokens used by the agent's current run: reported by the agent, or metered by the LLM gateway."}
	famCost = family{namespace + "_agent_cost_usd", "gauge",
		"Spend of the agent's current run in USD: reported by the agent, or metered by the LLM gateway."}
	famLastBeat = family{namespace + "_agent_last_heartbeat_timestamp_seconds", "gauge",
		"When the agent last beat (Unix time), by agent."}
	famPending   = family{namespace + "_outbox_pending", "gauge", "Certificates waiting for delivery to the control plane."}
	famParked    = family{namespace + "_outbox_parked", "gauge", "Certificates the control plane refused, parked for an operator."}
	famDelivered = family{namespace + "_outbox_delivered_total", "counter", "Certificates delivered to the control plane."}
	famFailures  = family{namespace + "_outbox_failures_total", "counter", "Failed delivery attempts (retried or parked)."}
	famRejected  = family{namespace + "_outbox_rejected_total", "counter",
		"Certificates not queued for delivery because the outbox was full."}
	famReceipts = family{namespace + "_receipts_total", "counter",
		"Directive receipts, by result: queued for the control plane, sent (delivered), parked (refused), dropped (not made or not queued)."}
	famShortages = family{namespace + "_descriptor_shortages_total", "counter",
		"Descriptor shortages of hermeskilld, by where: agent_refused (the descriptor budget refused an agent), control_accept (the control socket could not accept)."}
	famSamplerFailures = family{namespace + "_sampler_failures_total", "counter",
		"Failed samples of an agent's process tree for the kernel checks, by reason: descriptors (hermeskilld out of descriptors), permission, other."}
	famAuditLost = family{namespace + "_audit_events_lost_total", "counter",
		"Events missing from the audit log, by reason: write_failed (the append failed) or queue_full."}
	famOtelExported = family{namespace + "_telemetry_exported_total", "counter",
		"OpenTelemetry log records and spans the collector took."}
	famOtelLost = family{namespace + "_telemetry_lost_total", "counter",
		"Events, log records and spans not exported over OpenTelemetry, by reason: queue_full, export_failed (after retries, or rejected by the collector), unsent (still queued at exit)."}
)

// family names a family written at scrape time.
type family struct{ name, typ, help string }

func (e *expo) begin(f family) { e.family(f.name, f.typ, f.help) }

// stateCollector writes the pulled series at scrape time.
type stateCollector struct {
	labels *agentLabels

	mu     sync.Mutex
	source func() []AgentSample
	outbox *outboxFigures
	audit  func() (failed, dropped uint64)
	// budgets, when set, are the budgets across runs (budgets.go).
	budgets func() []BudgetSample
	// telemetry: the OpenTelemetry export's figures.
	telemetry func() (exported, dropped, failed, unsent uint64)
}

func (c *stateCollector) write(e *expo) {
	c.mu.Lock()
	source, ob, audit, budgets, otel := c.source, c.outbox, c.audit, c.budgets, c.telemetry
	if ob != nil {
		copied := *ob
		ob = &copied
	}
	c.mu.Unlock()

	e.begin(famShortages)
	for _, w := range fdbudget.Wheres {
		e.sample(famShortages.name, float64(fdbudget.Shortages(w)), "where", w)
	}
	e.begin(famSamplerFailures)
	for _, r := range supervisor.SamplerReasons {
		e.sample(famSamplerFailures.name, float64(supervisor.SamplerFailures(r)), "reason", r)
	}

	writeBudgets(e, budgets)
	if audit != nil {
		failed, dropped := audit()
		e.begin(famAuditLost)
		e.sample(famAuditLost.name, float64(dropped), "reason", "queue_full")
		e.sample(famAuditLost.name, float64(failed), "reason", "write_failed")
	}

	if otel != nil {
		exported, dropped, failed, unsent := otel()
		e.begin(famOtelExported)
		e.sample(famOtelExported.name, float64(exported))
		e.begin(famOtelLost)
		e.sample(famOtelLost.name, float64(dropped), "reason", "queue_full")
		e.sample(famOtelLost.name, float64(failed), "reason", "export_failed")
		e.sample(famOtelLost.name, float64(unsent), "reason", "unsent")
	}

	if ob != nil {
		for _, x := range []struct {
			f family
			v float64
		}{{famPending, float64(ob.pending)}, {famParked, float64(ob.parked)}, {famDelivered, float64(ob.delivered)},
			{famFailures, float64(ob.failures)}, {famRejected, float64(ob.rejected)}} {
			e.begin(x.f)
			e.sample(x.f.name, x.v)
		}
		e.begin(famReceipts)
		for i, r := range receiptResults {
			e.sample(famReceipts.name, float64(ob.receipts[i]), "result", r)
		}
	}
	if source == nil {
		return
	}
	samples := source()
	ids := make([]string, 0, len(samples))
	for _, s := range samples {
		ids = append(ids, s.ID)
	}
	c.labels.sync(ids)

	// Sum by label: several agents share "_other", and a source may repeat
	// an id; a series must be exported once.
	type perAgent struct {
		heartbeats             uint64
		dropped, stream        []uint64
		progress, tokens, mTok uint64
		cost, mCost            float64
		metered                bool
		lastBeat               time.Time
	}
	states := map[string]int{}
	agents := map[string]*perAgent{}
	for _, s := range samples {
		states[s.State]++
		label := c.labels.label(s.ID)
		a := agents[label]
		if a == nil {
			a = &perAgent{dropped: make([]uint64, len(DropReasons)), stream: make([]uint64, len(StreamResults))}
			agents[label] = a
		}
		a.heartbeats += s.Heartbeats
		for i, n := range dropped(s.Heartbeat) {
			a.dropped[i] += n
		}
		for i, n := range streamConns(s.Heartbeat) {
			a.stream[i] += n
		}
		a.progress, a.tokens, a.cost = a.progress+s.Progress, a.tokens+s.Tokens, a.cost+s.CostUSD
		if s.Metered {
			a.metered, a.mTok, a.mCost = true, a.mTok+s.MeteredTokens, a.mCost+s.MeteredCostUSD
		}
		if s.LastHeartbeat.After(a.lastBeat) {
			a.lastBeat = s.LastHeartbeat
		}
	}
	if len(states) > 0 {
		e.begin(famAgents)
		for _, state := range slices.Sorted(maps.Keys(states)) {
			e.sample(famAgents.name, float64(states[state]), "state", state)
		}
	}
	order := slices.Sorted(maps.Keys(agents))
	if len(order) == 0 {
		return
	}
	// One family at a time: the format wants a family's samples together.
	each := func(f family, fn func(label string, a *perAgent)) {
		e.begin(f)
		for _, label := range order {
			fn(label, agents[label])
		}
	}
	each(famHeartbeats, func(l string, a *perAgent) { e.sample(famHeartbeats.name, float64(a.heartbeats), "agent", l) })
	each(famDropped, func(l string, a *perAgent) {
		for i, reason := range DropReasons {
			e.sample(famDropped.name, float64(a.dropped[i]), "agent", l, "reason", reason)
		}
	})
	each(famStream, func(l string, a *perAgent) {
		for i, result := range StreamResults {
			e.sample(famStream.name, float64(a.stream[i]), "agent", l, "result", result)
		}
	})
	each(famProgress, func(l string, a *perAgent) { e.sample(famProgress.name, float64(a.progress), "agent", l) })
	each(famTokens, func(l string, a *perAgent) {
		e.sample(famTokens.name, float64(a.tokens), "agent", l, "source", "reported")
		if a.metered {
			e.sample(famTokens.name, float64(a.mTok), "agent", l, "source", "metered")
		}
	})
	each(famCost, func(l string, a *perAgent) {
		e.sample(famCost.name, a.cost, "agent", l, "source", "reported")
		if a.metered {
			e.sample(famCost.name, a.mCost, "agent", l, "source", "metered")
		}
	})
	beats := 0
	for _, a := range agents {
		if !a.lastBeat.IsZero() {
			beats++
		}
	}
	if beats > 0 {
		each(famLastBeat, func(l string, a *perAgent) {
			if !a.lastBeat.IsZero() {
				e.sample(famLastBeat.name, float64(a.lastBeat.UnixNano())/1e9, "agent", l)
			}
		})
	}
}

// agentLabels hands out at most limit agent label values; the other agents
// are OtherAgent.
type agentLabels struct {
	limit     int
	onRelease func(id string) // called with mu held

	mu    sync.Mutex
	slots map[string]struct{}
}

func newAgentLabels(limit int, onRelease func(string)) *agentLabels {
	return &agentLabels{limit: limit, onRelease: onRelease, slots: map[string]struct{}{}}
}

// label returns id's label value, giving id a slot when one is free.
func (l *agentLabels) label(id string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.labelLocked(id)
}

// with calls fn with id's label value, holding the lock so that a slot
// freed concurrently cannot lose the series fn creates.
func (l *agentLabels) with(id string, fn func(label string)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fn(l.labelLocked(id))
}

func (l *agentLabels) labelLocked(id string) string {
	if id == "" || id == OtherAgent {
		return OtherAgent
	}
	if _, ok := l.slots[id]; ok {
		return id
	}
	if len(l.slots) < l.limit {
		l.slots[id] = struct{}{}
		return id
	}
	return OtherAgent
}

// sync frees the slots of agents not in present, then gives free slots to
// present agents without one, in id order (deterministic across scrapes).
func (l *agentLabels) sync(present []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	in := make(map[string]struct{}, len(present))
	for _, id := range present {
		in[id] = struct{}{}
	}
	for id := range l.slots {
		if _, ok := in[id]; !ok {
			delete(l.slots, id)
			if l.onRelease != nil {
				l.onRelease(id)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(in)) {
		l.labelLocked(id)
	}
}

// SampleOf is an agent's sample from its run's published status; state is
// the state to report (the daemon's, which knows more than the run).
func SampleOf(id, state string, st *supervisor.Status, metered bool) AgentSample {
	s := AgentSample{ID: id, State: state}
	if st == nil {
		return s
	}
	a := st.Agent
	s.Heartbeats, s.Heartbeat = a.Heartbeats, st.Heartbeat
	s.Progress, s.Tokens, s.CostUSD, s.LastHeartbeat = a.Progress, a.Tokens, a.CostUSD, a.LastHeartbeat
	s.Metered, s.MeteredTokens, s.MeteredCostUSD = metered, a.MeteredTokens, a.MeteredCostUSD
	return s
}
