// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/outbox/outboxtest"
)

// newPlane is a control plane on loopback for outbox's directives; hold
// false: it answers at once.
func newPlane(t *testing.T, hold bool) *outboxtest.Plane[Directive] {
	p := outboxtest.New(t, func(d Directive) string { return d.ID })
	p.Hold = hold
	return p
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
	plane := newPlane(t, true)
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
	runLink(t, config.ControlPlane{URL: plane.URL(), PollInterval: time.Minute, Timeout: 5 * time.Second, MaxOutbox: 10}, signer, h)
	require.Eventually(t, func() bool { return plane.HeldNow() == 1 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, "host=host-1&wait=30s", plane.Queries()[0])

	posted := time.Now()
	plane.Post(Directive{ID: "e1", Action: ActionEstop, Reason: "incident", Operator: "alice"})
	select {
	case d := <-acted:
		assert.Equal(t, Directive{ID: "e1", Action: ActionEstop, Reason: "incident", Operator: "alice"}, d)
	case <-time.After(10 * time.Second):
		t.Fatal("the directive never reached the host")
	}
	reached := time.Since(posted)
	raw := plane.AwaitReceipt(t, "e1")
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
	require.Eventually(t, func() bool { return plane.HeldNow() == 1 }, 10*time.Second, time.Millisecond)
	plane.Post(Directive{ID: "e1", Action: ActionEstop, Reason: "incident", Operator: "alice"})
	again := plane.AwaitReceipt(t, "e1")
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
	plane := newPlane(t, false)
	plane.RefuseWait = refuse
	h := &testHost{act: func(context.Context, Directive) Acted { return Acted{} }}
	runLink(t, config.ControlPlane{URL: plane.URL(), PollInterval: 50 * time.Millisecond, Timeout: 5 * time.Second, MaxOutbox: 10}, nil, h)
	const n = 8
	require.Eventually(t, func() bool { return len(plane.Queries()) >= n }, 10*time.Second, 5*time.Millisecond)
	qs, at := plane.Queries()[:n], plane.Arrivals()[:n]
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
	plane := newPlane(t, false)
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
		plane.Handler().ServeHTTP(w, r)
	})
	front := httptest.NewServer(mux)
	t.Cleanup(front.Close)
	plane.Post(Directive{ID: "k1", Action: ActionKill, Agents: []string{"a"}})
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
	raw := plane.AwaitReceipt(t, "k1")
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
	plane := newPlane(t, true)
	h := &testHost{act: func(context.Context, Directive) Acted { return Acted{} }}
	const after = 450 * time.Millisecond
	runLink(t, config.ControlPlane{URL: plane.URL(), PollInterval: 100 * time.Millisecond, Timeout: time.Second,
		MaxOutbox: 10, FailClosedAfter: after}, nil, h)
	require.Eventually(t, func() bool { return plane.HeldNow() == 1 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, "host=host-1&wait=150ms", plane.Queries()[0], "a long poll shorter than fail_closed_after")
	// Five requests: four long polls held their 150ms and answered, over
	// 600ms of contact, more than fail_closed_after.
	require.Eventually(t, func() bool { return len(plane.Queries()) >= 5 }, 10*time.Second, time.Millisecond)
	require.Empty(t, h.failClosed(), "tripped while the control plane answered")

	gone := time.Now()
	plane.Close()
	require.Eventually(t, func() bool { return len(h.failClosed()) > 0 }, 10*time.Second, 5*time.Millisecond)
	took := time.Since(gone)
	t.Logf("dead-man tripped %s after the control plane went away (fail_closed_after %s)", took, after)
	assert.Less(t, took, after+2*time.Second)
	unreachable := h.failClosed()[0]
	assert.GreaterOrEqual(t, unreachable, after)
	// That it trips once per outage, and again after the next contact,
	// is TestDeadmanTripsOncePerOutage's, on virtual time.
}
