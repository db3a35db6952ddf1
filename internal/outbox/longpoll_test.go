// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
)

// holdingPlane is a control plane on loopback that holds each GET
// /directives until a directive is posted or the request's ?wait= ends
// (hold false: it answers at once), and records the receipts.
type holdingPlane struct {
	srv  *httptest.Server
	hold bool
	// refuseWait answers 400 to a request with ?wait=.
	refuseWait bool

	mu       sync.Mutex
	next     []Directive   // served to the next request
	posted   chan struct{} // closed and replaced when next is set
	held     int           // requests being held now
	gets     []string      // the raw query of every GET
	getsAt   []time.Time   // when each GET arrived
	receipts map[string][][]byte
	got      chan string // directive id of each receipt
	quit     chan struct{}
}

func newHoldingPlane(t *testing.T, hold bool) *holdingPlane {
	p := &holdingPlane{hold: hold, posted: make(chan struct{}), receipts: map[string][][]byte{},
		got: make(chan string, 100), quit: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/directives", p.directives)
	mux.HandleFunc("POST /api/directives/{id}/receipts", p.receipt)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.close)
	return p
}

func (p *holdingPlane) url() string { return p.srv.URL + "/api" }

// close stops the server: held requests end, later ones are refused.
func (p *holdingPlane) close() {
	p.mu.Lock()
	select {
	case <-p.quit:
	default:
		close(p.quit)
	}
	p.mu.Unlock()
	p.srv.Close()
}

func (p *holdingPlane) directives(w http.ResponseWriter, r *http.Request) {
	wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
	p.mu.Lock()
	p.gets = append(p.gets, r.URL.RawQuery)
	p.getsAt = append(p.getsAt, time.Now())
	if p.refuseWait && wait > 0 {
		p.mu.Unlock()
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if len(p.next) == 0 && p.hold && wait > 0 {
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

func (p *holdingPlane) receipt(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	id := r.PathValue("id")
	p.receipts[id] = append(p.receipts[id], b)
	// Acknowledged: no longer served.
	p.next = slices.DeleteFunc(slices.Clone(p.next), func(d Directive) bool { return d.ID == id })
	p.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
	p.got <- r.PathValue("id")
}

// post makes ds what the control plane serves from now on, and answers
// the requests it holds.
func (p *holdingPlane) post(ds ...Directive) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = ds
	close(p.posted)
	p.posted = make(chan struct{})
}

func (p *holdingPlane) heldNow() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

func (p *holdingPlane) queries() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.gets...)
}

// arrivals is when each GET arrived.
func (p *holdingPlane) arrivals() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.getsAt...)
}

// awaitReceipt waits for the next receipt of id and returns its bytes.
func (p *holdingPlane) awaitReceipt(t *testing.T, id string) []byte {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second)
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
			t.Fatalf("no receipt for %s", id)
		}
	}
}

// runLink runs a Link to plane with cp's settings for h until the test
// ends.
func runLink(t *testing.T, cp config.ControlPlane, signer *certs.Signer, h Host) *Link {
	t.Helper()
	l, err := FromConfig(&cp, t.TempDir(), zaptest.NewLogger(t), nil)
	require.NoError(t, err)
	l.Signer, l.Host = signer, "host-1"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx, h) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		require.NoError(t, l.Close())
	})
	return l
}

// A directive posted while the host's request is held reaches the host at
// once (not a poll interval later), is carried out once, and is
// acknowledged with a receipt signed by the certificates' key; sent again,
// it is acknowledged again with the same bytes and not carried out again.
func TestLongPollDirectiveAcknowledged(t *testing.T) {
	t.Parallel()
	plane := newHoldingPlane(t, true)
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	signer, err := certs.NewSigner(priv)
	require.NoError(t, err)
	acted := make(chan Directive, 10)
	h := &testHost{act: func(_ context.Context, d Directive) Acted {
		acted <- d
		return Acted{Runs: []RunEnded{{AgentID: "a", CertID: "c-a", TreeEmpty: true, Revoked: true, Reached: "sigterm"}},
			Failed: []Failure{{AgentID: "b", Error: "not running"}}}
	}}
	// A poll interval far beyond the test: only the long poll can
	// bring the directive in time.
	runLink(t, config.ControlPlane{URL: plane.url(), PollInterval: time.Minute, Timeout: 5 * time.Second, MaxOutbox: 10}, signer, h)
	require.Eventually(t, func() bool { return plane.heldNow() == 1 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, "host=host-1&wait=30s", plane.queries()[0])

	posted := time.Now()
	plane.post(Directive{ID: "e1", Action: ActionEstop, Reason: "incident", Operator: "alice"})
	select {
	case d := <-acted:
		assert.Equal(t, Directive{ID: "e1", Action: ActionEstop, Reason: "incident", Operator: "alice"}, d)
	case <-time.After(10 * time.Second):
		t.Fatal("the directive never reached the host")
	}
	reached := time.Since(posted)
	raw := plane.awaitReceipt(t, "e1")
	t.Logf("directive reached the host %s after it was posted; receipt %s after", reached, time.Since(posted))
	assert.Less(t, reached, 5*time.Second)

	require.NoError(t, certs.Verify(raw, signer.Public()), "the receipt verifies with the certificates' key")
	var r Receipt
	require.NoError(t, json.Unmarshal(raw, &r))
	assert.Equal(t, ReceiptSchema, r.Schema)
	assert.Equal(t, "host-1", r.Host)
	assert.Equal(t, "e1", r.DirectiveID)
	assert.Equal(t, ActionEstop, r.Action)
	assert.Equal(t, []RunEnded{{AgentID: "a", CertID: "c-a", TreeEmpty: true, Revoked: true, Reached: "sigterm"}}, r.Runs)
	assert.Equal(t, []Failure{{AgentID: "b", Error: "not running"}}, r.Failed)
	assert.False(t, r.AcknowledgedAt.Before(r.ReceivedAt))
	r.Runs[0].CertID = "forged"
	forged, err := json.Marshal(r)
	require.NoError(t, err)
	require.ErrorIs(t, certs.Verify(forged, signer.Public()), certs.ErrBadSignature)

	// The control plane sends e1 again (it lost the receipt, say):
	// acknowledged again, byte for byte, never carried out again.
	require.Eventually(t, func() bool { return plane.heldNow() == 1 }, 10*time.Second, time.Millisecond)
	plane.post(Directive{ID: "e1", Action: ActionEstop, Reason: "incident", Operator: "alice"})
	again := plane.awaitReceipt(t, "e1")
	assert.Equal(t, raw, again)
	assert.Empty(t, acted, "a repeated directive id was carried out again")
}

// A control plane that answers at once (it does not hold) is polled every
// poll interval, not in a tight loop; one that refuses ?wait= is asked
// without it from then on.
func TestLongPollFallsBackToPolling(t *testing.T) {
	t.Parallel()
	for _, refuse := range []bool{false, true} {
		t.Run(map[bool]string{false: "answers at once", true: "refuses wait"}[refuse], func(t *testing.T) {
			t.Parallel()
			fallsBack(t, refuse)
		})
	}
}

func fallsBack(t *testing.T, refuse bool) {
	plane := newHoldingPlane(t, false)
	plane.refuseWait = refuse
	h := &testHost{act: func(context.Context, Directive) Acted { return Acted{} }}
	runLink(t, config.ControlPlane{URL: plane.url(), PollInterval: 50 * time.Millisecond, Timeout: 5 * time.Second, MaxOutbox: 10}, nil, h)
	const n = 8
	require.Eventually(t, func() bool { return len(plane.queries()) >= n }, 10*time.Second, 5*time.Millisecond)
	qs, at := plane.queries()[:n], plane.arrivals()[:n]
	// Each request after a plain answer waits the poll interval, 50ms
	// less its 20% jitter: a loop that does not wait would send the
	// next at once. The one after the refused ?wait= goes at once.
	first := 1
	if refuse {
		first = 2
	}
	for i := first; i < n; i++ {
		assert.GreaterOrEqual(t, at[i].Sub(at[i-1]), 40*time.Millisecond, "request %d came %s after the one before (refuse=%v)", i, at[i].Sub(at[i-1]), refuse)
	}
	if refuse {
		assert.Equal(t, "host=host-1&wait=30s", qs[0])
		assert.Equal(t, "host=host-1", qs[n-1], "still asking for a long poll the control plane refused")
	} else {
		assert.Equal(t, "host=host-1&wait=30s", qs[n-1], "a control plane may start holding later")
	}
}

// The receipt is unsigned without a key, and queued durably: a control
// plane that is down gets it once it is back.
func TestReceiptQueuedWhileUnreachable(t *testing.T) {
	t.Parallel()
	plane := newHoldingPlane(t, false)
	var mu sync.Mutex
	down := true
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		d := down
		mu.Unlock()
		if d && r.Method == http.MethodPost {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		plane.srv.Config.Handler.ServeHTTP(w, r)
	})
	front := httptest.NewServer(mux)
	t.Cleanup(front.Close)
	plane.post(Directive{ID: "k1", Action: ActionKill, Agents: []string{"a"}})
	h := &testHost{act: func(context.Context, Directive) Acted { return Acted{Runs: []RunEnded{{AgentID: "a", CertID: "c1"}}} }}
	l := runLink(t, config.ControlPlane{URL: front.URL + "/api", PollInterval: 50 * time.Millisecond, Timeout: 5 * time.Second, MaxOutbox: 10}, nil, h)
	require.Eventually(t, func() bool { return l.Outbox.IsPending(receiptKey("", "k1")) }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, 1, l.Outbox.Stats().Pending)
	mu.Lock()
	down = false
	mu.Unlock()
	select {
	case l.Outbox.flush <- struct{}{}: // cut the backoff short
	default:
	}
	raw := plane.awaitReceipt(t, "k1")
	var r Receipt
	require.NoError(t, json.Unmarshal(raw, &r))
	assert.Nil(t, r.Signature)
	require.ErrorIs(t, certs.Verify(raw, ed25519.PublicKey(make([]byte, ed25519.PublicKeySize))), certs.ErrUnsigned)
	assert.Equal(t, []RunEnded{{AgentID: "a", CertID: "c1"}}, r.Runs)
}

// fail_closed_after: while the control plane answers, nothing trips; once
// it is gone (its server closed), the host's agents are stopped within
// fail_closed_after and a little, once.
func TestDeadmanTripsWhenTheControlPlaneGoesAway(t *testing.T) {
	t.Parallel()
	plane := newHoldingPlane(t, true)
	h := &testHost{act: func(context.Context, Directive) Acted { return Acted{} }}
	const after = 450 * time.Millisecond
	runLink(t, config.ControlPlane{URL: plane.url(), PollInterval: 100 * time.Millisecond, Timeout: time.Second,
		MaxOutbox: 10, FailClosedAfter: after}, nil, h)
	require.Eventually(t, func() bool { return plane.heldNow() == 1 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, "host=host-1&wait=150ms", plane.queries()[0], "a long poll shorter than fail_closed_after")
	// Five requests: four long polls held their 150ms and answered, over
	// 600ms of contact, more than fail_closed_after.
	require.Eventually(t, func() bool { return len(plane.queries()) >= 5 }, 10*time.Second, time.Millisecond)
	require.Empty(t, h.failClosed(), "tripped while the control plane answered")

	gone := time.Now()
	plane.close()
	require.Eventually(t, func() bool { return len(h.failClosed()) > 0 }, 10*time.Second, 5*time.Millisecond)
	took := time.Since(gone)
	t.Logf("dead-man tripped %s after the control plane went away (fail_closed_after %s)", took, after)
	assert.Less(t, took, after+2*time.Second)
	unreachable := h.failClosed()[0]
	assert.GreaterOrEqual(t, unreachable, after)
	// That it trips once per outage, and again after the next contact,
	// is TestDeadmanTripsOncePerOutage's, on virtual time.
}
