// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
)

const wait = 10 * time.Second

func TestRetriesUntilAcceptedAndDeliversOnce(t *testing.T) {
	cp := newControlPlane(t, func(_ *http.Request, attempt int) int {
		if attempt <= 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusCreated
	})
	dir := t.TempDir()
	tok := filepath.Join(t.TempDir(), "cp.token")
	writeToken(t, tok, "  s3cret\n")
	opts := testOptions(t, cp, dir)
	opts.TokenFile = tok
	o := open(t, opts)

	a, b := testCert("bot-a"), testCert("bot/b")
	require.NoError(t, o.Enqueue(a, nil))
	require.NoError(t, o.Enqueue(b, nil))
	require.Len(t, pendingFiles(t, dir), 2, "durable before Enqueue returns")
	run(t, o)

	require.Eventually(t, func() bool { return o.Stats().Delivered == 2 }, wait, time.Millisecond)
	assert.Equal(t, 1, cp.acceptedOf(a.CertID))
	assert.Equal(t, 1, cp.acceptedOf(b.CertID))
	assert.Equal(t, 4, cp.attemptsOf(a.CertID), "3 failures then the success, and nothing after it")
	assert.Equal(t, 4, cp.attemptsOf(b.CertID))
	assert.Equal(t, []string{a.CertID, b.CertID}, cp.acceptedOrder(), "oldest first")
	assert.Equal(t, Stats{Pending: 0, Parked: 0, Delivered: 2, Failures: 6}, o.Stats())
	assert.Empty(t, pendingFiles(t, dir), "delivered items are deleted")
	cp.mu.Lock()
	for _, h := range cp.auth {
		assert.Equal(t, "Bearer s3cret", h)
	}
	cp.mu.Unlock()
}

func TestPayloadCarriesTheCertificateByteForByte(t *testing.T) {
	var hdr http.Header
	var path string
	var cp *controlPlane
	cp = newControlPlane(t, func(r *http.Request, _ int) int {
		cp.mu.Lock()
		defer cp.mu.Unlock()
		hdr, path = r.Header.Clone(), r.URL.EscapedPath()
		return http.StatusAccepted
	})
	o := open(t, testOptions(t, cp, t.TempDir()))

	signer, err := certs.NewSigner(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize)))
	require.NoError(t, err)
	c := testCert("research bot")
	c.TriggeredAt = time.Date(2026, 12, 2, 10, 15, 4, 123456789, time.FixedZone("CET", 3600)).Add(time.Hour)
	c.TerminatedAt = c.TriggeredAt.Add(2013 * time.Millisecond)
	file, err := certs.Write(t.TempDir(), c, signer)
	require.NoError(t, err)
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	require.NoError(t, o.Enqueue(c, raw))
	run(t, o)
	require.Eventually(t, func() bool { return o.Stats().Delivered == 1 }, wait, time.Millisecond)

	cp.mu.Lock()
	body := cp.bodies[c.CertID]
	defer cp.mu.Unlock()
	assert.Equal(t, "/api/agents/research%20bot/kill_events", path)
	assert.Equal(t, "application/json", hdr.Get("Content-Type"))
	assert.Equal(t, c.CertID, hdr.Get("Idempotency-Key"))
	assert.Empty(t, hdr.Get("Authorization"), "no token file, no header")

	var p struct {
		TriggerType   string          `json:"trigger_type"`
		TriggerReason string          `json:"trigger_reason"`
		TriggeredAt   string          `json:"triggered_at"`
		TerminatedAt  *string         `json:"terminated_at"`
		Cert          json.RawMessage `json:"death_certificate"`
		ShutdownLog   []certs.Step    `json:"shutdown_log"`
	}
	require.NoError(t, json.Unmarshal(body, &p))
	assert.Equal(t, "auto", p.TriggerType)
	assert.Equal(t, c.TriggerReason, p.TriggerReason, "no HTML escaping needed to survive")
	assert.Equal(t, "2026-12-02T10:15:04.123456789Z", p.TriggeredAt)
	require.NotNil(t, p.TerminatedAt)
	assert.Equal(t, "2026-12-02T10:15:06.136456789Z", *p.TerminatedAt)
	assert.Equal(t, c.ShutdownLog[1].Step, p.ShutdownLog[1].Step)
	assert.True(t, bytes.Contains(body, bytes.TrimSpace(raw)), "the certificate's bytes as written")
	require.NoError(t, certs.Verify(p.Cert, signer.Public()), "the signature survives the trip")
}

func TestShadowCertificateHasNullTerminatedAt(t *testing.T) {
	c := testCert("bot")
	c.Mode, c.TerminatedAt, c.ShutdownLog = certs.ModeShadow, time.Time{}, nil
	body, err := buildPayload(c, nil)
	require.NoError(t, err)
	var p map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &p))
	assert.Equal(t, "null", string(p["terminated_at"]))
	assert.Equal(t, "[]", string(p["shutdown_log"]))
	raw, _ := certs.Marshal(c)
	assert.JSONEq(t, string(raw), string(p["death_certificate"]))
}

func TestHangingControlPlaneTimesOutThenRecovers(t *testing.T) {
	var hung atomic.Int32
	cp := newControlPlane(t, func(r *http.Request, attempt int) int {
		if attempt <= 2 {
			hung.Add(1)
			<-r.Context().Done() // until the client gives up
			return 0
		}
		return http.StatusCreated
	})
	opts := testOptions(t, cp, t.TempDir())
	opts.Timeout = 50 * time.Millisecond
	o := open(t, opts)
	c := testCert("bot")
	require.NoError(t, o.Enqueue(c, nil))
	run(t, o)

	require.Eventually(t, func() bool { return o.Stats().Delivered == 1 }, wait, time.Millisecond)
	assert.EqualValues(t, 2, hung.Load())
	assert.Equal(t, 3, cp.attemptsOf(c.CertID))
	assert.Equal(t, 1, cp.acceptedOf(c.CertID))
	assert.EqualValues(t, 2, o.Stats().Failures)
}

func TestPendingItemsSurviveARestart(t *testing.T) {
	cp := newControlPlane(t, func(*http.Request, int) int { return http.StatusBadGateway })
	dir := t.TempDir()
	o1, err := Open(testOptions(t, cp, dir))
	require.NoError(t, err)
	var ids []string
	for range 3 {
		c := testCert("bot")
		ids = append(ids, c.CertID)
		require.NoError(t, o1.Enqueue(c, nil))
	}
	stop := run(t, o1)
	// The control plane is down: the first item is being retried.
	require.Eventually(t, func() bool { return cp.attemptsOf(ids[0]) >= 2 }, wait, time.Millisecond)
	stop()
	require.NoError(t, o1.Close())
	assert.Len(t, pendingFiles(t, dir), 3)
	assert.Zero(t, cp.attemptsOf(ids[1]), "strict order: nothing behind a failing head is sent")

	// The control plane comes back; a new process opens the same outbox.
	cp.setRespond(nil)
	o2 := open(t, testOptions(t, cp, dir))
	assert.Equal(t, 3, o2.Stats().Pending)
	run(t, o2)
	require.Eventually(t, func() bool { return o2.Stats().Delivered == 3 }, wait, time.Millisecond)
	assert.Equal(t, ids, cp.acceptedOrder(), "oldest first after the restart too")
	for _, id := range ids {
		assert.Equal(t, 1, cp.acceptedOf(id))
	}
	assert.Empty(t, pendingFiles(t, dir))
}

func TestCloseStopsRun(t *testing.T) {
	cp := newControlPlane(t, func(r *http.Request, _ int) int { <-r.Context().Done(); return 0 })
	o, err := Open(testOptions(t, cp, t.TempDir()))
	require.NoError(t, err)
	require.NoError(t, o.Enqueue(testCert("bot"), nil))
	done := make(chan error, 1)
	go func() { done <- o.Run(t.Context()) }()
	<-cp.hit // a request is in flight
	require.NoError(t, o.Close())
	require.NoError(t, <-done)
	assert.ErrorIs(t, o.Run(t.Context()), ErrClosed)
	assert.ErrorIs(t, o.Enqueue(testCert("bot"), nil), ErrClosed)
	assert.Zero(t, o.Stats().Failures, "a cancelled attempt is not the control plane's failure")
}

func TestRefusedItemIsParkedAndNotRetried(t *testing.T) {
	bad, good := testCert("bot"), testCert("bot")
	cp := newControlPlane(t, func(r *http.Request, _ int) int {
		if r.Header.Get("Idempotency-Key") == bad.CertID {
			return http.StatusBadRequest
		}
		return http.StatusCreated
	})
	dir := t.TempDir()
	o := open(t, testOptions(t, cp, dir))
	require.NoError(t, o.Enqueue(bad, nil))
	require.NoError(t, o.Enqueue(good, nil))
	run(t, o)

	// The sender is sequential and oldest first: once the good one is
	// through, the bad one had its only attempt.
	require.Eventually(t, func() bool { return o.Stats().Delivered == 1 }, wait, time.Millisecond)
	assert.Equal(t, Stats{Pending: 0, Parked: 1, Delivered: 1, Failures: 1}, o.Stats())
	assert.Equal(t, 1, cp.attemptsOf(bad.CertID))
	assert.FileExists(t, filepath.Join(dir, parkedDir, bad.CertID+".json"))
	reason, err := os.ReadFile(filepath.Join(dir, parkedDir, bad.CertID+".reason"))
	require.NoError(t, err)
	assert.Contains(t, string(reason), "HTTP 400")
	assert.Contains(t, string(reason), `{"status":400}`)

	// Nor after a restart.
	require.NoError(t, o.Close())
	o2 := open(t, testOptions(t, cp, dir))
	assert.Equal(t, Stats{Parked: 1}, o2.Stats())
	third := testCert("bot")
	require.NoError(t, o2.Enqueue(third, nil))
	run(t, o2)
	require.Eventually(t, func() bool { return o2.Stats().Delivered == 1 }, wait, time.Millisecond)
	assert.Equal(t, 1, cp.attemptsOf(bad.CertID))
}

func TestTooManyRequestsIsRetried(t *testing.T) {
	cp := newControlPlane(t, func(_ *http.Request, attempt int) int {
		if attempt <= 2 {
			return http.StatusTooManyRequests
		}
		return http.StatusOK
	})
	o := open(t, testOptions(t, cp, t.TempDir()))
	c := testCert("bot")
	require.NoError(t, o.Enqueue(c, nil))
	run(t, o)
	require.Eventually(t, func() bool { return o.Stats().Delivered == 1 }, wait, time.Millisecond)
	assert.Equal(t, 3, cp.attemptsOf(c.CertID))
	assert.Equal(t, Stats{Delivered: 1, Failures: 2}, o.Stats())
}

func TestStatusClasses(t *testing.T) {
	for status, want := range map[int]bool{
		408: true, 429: true, 500: true, 502: true, 503: true, 504: true, 401: true, 403: true,
		400: false, 404: false, 409: false, 410: false, 413: false, 422: false,
	} {
		assert.Equal(t, want, retryable(status), "%d", status)
	}
}

func TestTokenIsReadAtEachAttempt(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "cp.token")
	writeToken(t, tok, "old-token\n")
	cp := newControlPlane(t, func(r *http.Request, attempt int) int {
		if attempt == 1 {
			// The operator rotates the token while the first attempt fails.
			writeToken(t, tok, "new-token")
			return http.StatusUnauthorized
		}
		return http.StatusCreated
	})
	opts := testOptions(t, cp, t.TempDir())
	opts.TokenFile = tok
	o := open(t, opts)
	require.NoError(t, o.Enqueue(testCert("bot"), nil))
	run(t, o)
	require.Eventually(t, func() bool { return o.Stats().Delivered == 1 }, wait, time.Millisecond)
	cp.mu.Lock()
	defer cp.mu.Unlock()
	assert.Equal(t, []string{"Bearer old-token", "Bearer new-token"}, cp.auth)
}

func TestMissingTokenFileIsRetried(t *testing.T) {
	cp := newControlPlane(t, nil)
	tok := filepath.Join(t.TempDir(), "cp.token")
	opts := testOptions(t, cp, t.TempDir())
	opts.TokenFile = tok
	o := open(t, opts)
	c := testCert("bot")
	require.NoError(t, o.Enqueue(c, nil))
	run(t, o)
	require.Eventually(t, func() bool { return o.Stats().Failures >= 2 }, wait, time.Millisecond)
	assert.Zero(t, cp.attemptsOf(c.CertID), "nothing sent without the token")
	writeToken(t, tok, "t")
	require.Eventually(t, func() bool { return o.Stats().Delivered == 1 }, wait, time.Millisecond)
}

func TestEnqueueBoundAndDuplicates(t *testing.T) {
	cp := newControlPlane(t, nil)
	var last atomic.Value
	opts := testOptions(t, cp, t.TempDir())
	opts.MaxItems = 2
	opts.OnStats = func(s Stats) { last.Store(s) }
	o := open(t, opts)
	a, b := testCert("bot"), testCert("bot")
	require.NoError(t, o.Enqueue(a, nil))
	require.NoError(t, o.Enqueue(b, nil))
	require.NoError(t, o.Enqueue(a, nil), "a pending certificate is replaced, not counted twice")
	err := o.Enqueue(testCert("bot"), nil)
	require.ErrorIs(t, err, ErrFull)
	assert.Equal(t, Stats{Pending: 2, Rejected: 1}, o.Stats())
	assert.Equal(t, Stats{Pending: 2, Rejected: 1}, last.Load())

	// A reopened outbox reports what it found at once.
	require.NoError(t, o.Close())
	last.Store(Stats{})
	open(t, opts)
	assert.Equal(t, Stats{Pending: 2}, last.Load())
}

func TestEnqueueRejectsBadInput(t *testing.T) {
	o := open(t, testOptions(t, newControlPlane(t, nil), t.TempDir()))
	for name, c := range map[string]*certs.Certificate{
		"nil": nil, "no id": {AgentID: "a"}, "no agent": {CertID: "x"},
		"slash": {CertID: "../x", AgentID: "a"}, "dot": {CertID: ".x", AgentID: "a"},
		"seen file": {CertID: "directives-seen", AgentID: "a"},
	} {
		assert.ErrorIs(t, o.Enqueue(c, nil), ErrBadCertificate, name)
	}
	assert.ErrorIs(t, o.Enqueue(testCert("a"), []byte("[1]")), ErrBadCertificate)
	assert.ErrorIs(t, o.Enqueue(testCert("a"), []byte(`{"a":`)), ErrBadCertificate)
	assert.Zero(t, o.Stats().Pending)
}

func TestOneOutboxPerDirectory(t *testing.T) {
	cp := newControlPlane(t, nil)
	dir := t.TempDir()
	o := open(t, testOptions(t, cp, dir))
	_, err := Open(testOptions(t, cp, dir))
	require.ErrorIs(t, err, ErrLocked)
	require.NoError(t, o.Close())
	open(t, testOptions(t, cp, dir))
}

func TestForeignFilesAreParkedAtOpen(t *testing.T) {
	cp := newControlPlane(t, nil)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "junk.json"), []byte("not json"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, seenFile), []byte(`{"seen":[]}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".junk.json.0123456789abcdef.tmp"), nil, 0o600))
	o := open(t, testOptions(t, cp, dir))
	assert.Equal(t, Stats{Parked: 1}, o.Stats())
	assert.FileExists(t, filepath.Join(dir, parkedDir, "junk.json"))
	assert.FileExists(t, filepath.Join(dir, seenFile), "the poller's file is not an item")
	assert.NoFileExists(t, filepath.Join(dir, ".junk.json.0123456789abcdef.tmp"))
}

func TestBackoffIsBoundedFullJitter(t *testing.T) {
	o := &Outbox{opts: Options{MinBackoff: time.Second, MaxBackoff: 5 * time.Minute}}
	for n, ceil := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 4: 8 * time.Second, 9: 256 * time.Second, 10: 5 * time.Minute, 200: 5 * time.Minute} {
		for range 200 {
			d := o.backoff(n)
			require.True(t, d > 0 && d <= ceil, "n=%d: %s > %s", n, d, ceil)
		}
	}
	assert.Equal(t, 5*time.Second, retryAfter("5"))
	assert.Zero(t, retryAfter("soon"))
	assert.True(t, strings.HasPrefix(cut(strings.Repeat("x", 2000), 10), "xxxxxxxxxx"))
}
