// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/escalate"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 12, 2, 10, 15, 3, 0, time.UTC)

func cert(agent, check, trigger, reached, mode string, took time.Duration) *certs.Certificate {
	c := &certs.Certificate{
		Schema: certs.Schema, CertID: certs.NewID(), AgentID: agent, Mode: mode,
		TriggeredAt: t0, TriggerType: trigger, TriggerCheck: check,
		Escalation: certs.Escalation{Reached: reached},
	}
	if mode == certs.ModeEnforce {
		c.TerminatedAt = t0.Add(took)
	}
	return c
}

func symptom(agent string, check symptoms.Check, sev symptoms.Severity) supervisor.Event {
	return supervisor.Event{Type: supervisor.EventSymptom, AgentID: agent,
		Symptom: &symptoms.Symptom{At: t0, Check: check, Severity: sev}}
}

// killHistogramText is the exposition text of hermeskill_kill_seconds holding values.
func killHistogramText(values ...float64) string {
	var b strings.Builder
	b.WriteString("# HELP hermeskill_kill_seconds Detection to death: triggered_at to terminated_at of enforce-mode kills by hermeskilld.\n")
	b.WriteString("# TYPE hermeskill_kill_seconds histogram\n")
	sum := 0.0
	for _, v := range values {
		sum += v
	}
	for _, le := range KillBuckets {
		n := 0
		for _, v := range values {
			if v <= le {
				n++
			}
		}
		fmt.Fprintf(&b, "hermeskill_kill_seconds_bucket{le=%q} %d\n", strconv.FormatFloat(le, 'g', -1, 64), n)
	}
	fmt.Fprintf(&b, "hermeskill_kill_seconds_bucket{le=\"+Inf\"} %d\n", len(values))
	fmt.Fprintf(&b, "hermeskill_kill_seconds_sum %s\n", strconv.FormatFloat(sum, 'g', -1, 64))
	fmt.Fprintf(&b, "hermeskill_kill_seconds_count %d\n", len(values))
	return b.String()
}

// script plays two agents: "alpha" warns about memory, stops beating and is
// killed by heartbeat_timeout after SIGTERM; "beta" keeps running and
// receives one forged datagram.
func script(m *Metrics) {
	m.SetSource(func() []AgentSample {
		return []AgentSample{
			{ID: "alpha", State: "quarantined", Heartbeats: 5, Heartbeat: heartbeat.StatsSnapshot{Received: 5, Accepted: 5}},
			{ID: "beta", State: "running", Heartbeats: 12, Heartbeat: heartbeat.StatsSnapshot{Received: 13, Accepted: 12, Forged: 1,
				StreamAccepted: 2, StreamRefused: 1}},
		}
	})
	for _, ev := range []supervisor.Event{
		{Type: supervisor.EventStarted, AgentID: "alpha", PID: 10},
		{Type: supervisor.EventStarted, AgentID: "beta", PID: 11},
		symptom("alpha", symptoms.Memory, symptoms.Warning),
		symptom("alpha", symptoms.HeartbeatTimeout, symptoms.Terminal),
		{Type: supervisor.EventStep, AgentID: "alpha", Step: &escalate.Step{Name: escalate.StepCoopSignal}},
		{Type: supervisor.EventStep, AgentID: "alpha", Step: &escalate.Step{Name: escalate.StepSIGTERM}},
		{Type: supervisor.EventExited, AgentID: "alpha"},
		{Type: supervisor.EventCertificate, AgentID: "alpha", CertPath: "/x.json",
			Cert: cert("alpha", "heartbeat_timeout", certs.TriggerAuto, certs.ReachedSigterm, certs.ModeEnforce, 10250*time.Millisecond)},
	} {
		m.Observe(ev)
	}
	m.SetOutbox(1, 0, 2, 3)
}

const scriptWant = `
# HELP hermeskill_agents Agents by state.
# TYPE hermeskill_agents gauge
hermeskill_agents{state="quarantined"} 1
hermeskill_agents{state="running"} 1
# HELP hermeskill_heartbeats_total Heartbeats accepted, by agent.
# TYPE hermeskill_heartbeats_total counter
hermeskill_heartbeats_total{agent="alpha"} 5
hermeskill_heartbeats_total{agent="beta"} 12
# HELP hermeskill_datagrams_dropped_total Heartbeat socket datagrams dropped, by agent and reason.
# TYPE hermeskill_datagrams_dropped_total counter
hermeskill_datagrams_dropped_total{agent="alpha",reason="forged"} 0
hermeskill_datagrams_dropped_total{agent="alpha",reason="malformed"} 0
hermeskill_datagrams_dropped_total{agent="alpha",reason="overflow"} 0
hermeskill_datagrams_dropped_total{agent="alpha",reason="oversize"} 0
hermeskill_datagrams_dropped_total{agent="alpha",reason="rate_limited"} 0
hermeskill_datagrams_dropped_total{agent="alpha",reason="unverifiable"} 0
hermeskill_datagrams_dropped_total{agent="beta",reason="forged"} 1
hermeskill_datagrams_dropped_total{agent="beta",reason="malformed"} 0
hermeskill_datagrams_dropped_total{agent="beta",reason="overflow"} 0
hermeskill_datagrams_dropped_total{agent="beta",reason="oversize"} 0
hermeskill_datagrams_dropped_total{agent="beta",reason="rate_limited"} 0
hermeskill_datagrams_dropped_total{agent="beta",reason="unverifiable"} 0
# HELP hermeskill_stream_connections_total Stream socket connections, by agent and result: accepted, refused (credentials), over_limit, dropped (closed by hermeskilld).
# TYPE hermeskill_stream_connections_total counter
hermeskill_stream_connections_total{agent="alpha",result="accepted"} 0
hermeskill_stream_connections_total{agent="alpha",result="dropped"} 0
hermeskill_stream_connections_total{agent="alpha",result="over_limit"} 0
hermeskill_stream_connections_total{agent="alpha",result="refused"} 0
hermeskill_stream_connections_total{agent="beta",result="accepted"} 2
hermeskill_stream_connections_total{agent="beta",result="dropped"} 0
hermeskill_stream_connections_total{agent="beta",result="over_limit"} 0
hermeskill_stream_connections_total{agent="beta",result="refused"} 1
# HELP hermeskill_symptoms_total Symptoms reported by the checks, by check and severity (warning, terminal).
# TYPE hermeskill_symptoms_total counter
hermeskill_symptoms_total{check="heartbeat_timeout",severity="terminal"} 1
hermeskill_symptoms_total{check="memory",severity="warning"} 1
# HELP hermeskill_kills_total Deaths recorded by a certificate, by trigger_type (auto, manual, external), check, stage reached and mode (enforce, shadow).
# TYPE hermeskill_kills_total counter
hermeskill_kills_total{check="heartbeat_timeout",mode="enforce",reached="sigterm",trigger_type="auto"} 1
# HELP hermeskill_agent_kills_total Deaths recorded by a certificate, by agent, check and mode (agent limited by agent_label_limit).
# TYPE hermeskill_agent_kills_total counter
hermeskill_agent_kills_total{agent="alpha",check="heartbeat_timeout",mode="enforce"} 1
# HELP hermeskill_certificates_written_total Death certificates written to the certificates directory.
# TYPE hermeskill_certificates_written_total counter
hermeskill_certificates_written_total 1
# HELP hermeskill_certificate_failures_total Death certificates that could not be written (they went to stderr / the log).
# TYPE hermeskill_certificate_failures_total counter
hermeskill_certificate_failures_total 0
# HELP hermeskill_outbox_pending Certificates waiting for delivery to the control plane.
# TYPE hermeskill_outbox_pending gauge
hermeskill_outbox_pending 1
# HELP hermeskill_outbox_parked Certificates the control plane refused, parked for an operator.
# TYPE hermeskill_outbox_parked gauge
hermeskill_outbox_parked 0
# HELP hermeskill_outbox_delivered_total Certificates delivered to the control plane.
# TYPE hermeskill_outbox_delivered_total counter
hermeskill_outbox_delivered_total 2
# HELP hermeskill_outbox_failures_total Failed delivery attempts (retried or parked).
# TYPE hermeskill_outbox_failures_total counter
hermeskill_outbox_failures_total 3
# HELP hermeskill_outbox_rejected_total Certificates not queued for delivery because the outbox was full.
# TYPE hermeskill_outbox_rejected_total counter
hermeskill_outbox_rejected_total 0
`

var scriptNames = []string{
	"hermeskill_agents", "hermeskill_heartbeats_total", "hermeskill_datagrams_dropped_total",
	"hermeskill_stream_connections_total", "hermeskill_symptoms_total", "hermeskill_kills_total", "hermeskill_agent_kills_total",
	"hermeskill_kill_seconds", "hermeskill_certificates_written_total", "hermeskill_certificate_failures_total",
	"hermeskill_outbox_pending", "hermeskill_outbox_parked", "hermeskill_outbox_delivered_total",
	"hermeskill_outbox_failures_total", "hermeskill_outbox_rejected_total",
}

func TestScriptedRun(t *testing.T) {
	m := New(Options{})
	script(m)
	require.NoError(t, gatherAndCompare(m, scriptWant+killHistogramText(10.25), scriptNames...))
}

func TestScrapeOverHTTP(t *testing.T) {
	m := New(Options{})
	script(m)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	require.NoError(t, scrapeAndCompare(srv.URL+Path,
		scriptWant+killHistogramText(10.25), scriptNames...))
	// A Go process exports its own health too.
	body := get(t, srv.URL+Path)
	assert.Contains(t, body, "go_goroutines ")
	assert.Contains(t, body, "process_resident_memory_bytes ")
}

func TestOnlyEnforcedKillsAreTimed(t *testing.T) {
	m := New(Options{})
	for _, c := range []*certs.Certificate{
		cert("a", "memory", certs.TriggerAuto, certs.ReachedCooperative, certs.ModeEnforce, 1500*time.Millisecond),
		cert("a", "memory", certs.TriggerAuto, certs.ReachedNone, certs.ModeShadow, 0),
		cert("b", "external", certs.TriggerExternal, certs.ReachedNone, certs.ModeEnforce, time.Millisecond),
		cert("c", "manual", certs.TriggerManual, certs.ReachedSigkill, certs.ModeEnforce, 15200*time.Millisecond),
	} {
		m.Observe(supervisor.Event{Type: supervisor.EventCertificate, AgentID: c.AgentID, Cert: c})
	}
	m.Observe(supervisor.Event{Type: supervisor.EventCertFailed, AgentID: "d", Err: io.ErrShortWrite,
		Cert: cert("d", "tokens", certs.TriggerAuto, certs.ReachedCooperative, certs.ModeEnforce, 2*time.Second)})
	m.Observe(supervisor.Event{Type: supervisor.EventCertFailed, AgentID: "e"}) // no certificate
	require.NoError(t, gatherAndCompare(m, (`
# HELP hermeskill_kills_total Deaths recorded by a certificate, by trigger_type (auto, manual, external), check, stage reached and mode (enforce, shadow).
# TYPE hermeskill_kills_total counter
hermeskill_kills_total{check="external",mode="enforce",reached="none",trigger_type="external"} 1
hermeskill_kills_total{check="manual",mode="enforce",reached="sigkill",trigger_type="manual"} 1
hermeskill_kills_total{check="memory",mode="enforce",reached="cooperative",trigger_type="auto"} 1
hermeskill_kills_total{check="memory",mode="shadow",reached="none",trigger_type="auto"} 1
hermeskill_kills_total{check="tokens",mode="enforce",reached="cooperative",trigger_type="auto"} 1
# HELP hermeskill_certificates_written_total Death certificates written to the certificates directory.
# TYPE hermeskill_certificates_written_total counter
hermeskill_certificates_written_total 4
# HELP hermeskill_certificate_failures_total Death certificates that could not be written (they went to stderr / the log).
# TYPE hermeskill_certificate_failures_total counter
hermeskill_certificate_failures_total 2
`+killHistogramText(1.5, 15.2, 2)),
		"hermeskill_kills_total", "hermeskill_kill_seconds",
		"hermeskill_certificates_written_total", "hermeskill_certificate_failures_total"))
}

func TestAgentLabelLimit(t *testing.T) {
	m := New(Options{AgentLabelLimit: 2})
	samples := []AgentSample{
		{ID: "c", State: "running", Heartbeats: 100, Heartbeat: heartbeat.StatsSnapshot{Forged: 4}},
		{ID: "a", State: "running", Heartbeats: 1},
		{ID: "b", State: "running", Heartbeats: 10},
		{ID: "d", State: "failed", Heartbeats: 1000, Heartbeat: heartbeat.StatsSnapshot{Forged: 3}},
	}
	m.SetSource(func() []AgentSample { return samples })
	heartbeats := func() string {
		return "# HELP hermeskill_heartbeats_total Heartbeats accepted, by agent.\n" +
			"# TYPE hermeskill_heartbeats_total counter\n"
	}
	// Slots go to the first agents in id order; the rest are added up.
	require.NoError(t, gatherAndCompare(m, (heartbeats()+`
hermeskill_heartbeats_total{agent="_other"} 1100
hermeskill_heartbeats_total{agent="a"} 1
hermeskill_heartbeats_total{agent="b"} 10
# HELP hermeskill_agents Agents by state.
# TYPE hermeskill_agents gauge
hermeskill_agents{state="failed"} 1
hermeskill_agents{state="running"} 3
`), "hermeskill_heartbeats_total", "hermeskill_agents"))
	forged, err := gatherAndCount(m, "hermeskill_datagrams_dropped_total")
	require.NoError(t, err)
	assert.Equal(t, 3*len(DropReasons), forged, "a, b and _other only")

	// A kill of an agent beyond the limit is counted under _other; of one
	// within it under its id.
	m.Observe(supervisor.Event{Type: supervisor.EventCertificate,
		Cert: cert("d", "procs", certs.TriggerAuto, certs.ReachedSigkill, certs.ModeEnforce, time.Second)})
	m.Observe(supervisor.Event{Type: supervisor.EventCertificate,
		Cert: cert("a", "procs", certs.TriggerAuto, certs.ReachedSigkill, certs.ModeEnforce, time.Second)})

	// "a" leaves: its slot goes to "c", and a's series go away.
	samples = samples[:1:1]
	samples = append(samples, AgentSample{ID: "b", State: "running", Heartbeats: 11}, AgentSample{ID: "d", State: "failed", Heartbeats: 1000})
	require.NoError(t, gatherAndCompare(m, (heartbeats()+`
hermeskill_heartbeats_total{agent="_other"} 1000
hermeskill_heartbeats_total{agent="b"} 11
hermeskill_heartbeats_total{agent="c"} 100
# HELP hermeskill_agent_kills_total Deaths recorded by a certificate, by agent, check and mode (agent limited by agent_label_limit).
# TYPE hermeskill_agent_kills_total counter
hermeskill_agent_kills_total{agent="_other",check="procs",mode="enforce"} 1
`), "hermeskill_heartbeats_total", "hermeskill_agent_kills_total"))
}

func TestNoAgentLabels(t *testing.T) {
	m := New(Options{AgentLabelLimit: -1})
	m.SetSource(func() []AgentSample {
		return []AgentSample{{ID: "a", State: "running", Heartbeats: 1}, {ID: "b", State: "running", Heartbeats: 2}}
	})
	require.NoError(t, gatherAndCompare(m, (`
# HELP hermeskill_heartbeats_total Heartbeats accepted, by agent.
# TYPE hermeskill_heartbeats_total counter
hermeskill_heartbeats_total{agent="_other"} 3
`), "hermeskill_heartbeats_total"))
}

func TestNothingBeforeSourceAndOutbox(t *testing.T) {
	m := New(Options{})
	n, err := gatherAndCount(m, "hermeskill_agents", "hermeskill_outbox_pending", "hermeskill_heartbeats_total")
	require.NoError(t, err)
	assert.Zero(t, n)
	m.SetOutboxRejected(7)
	m.SetOutbox(0, 1, 0, 1)
	assert.NoError(t, gatherAndCompare(m, (`
# HELP hermeskill_outbox_rejected_total Certificates not queued for delivery because the outbox was full.
# TYPE hermeskill_outbox_rejected_total counter
hermeskill_outbox_rejected_total 7
`), "hermeskill_outbox_rejected_total"))
}

// The audit log's losses are read from their source at each scrape, and
// exist only once a source is set.
func TestAuditLosses(t *testing.T) {
	m := New(Options{})
	n, err := gatherAndCount(m, "hermeskill_audit_events_lost_total")
	require.NoError(t, err)
	assert.Zero(t, n)
	failed, dropped := uint64(0), uint64(0)
	m.SetAuditSource(func() (uint64, uint64) { return failed, dropped })
	want := func(f, d int) string {
		return fmt.Sprintf(`
# HELP hermeskill_audit_events_lost_total Events missing from the audit log, by reason: write_failed (the append failed) or queue_full.
# TYPE hermeskill_audit_events_lost_total counter
hermeskill_audit_events_lost_total{reason="queue_full"} %d
hermeskill_audit_events_lost_total{reason="write_failed"} %d
`, d, f)
	}
	assert.NoError(t, gatherAndCompare(m, want(0, 0), "hermeskill_audit_events_lost_total"))
	failed, dropped = 2, 5
	assert.NoError(t, gatherAndCompare(m, want(2, 5), "hermeskill_audit_events_lost_total"))
}

func TestServeUntilCancelled(t *testing.T) {
	m := New(Options{})
	m.Observe(symptom("a", symptoms.Tokens, symptoms.Warning))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()
	assert.Contains(t, get(t, base+Path), `hermeskill_symptoms_total{check="tokens",severity="warning"} 1`)
	resp, err := http.Get(base + "/other")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	cancel()
	require.NoError(t, <-done)
	_, err = http.Get(base + Path)
	assert.Error(t, err, "the listener is closed")

	assert.Error(t, m.Serve(t.Context(), "256.0.0.1:bad"))
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// Per-agent gauges: progress, tokens and cost (reported; metered too when
// the gateway carries the agent's traffic), and when it last beat.
func TestAgentGauges(t *testing.T) {
	m := New(Options{AgentLabelLimit: 10})
	beat := time.Unix(1_700_000_000, 500_000_000)
	m.SetSource(func() []AgentSample {
		return []AgentSample{
			{ID: "plain", State: "running", Progress: 7, Tokens: 100, CostUSD: 0.25, LastHeartbeat: beat},
			{ID: "gated", State: "running", Progress: 3, Tokens: 1, CostUSD: 0.01, Metered: true, MeteredTokens: 5000, MeteredCostUSD: 1.5},
		}
	})
	require.NoError(t, gatherAndCompare(m, `
# HELP hermeskill_agent_cost_usd Spend of the agent's current run in USD: reported by the agent, or metered by the LLM gateway.
# TYPE hermeskill_agent_cost_usd gauge
hermeskill_agent_cost_usd{agent="gated",source="metered"} 1.5
hermeskill_agent_cost_usd{agent="gated",source="reported"} 0.01
hermeskill_agent_cost_usd{agent="plain",source="reported"} 0.25
# HELP hermeskill_agent_last_heartbeat_timestamp_seconds When the agent last beat (Unix time), by agent.
# TYPE hermeskill_agent_last_heartbeat_timestamp_seconds gauge
hermeskill_agent_last_heartbeat_timestamp_seconds{agent="plain"} 1.7000000005e+09
# HELP hermeskill_agent_progress The agent's PROGRESS step counter, by agent (of its current run).
# TYPE hermeskill_agent_progress gauge
hermeskill_agent_progress{agent="gated"} 3
hermeskill_agent_progress{agent="plain"} 7
# HELP hermeskill_agent_tokens Tokens used by the agent's current run: reported by the agent, or metered by the LLM gateway.
# TYPE hermeskill_agent_tokens gauge
hermeskill_agent_tokens{agent="gated",source="metered"} 5000
hermeskill_agent_tokens{agent="gated",source="reported"} 1
hermeskill_agent_tokens{agent="plain",source="reported"} 100
`, "hermeskill_agent_cost_usd", "hermeskill_agent_last_heartbeat_timestamp_seconds", "hermeskill_agent_progress", "hermeskill_agent_tokens"))
}

// Every reason of a failed kernel sample is exported from the start, 0
// included: an alert on any increase needs the series before the first.
func TestSamplerFailuresFromStart(t *testing.T) {
	m := New(Options{})
	assert.NoError(t, gatherAndCompare(m, `
# HELP hermeskill_sampler_failures_total Failed samples of an agent's process tree for the kernel checks, by reason: descriptors (hermeskilld out of descriptors), permission, other.
# TYPE hermeskill_sampler_failures_total counter
hermeskill_sampler_failures_total{reason="descriptors"} 0
hermeskill_sampler_failures_total{reason="other"} 0
hermeskill_sampler_failures_total{reason="permission"} 0
`, "hermeskill_sampler_failures_total"))
}

// The receipts' series come with the outbox's, every result 0 included,
// and a later SetOutbox keeps them.
func TestReceipts(t *testing.T) {
	m := New(Options{})
	n, err := gatherAndCount(m, "hermeskill_receipts_total")
	require.NoError(t, err)
	assert.Zero(t, n, "no outbox, no series")
	want := func(queued, sent, parked, dropped int) string {
		return fmt.Sprintf(`
# HELP hermeskill_receipts_total Directive receipts, by result: queued for the control plane, sent (delivered), parked (refused), dropped (not made or not queued).
# TYPE hermeskill_receipts_total counter
hermeskill_receipts_total{result="dropped"} %d
hermeskill_receipts_total{result="parked"} %d
hermeskill_receipts_total{result="queued"} %d
hermeskill_receipts_total{result="sent"} %d
`, dropped, parked, queued, sent)
	}
	m.SetOutbox(0, 0, 0, 0)
	assert.NoError(t, gatherAndCompare(m, want(0, 0, 0, 0), "hermeskill_receipts_total"))
	m.SetOutboxReceipts(4, 2, 1, 1)
	m.SetOutbox(1, 1, 2, 1)
	assert.NoError(t, gatherAndCompare(m, want(4, 2, 1, 1), "hermeskill_receipts_total"))
}
