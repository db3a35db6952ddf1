// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/outbox"
)

// estopPlane is a control plane on loopback for the daemon: it holds
// the host's GET /directives until a directive is posted (or ?wait=
// ends), serves a directive until its receipt arrives, records receipts
// and accepts kill events.
type estopPlane struct {
	srv *httptest.Server

	mu       sync.Mutex
	next     []outbox.Directive
	posted   chan struct{}
	held     int
	receipts map[string][][]byte
	events   map[string]int // kill events per cert_id
	got      chan string
	quit     chan struct{}
	closed   bool
}

func newEstopPlane(t *testing.T) *estopPlane {
	p := &estopPlane{posted: make(chan struct{}), receipts: map[string][][]byte{}, events: map[string]int{},
		got: make(chan string, 100), quit: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/directives", p.directives)
	mux.HandleFunc("GET /api/agents/{agent}/directives", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("POST /api/directives/{id}/receipts", p.receipt)
	mux.HandleFunc("POST /api/agents/{agent}/kill_events", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.events[r.Header.Get("Idempotency-Key")]++
		p.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	})
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.close)
	return p
}

func (p *estopPlane) url() string { return p.srv.URL + "/api" }

func (p *estopPlane) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.quit)
	}
	p.mu.Unlock()
	p.srv.Close()
}

func (p *estopPlane) directives(w http.ResponseWriter, r *http.Request) {
	wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
	p.mu.Lock()
	if len(p.next) == 0 && wait > 0 {
		posted := p.posted
		p.held++
		p.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-posted:
		case <-t.C:
		case <-p.quit:
		case <-r.Context().Done():
		}
		t.Stop()
		p.mu.Lock()
		p.held--
	}
	ds := p.next
	p.mu.Unlock()
	if len(ds) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"directives": ds})
}

func (p *estopPlane) receipt(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	id := r.PathValue("id")
	p.mu.Lock()
	p.receipts[id] = append(p.receipts[id], b)
	p.next = slices.DeleteFunc(slices.Clone(p.next), func(d outbox.Directive) bool { return d.ID == id })
	p.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
	p.got <- id
}

func (p *estopPlane) post(ds ...outbox.Directive) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = ds
	close(p.posted)
	p.posted = make(chan struct{})
}

func (p *estopPlane) heldNow() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

func (p *estopPlane) eventsFor(certID string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.events[certID]
}

func (p *estopPlane) awaitReceipt(t *testing.T, id string) []byte {
	t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case got := <-p.got:
			if got == id {
				p.mu.Lock()
				defer p.mu.Unlock()
				return p.receipts[id][len(p.receipts[id])-1]
			}
		case <-timeout.C:
			t.Fatalf("no receipt for directive %s", id)
		}
	}
}

// An e-stop directive from the control plane reaches a daemon of five
// agents through the held long poll and is acknowledged with a receipt
// signed by the certificates' key naming the five certificates, each tree
// empty; the certificates were delivered before it. The same directive
// sent again is acknowledged again, and nothing is killed twice.
func TestDaemonEstopDirectiveReceipt(t *testing.T) {
	t.Parallel()
	m := marker(t)
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	plane := newEstopPlane(t)
	root := shortTemp(t)
	key := filepath.Join(root, "signing.key")
	pubPath, err := certs.GenerateKey(key)
	require.NoError(t, err)
	pub, err := certs.LoadPublicKey(pubPath)
	require.NoError(t, err)
	d := startDaemonIn(t, root, fmt.Sprintf("signing_key: %s\ncontrol_plane: {url: %q, poll_interval: 1s, timeout: 5s}\n", key, plane.url()))
	const n = 5
	for i := range n {
		id := fmt.Sprintf("e%d", i)
		d.writeAgent(id, sleeper(t, id, m, "checks: {heartbeat_timeout: 0s}\n"))
	}
	require.Eventually(t, func() bool { return len(survivors(m)) == n }, 30*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return plane.heldNow() == 1 }, 30*time.Second, 5*time.Millisecond, "the daemon's long poll is never held")

	posted := time.Now()
	plane.post(outbox.Directive{ID: "estop-1", Action: "estop", Reason: "incident 4711", Operator: "alice@cp"})
	raw := plane.awaitReceipt(t, "estop-1")
	took := time.Since(posted)
	t.Logf("e-stop of %d agents: receipt %s after the directive was posted", n, took)
	assert.Less(t, took, 5*time.Second)
	assert.Empty(t, survivors(m), "acknowledged before the trees were empty")

	require.NoError(t, certs.Verify(raw, pub), "the receipt is signed with the certificates' key")
	var r outbox.Receipt
	require.NoError(t, json.Unmarshal(raw, &r))
	assert.Equal(t, "estop-1", r.DirectiveID)
	assert.Equal(t, "estop", r.Action)
	assert.Empty(t, r.Failed)
	require.Len(t, r.Runs, n)
	var fromReceipt, onDisk []string
	for _, run := range r.Runs {
		assert.True(t, run.TreeEmpty, run.AgentID)
		assert.True(t, run.Revoked, run.AgentID)
		fromReceipt = append(fromReceipt, run.CertID)
		assert.Equal(t, 1, plane.eventsFor(run.CertID), "the certificate %s was not delivered before its receipt", run.CertID)
	}
	for _, c := range d.certs() {
		assert.Equal(t, "manual", c["trigger_type"])
		assert.Equal(t, "control-plane:alice@cp", c["operator"])
		onDisk = append(onDisk, c["cert_id"].(string))
	}
	assert.ElementsMatch(t, onDisk, fromReceipt)
	for id, a := range d.agentsByID() {
		assert.Equal(t, control.StateEstopped, a.State, id)
	}

	// Sent again (the control plane lost the receipt): acknowledged again
	// with the same bytes; no kill, no certificate.
	require.Eventually(t, func() bool { return plane.heldNow() == 1 }, 10*time.Second, 5*time.Millisecond)
	plane.post(outbox.Directive{ID: "estop-1", Action: "estop", Reason: "incident 4711", Operator: "alice@cp"})
	assert.Equal(t, raw, plane.awaitReceipt(t, "estop-1"))
	assert.Len(t, d.certs(), n)
	assert.Equal(t, 1, strings.Count(d.logText(), "E-STOP: stopping every agent"), "the e-stop ran twice")
}

// fail_closed_after: once the control plane is gone (its server closed),
// the daemon stops every agent within fail_closed_after and some slack,
// with certificates that say why, and keeps them down.
func TestDaemonFailsClosedWithoutControlPlane(t *testing.T) {
	t.Parallel()
	m := marker(t)
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	plane := newEstopPlane(t)
	const after = 2 * time.Second
	d := startDaemon(t, fmt.Sprintf("control_plane: {url: %q, poll_interval: 500ms, timeout: 2s, fail_closed_after: %s}\n", plane.url(), after))
	for _, id := range []string{"f0", "f1"} {
		d.writeAgent(id, sleeper(t, id, m, "checks: {heartbeat_timeout: 0s}\n"))
	}
	require.Eventually(t, func() bool { return len(survivors(m)) == 2 }, 30*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return plane.heldNow() == 1 }, 30*time.Second, 5*time.Millisecond)

	gone := time.Now()
	plane.close()
	require.Eventually(t, func() bool { return len(survivors(m)) == 0 }, after+15*time.Second, 20*time.Millisecond)
	took := time.Since(gone)
	t.Logf("fail_closed_after %s: agents dead %s after the control plane went away", after, took)
	assert.GreaterOrEqual(t, took, after-time.Second/2, "stopped before fail_closed_after (less the last contact's age)")
	assert.Less(t, took, after+5*time.Second)
	require.Eventually(t, func() bool { return len(d.certs()) == 2 }, 10*time.Second, 20*time.Millisecond)
	for _, c := range d.certs() {
		assert.Equal(t, "control_plane_unreachable", c["trigger_check"])
		assert.Equal(t, "auto", c["trigger_type"])
		assert.Contains(t, c["trigger_reason"], "control plane unreachable for")
		assert.Contains(t, c["trigger_reason"], "(fail_closed_after 2s)")
	}
	for id, a := range d.agentsByID() {
		assert.Equal(t, control.StateEstopped, a.State, id)
	}
}
