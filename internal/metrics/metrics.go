// Package metrics exports hermeskilld's Prometheus metrics:
// symptoms, kills and their detection-to-death latency, certificates, the
// state of every agent, heartbeat datagrams dropped, and the control plane
// outbox. docs/metrics.md lists every series with its labels and meaning,
// and example alert rules.
//
// It uses its own registry (never prometheus.DefaultRegisterer): two
// Metrics in one process, as in tests, do not collide. Event-driven series
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
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hermeskill/hermeskilld/internal/certs"
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

// Metrics holds hermeskilld's metrics and their registry. Its methods are
// safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	symptoms     *prometheus.CounterVec
	kills        *prometheus.CounterVec
	agentKills   *prometheus.CounterVec
	killSeconds  prometheus.Histogram
	certsWritten prometheus.Counter
	certFailures prometheus.Counter

	labels *agentLabels
	state  *stateCollector
}

// New returns Metrics with every series registered in a new registry,
// along with the Go runtime's and the process's own (go_*, process_*).
func New(opts Options) *Metrics {
	limit := cmp.Or(opts.AgentLabelLimit, DefaultAgentLabelLimit)
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		symptoms: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "symptoms_total",
			Help: "Symptoms reported by the checks, by check and severity (warning, terminal).",
		}, []string{"check", "severity"}),
		kills: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "kills_total",
			Help: "Deaths recorded by a certificate, by trigger_type (auto, manual, external), check, stage reached and mode (enforce, shadow).",
		}, []string{"trigger_type", "check", "reached", "mode"}),
		agentKills: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "agent_kills_total",
			Help: "Deaths recorded by a certificate, by agent, check and mode (agent limited by agent_label_limit).",
		}, []string{"agent", "check", "mode"}),
		killSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "kill_seconds",
			Help:    "Detection to death: triggered_at to terminated_at of enforce-mode kills by hermeskilld.",
			Buckets: KillBuckets,
		}),
		certsWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "certificates_written_total",
			Help: "Death certificates written to the certificates directory.",
		}),
		certFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "certificate_failures_total",
			Help: "Death certificates that could not be written (they went to stderr / the log).",
		}),
	}
	m.labels = newAgentLabels(limit, func(id string) {
		m.agentKills.DeletePartialMatch(prometheus.Labels{"agent": id})
	})
	// agentKills is collected by m.state, after it has freed the slots of
	// agents gone, so that one scrape is consistent.
	m.state = &stateCollector{labels: m.labels, agentKills: m.agentKills}
	m.reg.MustRegister(m.symptoms, m.kills, m.killSeconds, m.certsWritten, m.certFailures, m.state,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is the registry every series is in (for tests and for adding
// collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.InstrumentMetricHandler(m.reg, promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		Registry: m.reg, ErrorHandling: promhttp.ContinueOnError,
	}))
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
			m.symptoms.WithLabelValues(string(s.Check), string(s.Severity)).Inc()
		}
	case supervisor.EventCertificate:
		m.certsWritten.Inc()
		m.death(ev.Cert)
	case supervisor.EventCertFailed:
		m.certFailures.Inc()
		m.death(ev.Cert)
	}
}

func (m *Metrics) death(c *certs.Certificate) {
	if c == nil {
		return
	}
	m.kills.WithLabelValues(c.TriggerType, c.TriggerCheck, c.Escalation.Reached, c.Mode).Inc()
	m.labels.with(c.AgentID, func(agent string) { m.agentKills.WithLabelValues(agent, c.TriggerCheck, c.Mode).Inc() })
	if c.Mode == certs.ModeEnforce && c.TriggerType != certs.TriggerExternal &&
		!c.TriggeredAt.IsZero() && !c.TerminatedAt.IsZero() && !c.TerminatedAt.Before(c.TriggeredAt) {
		m.killSeconds.Observe(c.TerminatedAt.Sub(c.TriggeredAt).Seconds())
	}
}
