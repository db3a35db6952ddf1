// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/escalate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// controlPlane is a real HTTP server playing the control plane: it records
// every kill event, accepts each Idempotency-Key once (a repeat of an
// accepted key is answered 200 and not counted again, as a real control
// plane dedups), and answers what respond says.
type controlPlane struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	respond  func(r *http.Request, attempt int) int // attempt counts this key's requests, from 1
	attempts map[string]int                         // requests per key
	accepted map[string]int                         // events created per key
	order    []string                               // keys in the order they were accepted
	bodies   map[string][]byte
	auth     []string // Authorization of every request
	hit      chan string
	// directives served per agent id
	directives map[string][]Directive
	polls      map[string]int
}

func newControlPlane(t *testing.T, respond func(r *http.Request, attempt int) int) *controlPlane {
	cp := &controlPlane{
		t: t, respond: respond, attempts: map[string]int{}, accepted: map[string]int{},
		bodies: map[string][]byte{}, hit: make(chan string, 100),
		directives: map[string][]Directive{}, polls: map[string]int{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/agents/{agent}/kill_events", cp.killEvent)
	mux.HandleFunc("GET /api/agents/{agent}/directives", cp.directivesFor)
	cp.srv = httptest.NewServer(mux)
	t.Cleanup(cp.srv.Close)
	return cp
}

func (cp *controlPlane) url() string { return cp.srv.URL + "/api/" }

func (cp *controlPlane) killEvent(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	body, _ := io.ReadAll(r.Body)
	cp.mu.Lock()
	cp.attempts[key]++
	n := cp.attempts[key]
	cp.auth = append(cp.auth, r.Header.Get("Authorization"))
	respond := cp.respond
	cp.mu.Unlock()
	select {
	case cp.hit <- key:
	default:
	}

	status := http.StatusCreated
	if respond != nil {
		status = respond(r, n)
	}
	if status == 0 { // the handler hung until the client gave up
		return
	}
	cp.mu.Lock()
	if status/100 == 2 {
		if cp.accepted[key] > 0 {
			status = http.StatusOK // a repeat: dedup, no new event
		} else {
			cp.accepted[key]++
			cp.order = append(cp.order, key)
			cp.bodies[key] = body
		}
	}
	cp.mu.Unlock()
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"status":%d}`, status)
}

func (cp *controlPlane) directivesFor(w http.ResponseWriter, r *http.Request) {
	agent := r.PathValue("agent")
	cp.mu.Lock()
	cp.polls[agent]++
	cp.auth = append(cp.auth, r.Header.Get("Authorization"))
	ds, ok := cp.directives[agent]
	cp.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"directives": ds})
}

func (cp *controlPlane) setRespond(f func(r *http.Request, attempt int) int) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.respond = f
}

func (cp *controlPlane) attemptsOf(key string) int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.attempts[key]
}

func (cp *controlPlane) acceptedOf(key string) int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.accepted[key]
}

func (cp *controlPlane) acceptedOrder() []string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return append([]string(nil), cp.order...)
}

// testOptions are Options with test-sized timings.
func testOptions(t *testing.T, cp *controlPlane, dir string) Options {
	return Options{
		URL: cp.url(), Dir: dir, Timeout: 2 * time.Second,
		MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		Log: zaptest.NewLogger(t),
	}
}

// open opens an outbox and closes it at the end of the test.
func open(t *testing.T, opts Options) *Outbox {
	t.Helper()
	o, err := Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { o.Close() })
	return o
}

// run starts o.Run and returns a func that stops it and waits.
func run(t *testing.T, o *Outbox) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
		})
	}
	t.Cleanup(stop)
	return stop
}

var certSeq int

// testCert returns a certificate of agent, with a fresh cert_id.
func testCert(agent string) *certs.Certificate {
	certSeq++
	trig := time.Date(2026, 12, 2, 10, 15, 3, 123456789, time.UTC).Add(time.Duration(certSeq) * time.Second)
	return &certs.Certificate{
		Schema: certs.Schema, CertID: certs.NewID(), AgentID: agent, Host: "h", Mode: certs.ModeEnforce,
		Command: []string{"python3", "agent.py"}, PID: 4242,
		StartedAt: trig.Add(-time.Hour), TriggeredAt: trig, TerminatedAt: trig.Add(2013 * time.Millisecond),
		TriggerType: certs.TriggerAuto, TriggerCheck: "heartbeat_timeout",
		TriggerReason: "no heartbeat for 30.0s (timeout 30s) <&>",
		Escalation:    certs.Escalation{Reached: certs.ReachedSigkill, CoopSignal: "SIGINT", CoopGraceMS: 10000, TermGraceMS: 5000},
		ShutdownLog: []certs.Step{
			{Step: escalate.StepCoopSignal, At: trig.Add(time.Millisecond), DurationMS: 0.2},
			{Step: escalate.StepSIGKILL, At: trig.Add(2 * time.Second), DurationMS: 0.4, Detail: map[string]any{"procs": 3.0}},
		},
	}
}

func pendingFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	return m
}

func writeToken(t *testing.T, path, tok string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(tok), 0o600))
}

// testHost is a Host whose directives go to act and whose dead-man's
// stops are counted.
type testHost struct {
	agents []string
	act    func(ctx context.Context, d Directive) Acted

	mu     sync.Mutex
	failed []time.Duration // FailClosed's unreachable, one per call
}

func (h *testHost) AgentIDs() []string { return h.agents }

func (h *testHost) Act(ctx context.Context, d Directive) Acted { return h.act(ctx, d) }

func (h *testHost) FailClosed(unreachable, _ time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failed = append(h.failed, unreachable)
}

func (h *testHost) failClosed() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Duration(nil), h.failed...)
}
