// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package outboxtest is a control plane on loopback for the tests of a
// host's link to it (package outbox) and of the daemon that runs one: a
// real HTTP server that holds the host's GET /directives as a long poll,
// serves a directive until its receipt arrives, and records what it was
// sent. It is imported only by tests.
//
// Its directives are of the caller's type D (outbox.Directive, which this
// package cannot name: outbox's own tests import it), sent as JSON and
// told apart by the id the caller reads of them.
package outboxtest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// Plane is the control plane, under URL()/api. It answers:
//
//	GET  /api/directives                 held until Post or ?wait= ends
//	GET  /api/agents/{agent}/directives  204: none
//	POST /api/directives/{id}/receipts   recorded; the directive is no longer served
//	POST /api/agents/{agent}/kill_events counted by Idempotency-Key
type Plane[D any] struct {
	srv *httptest.Server
	id  func(D) string

	// Hold false answers GET /directives at once (a control plane
	// that does not long-poll); RefuseWait answers 400 to one with
	// ?wait=. Set before the host's first request.
	Hold, RefuseWait bool

	mu       sync.Mutex
	next     []D           // served to every request until acknowledged
	posted   chan struct{} // closed and replaced by Post
	held     int           // requests being held now
	gets     []string      // the raw query of every GET /directives
	getsAt   []time.Time   // when each arrived
	receipts map[string][][]byte
	events   map[string]int // kill events per Idempotency-Key (cert id)
	got      chan string    // directive id of each receipt
	quit     chan struct{}
	closed   bool
}

// New starts a Plane that holds, whose directives' ids id reads; it is
// closed when the test ends.
func New[D any](t testing.TB, id func(D) string) *Plane[D] {
	p := &Plane[D]{id: id, Hold: true, posted: make(chan struct{}), receipts: map[string][][]byte{},
		events: map[string]int{}, got: make(chan string, 100), quit: make(chan struct{})}
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
	t.Cleanup(p.Close)
	return p
}

// URL is the control plane's API URL (control_plane.url).
func (p *Plane[D]) URL() string { return p.srv.URL + "/api" }

// Handler is the control plane's, for a test that puts a front before it.
func (p *Plane[D]) Handler() http.Handler { return p.srv.Config.Handler }

// Close stops the server: held requests end, later ones are refused.
func (p *Plane[D]) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.quit)
	}
	p.mu.Unlock()
	p.srv.Close()
}

func (p *Plane[D]) directives(w http.ResponseWriter, r *http.Request) {
	wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
	p.mu.Lock()
	p.gets = append(p.gets, r.URL.RawQuery)
	p.getsAt = append(p.getsAt, time.Now())
	if p.RefuseWait && wait > 0 {
		p.mu.Unlock()
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if len(p.next) == 0 && p.Hold && wait > 0 {
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
	json.NewEncoder(w).Encode(map[string]any{"directives": ds}) //nolint:errcheck // the host sees a short body
}

func (p *Plane[D]) receipt(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	id := r.PathValue("id")
	p.mu.Lock()
	p.receipts[id] = append(p.receipts[id], b)
	// Acknowledged: no longer served.
	p.next = slices.DeleteFunc(slices.Clone(p.next), func(d D) bool { return p.id(d) == id })
	p.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
	p.got <- id
}

// Post makes ds what the control plane serves from now on, and answers
// the requests it holds.
func (p *Plane[D]) Post(ds ...D) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = ds
	close(p.posted)
	p.posted = make(chan struct{})
}

// HeldNow is how many requests the control plane holds now.
func (p *Plane[D]) HeldNow() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// Queries are the raw queries of every GET /directives, in order.
func (p *Plane[D]) Queries() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.gets)
}

// Arrivals are when each GET /directives arrived.
func (p *Plane[D]) Arrivals() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.getsAt)
}

// EventsFor is how many kill events came for a certificate.
func (p *Plane[D]) EventsFor(certID string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.events[certID]
}

// AwaitReceipt waits (30s at most) for the next receipt of directive id
// and returns its bytes.
func (p *Plane[D]) AwaitReceipt(t testing.TB, id string) []byte {
	t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case got := <-p.got:
			if got == id {
				p.mu.Lock()
				defer p.mu.Unlock()
				rs := p.receipts[id]
				return rs[len(rs)-1]
			}
		case <-timeout.C:
			t.Fatalf("no receipt for directive %s", id)
		}
	}
}
