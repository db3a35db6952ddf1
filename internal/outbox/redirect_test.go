// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

// thief is a server a redirect points at: it must never be asked anything.
type thief struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string // "METHOD path auth"
}

func newThief(t *testing.T) *thief {
	th := &thief{}
	th.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		th.mu.Lock()
		th.seen = append(th.seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		th.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(th.srv.Close)
	return th
}

func (th *thief) requests() []string {
	th.mu.Lock()
	defer th.mu.Unlock()
	return append([]string(nil), th.seen...)
}

// A control plane that answers with a redirect — to another port, with
// each redirect status — gets neither the token nor the certificate
// forwarded: the item stays queued, is retried, and is delivered to the
// configured origin once it stops redirecting.
func TestRedirectsAreNeverFollowed(t *testing.T) {
	for _, status := range []int{301, 302, 303, 307, 308} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			th := newThief(t)
			var redirecting atomic.Bool
			redirecting.Store(true)
			var attempts atomic.Int32
			var gotAuth atomic.Value
			cp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				attempts.Add(1)
				if redirecting.Load() {
					http.Redirect(w, r, th.srv.URL+r.URL.Path, status)
					return
				}
				gotAuth.Store(r.Header.Get("Authorization"))
				w.WriteHeader(http.StatusCreated)
			}))
			t.Cleanup(cp.Close)
			tok := filepath.Join(t.TempDir(), "cp.token")
			writeToken(t, tok, "s3cret")
			o := open(t, Options{URL: cp.URL + "/api/", Dir: t.TempDir(), TokenFile: tok, Timeout: 2 * time.Second,
				MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond, Log: zaptest.NewLogger(t)})
			c := testCert("bot")
			require.NoError(t, o.Enqueue(c, nil))
			run(t, o)
			require.Eventually(t, func() bool { return attempts.Load() >= 3 }, wait, time.Millisecond)
			assert.Zero(t, o.Stats().Delivered, "a redirect is not a delivery")
			assert.Equal(t, 1, o.Stats().Pending, "still queued, never parked")
			redirecting.Store(false)
			require.Eventually(t, func() bool { return o.Stats().Delivered == 1 }, wait, time.Millisecond)
			assert.Equal(t, "Bearer s3cret", gotAuth.Load())
			assert.Empty(t, th.requests(), "the redirect target was never contacted")
		})
	}
}

// The directive poller sends the same token: a redirect is an error, and
// the target is never asked.
func TestPollerDoesNotFollowRedirects(t *testing.T) {
	th := newThief(t)
	cp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, th.srv.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(cp.Close)
	tok := filepath.Join(t.TempDir(), "tok")
	writeToken(t, tok, "pull-token")
	p, err := newPoller(pollerOptions{URL: cp.URL + "/api/", Dir: t.TempDir(), TokenFile: tok,
		Agents: func() []string { return []string{"a"} }, Handle: func(string, Directive) {},
		Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	_, err = p.fetch(context.Background(), "a")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "redirects are never followed")
	assert.Empty(t, th.requests())
}
