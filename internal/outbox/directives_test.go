// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

type handled struct {
	agent string
	d     Directive
}

// recorder collects handed-over directives.
type recorder struct {
	mu  sync.Mutex
	got []handled
	ch  chan handled
}

func (r *recorder) handle(agent string, d Directive) {
	r.mu.Lock()
	r.got = append(r.got, handled{agent, d})
	r.mu.Unlock()
	select {
	case r.ch <- handled{agent, d}:
	default:
	}
}

func (r *recorder) all() []handled {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]handled(nil), r.got...)
}

func newTestPoller(t *testing.T, cp *controlPlane, dir, token string, rec *recorder) *poller {
	t.Helper()
	p, err := newPoller(pollerOptions{
		URL: cp.url(), Dir: dir, TokenFile: token, Interval: 5 * time.Millisecond,
		Agents: func() []string { return []string{"a", "b", "c"} },
		Handle: rec.handle, Log: zaptest.NewLogger(t),
	})
	require.NoError(t, err)
	return p
}

func TestDirectivesAreHandledOnceAcrossRestarts(t *testing.T) {
	cp := newControlPlane(t, nil)
	cp.directives["a"] = []Directive{
		{ID: "d1", Action: "kill", Reason: "runaway spend", Operator: "alice@cp"},
		{ID: "d2", Action: "reboot", Reason: "?"}, // unknown: handed over (to be refused), not counted
		{ID: "", Action: "kill"},                  // no id: ignored
	}
	cp.directives["b"] = []Directive{{ID: "d1", Action: "kill", Operator: "bob@cp"}} // ids are per agent
	// "c" is unknown to the control plane: 404, nothing to do.
	dir := t.TempDir()
	tok := filepath.Join(t.TempDir(), "tok")
	writeToken(t, tok, "pull-token\n")
	rec := &recorder{}
	p := newTestPoller(t, cp, dir, tok, rec)

	assert.Equal(t, 2, p.PollOnce(t.Context()))
	want := []handled{
		{"a", Directive{ID: "d1", Action: "kill", Reason: "runaway spend", Operator: "alice@cp"}},
		{"a", Directive{ID: "d2", Action: "reboot", Reason: "?"}},
		{"b", Directive{ID: "d1", Action: "kill", Operator: "bob@cp"}},
	}
	assert.Equal(t, want, rec.all())
	assert.Zero(t, p.PollOnce(t.Context()), "the control plane repeats them; we do not")
	assert.Equal(t, want, rec.all())

	// A restart: a new poller on the same directory remembers.
	p2 := newTestPoller(t, cp, dir, tok, rec)
	assert.Zero(t, p2.PollOnce(t.Context()))
	cp.mu.Lock()
	cp.directives["a"] = append(cp.directives["a"], Directive{ID: "d3", Action: "kill", Operator: "alice@cp"})
	cp.mu.Unlock()
	assert.Equal(t, 1, p2.PollOnce(t.Context()))
	assert.Len(t, rec.all(), 4)

	cp.mu.Lock()
	defer cp.mu.Unlock()
	assert.Equal(t, 4, cp.polls["a"])
	assert.Equal(t, 4, cp.polls["c"])
	for _, h := range cp.auth {
		assert.Equal(t, "Bearer pull-token", h)
	}
}

func TestPollerRunPollsUntilCancelled(t *testing.T) {
	cp := newControlPlane(t, nil)
	cp.directives["b"] = []Directive{{ID: "x", Action: "kill"}}
	rec := &recorder{ch: make(chan handled, 1)}
	p := newTestPoller(t, cp, t.TempDir(), "", rec)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	got := <-rec.ch
	assert.Equal(t, handled{"b", Directive{ID: "x", Action: "kill"}}, got)
	// Later polls see it again and skip it.
	require.Eventually(t, func() bool {
		cp.mu.Lock()
		defer cp.mu.Unlock()
		return cp.polls["b"] >= 3
	}, wait, time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	assert.Len(t, rec.all(), 1)
}

func TestSeenIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), seenFile)
	s, err := loadSeen(path, 3)
	require.NoError(t, err)
	now := time.Now()
	for _, id := range []string{"1", "2", "3", "4", "5"} {
		require.NoError(t, s.add("a", id, now))
	}
	s2, err := loadSeen(path, 3)
	require.NoError(t, err)
	for id, want := range map[string]bool{"1": false, "2": false, "3": true, "4": true, "5": true} {
		assert.Equal(t, want, s2.has("a", id), id)
	}
	assert.False(t, s2.has("b", "5"))

	require.NoError(t, os.WriteFile(path, []byte("{garbage"), 0o600))
	s3, err := loadSeen(path, 3)
	require.Error(t, err)
	assert.False(t, s3.has("a", "5"), "a bad file starts afresh")
}

func TestPollerSurvivesAnErroringControlPlane(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"500":     func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", 500) },
		"garbage": func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("{not json")) },
		"huge": func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte(`{"directives":[],"pad":"` + strings.Repeat("x", maxDirectivesBody) + `"}`))
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			defer srv.Close()
			rec := &recorder{}
			p, err := newPoller(pollerOptions{
				URL: srv.URL, Dir: t.TempDir(),
				Agents: func() []string { return []string{"a"} }, Handle: rec.handle, Log: zaptest.NewLogger(t),
			})
			require.NoError(t, err)
			assert.Zero(t, p.PollOnce(t.Context()))
			assert.Empty(t, rec.all())
		})
	}
}
