// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package metrics exports hermeskilld's Prometheus metrics:
// symptoms, kills and their detection-to-death latency, certificates, the
// state of every agent, heartbeat datagrams dropped, and the control plane
// outbox. docs/metrics.md lists every series with its labels and meaning,
// and example alert rules.
//
// It writes the text exposition format itself (expo.go says why). Event-driven series
// are counted by Observe; per-agent state is pulled from a source function
// at scrape time, so it is never stale and costs nothing between scrapes.
//
// # Cardinality
//
// Labels come from bounded sets (check names, severities, stages, modes,
// agent states, drop reasons) except agent, the agent's id. At most
// AgentLabelLimit agents (default 1000) get their own agent label; the
// others are added up under agent="_other". Slots go to agents as they are
// first seen (at a scrape, in id order; or by Observe); an agent that is no
// longer in the source at a scrape frees its slot and its series go away.
package metrics

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/fault"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
)

const (
	namespace = "hermeskill"
	// DefaultAgentLabelLimit is Options.AgentLabelLimit's default.
	DefaultAgentLabelLimit = 1000
	// OtherAgent is the agent label of agents beyond the limit.
	OtherAgent = "_other"
	// Path is where Serve answers.
	Path = "/metrics"
)

// KillBuckets are hermeskill_kill_seconds' buckets: a cooperative stop
// ends within coop_grace (default 10s), SIGTERM within term_grace more
// (default 5s), SIGKILL just after.
var KillBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 12.5, 15, 20, 30, 60, 120, 300}

// Options configure Metrics.
type Options struct {
	// AgentLabelLimit is how many agents get their own agent label; the
	// rest are reported as agent="_other". 0 means the default, 1000; a
	// negative value means none (every agent is "_other").
	AgentLabelLimit int
}

// Metrics holds hermeskilld's metrics. Its methods are safe for
// concurrent use.
type Metrics struct {
	symptoms     *counterVec
	kills        *counterVec
	agentKills   *counterVec
	killSeconds  *histogram
	certsWritten *counterVec
	certFailures *counterVec

	labels *agentLabels
	state  *stateCollector
}

// New returns Metrics with every series at its start. Each Metrics is
// independent of any other (two in one process, as in tests, do not
// collide).
func New(opts Options) *Metrics {
	limit := cmp.Or(opts.AgentLabelLimit, DefaultAgentLabelLimit)
	m := &Metrics{
		symptoms: newCounterVec(namespace+"_symptoms_total",
			"Symptoms reported by the checks, by check and severity (warning, terminal).", "check", "severity"),
		kills: newCounterVec(namespace+"_kills_total",
			"Deaths recorded by a certificate, by trigger_type (auto, manual, external), check, stage reached and mode (enforce, shadow).",
			"check", "mode", "reached", "trigger_type"),
		agentKills: newCounterVec(namespace+"_agent_kills_total",
			"Deaths recorded by a certificate, by agent, check and mode (agent limited by agent_label_limit).", "agent", "check", "mode"),
		killSeconds: newHistogram(namespace+"_kill_seconds",
			"Detection to death: triggered_at to terminated_at of enforce-mode kills by hermeskilld.", KillBuckets),
		certsWritten: newCounterVec(namespace+"_certificates_written_total",
			"Death certificates written to the certificates directory."),
		certFailures: newCounterVec(namespace+"_certificate_failures_total",
			"Death certificates that could not be written (they went to stderr / the log)."),
	}
	m.labels = newAgentLabels(limit, func(id string) { m.agentKills.deleteWhere("agent", id) })
	m.state = &stateCollector{labels: m.labels}
	return m
}

// WriteTo writes every series in the text exposition format: the pulled
// per-agent state first (it frees the agent label slots of agents gone
// before hermeskill_agent_kills_total is written, so that one scrape is
// consistent), then the counted series, then the Go runtime's (go_*) and
// the process's (process_*).
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	e := &expo{w: bufio.NewWriter(cw)}
	m.state.write(e)
	m.symptoms.write(e)
	m.kills.write(e)
	m.agentKills.write(e)
	m.killSeconds.write(e)
	m.certsWritten.write(e)
	m.certFailures.write(e)
	writeInternalErrors(e)
	writeRuntime(e)
	err := e.w.Flush()
	return cw.n, err
}

// writeInternalErrors writes hermeskill_internal_errors_total: the panics
// recovered in this process by component (package fault), every
// component's series present from the start.
func writeInternalErrors(e *expo) {
	name := namespace + "_internal_errors_total"
	e.family(name, "counter", "Panics recovered in hermeskilld's code serving one run, by component "+
		"(run_loop, ladder, slot, gateway_meter); each killed its run for internal_error.")
	for _, c := range fault.Components {
		e.sample(name, float64(fault.Count(c)), "component", c)
	}
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// ContentType is the text exposition format's.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Handler serves the metrics in the text exposition format.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", ContentType)
		_, _ = m.WriteTo(w)
	})
}

// Serve answers GET /metrics on listen (host:port) until ctx ends, then
// shuts the server down (waiting at most 5s for scrapes in flight) and
// returns nil. It returns the error of listening, or of serving.
func (m *Metrics) Serve(ctx context.Context, listen string) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", listen)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return m.serve(ctx, ln)
}

func (m *Metrics) serve(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("GET "+Path, m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("metrics: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// Observe counts one supervisor event; it never blocks. Symptoms count in
// hermeskill_symptoms_total; a certificate event (written or failed) that
// carries its certificate counts the death in hermeskill_kills_total and
// hermeskill_agent_kills_total, and, for an enforce-mode kill hermeskilld
// made (not an external death), its triggered_at -> terminated_at in
// hermeskill_kill_seconds.
func (m *Metrics) Observe(ev supervisor.Event) {
	switch ev.Type {
	case supervisor.EventSymptom:
		if s := ev.Symptom; s != nil {
			m.symptoms.inc(string(s.Check), string(s.Severity))
		}
	case supervisor.EventCertificate:
		m.certsWritten.inc()
		m.death(ev.Cert)
	case supervisor.EventCertFailed:
		m.certFailures.inc()
		m.death(ev.Cert)
	}
}

func (m *Metrics) death(c *certs.Certificate) {
	if c == nil {
		return
	}
	m.kills.inc(c.TriggerCheck, c.Mode, c.Escalation.Reached, c.TriggerType)
	m.labels.with(c.AgentID, func(agent string) { m.agentKills.inc(agent, c.TriggerCheck, c.Mode) })
	if c.Mode == certs.ModeEnforce && c.TriggerType != certs.TriggerExternal &&
		!c.TriggeredAt.IsZero() && !c.TerminatedAt.IsZero() && !c.TerminatedAt.Before(c.TriggeredAt) {
		m.killSeconds.observe(c.TerminatedAt.Sub(c.TriggeredAt).Seconds())
	}
}
