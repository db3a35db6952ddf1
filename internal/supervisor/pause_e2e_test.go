// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/cgroup"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/procfs"
	"github.com/hermeskill/hermeskilld/internal/runjournal"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// twoCallsAgent makes two chat completions in a row, each of 500 output
// tokens at most, prints how each ended and exits 0: an agent with no
// hermeskill code, which cannot tell a pause from a slow answer.
const twoCallsAgent = `
import json, os, sys, urllib.error, urllib.request
base = os.environ["OPENAI_BASE_URL"].rstrip("/")
for i in (1, 2):
    req = urllib.request.Request(base + "/chat/completions", method="POST",
        data=json.dumps({"model": "gpt-test", "max_tokens": 500, "messages": [{"role": "user", "content": "hi"}]}).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    try:
        urllib.request.urlopen(req, timeout=60).read()
        print("answered %d" % i, flush=True)
    except urllib.error.HTTPError as e:
        print("refused %d %d" % (i, e.code), flush=True)
        sys.exit(3)
`

// pauseGateway is a gateway in front of an upstream that bills each
// request its max_tokens of output at $20/M ($0.01 for 500), counting
// those that reached it.
func pauseGateway(t *testing.T, reached *atomic.Int64) *gateway.Gateway {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			MaxTokens int64 `json:"max_tokens"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		reached.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,`+
			`"message":{"role":"assistant","content":"ok"},"finish_reason":"length"}],`+
			`"usage":{"prompt_tokens":10,"completion_tokens":%d,"total_tokens":%d}}`, req.MaxTokens, 10+req.MaxTokens)
	}))
	t.Cleanup(up.Close)
	prices, err := gateway.ParsePrices([]byte("models:\n  gpt-test: {input: 10.00, output: 20.00}\n"), "prices.yaml")
	require.NoError(t, err)
	gw, err := gateway.New(gateway.Config{Listen: "127.0.0.1:0", Prices: prices,
		Upstreams: []gateway.Upstream{{Name: "openai", URL: up.URL + "/v1", Style: gateway.OpenAI}}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-served })
	return gw
}

// pauseContainments runs fn with process-group containment and, where
// cgroup v2 is writable, with a cgroup.
func pauseContainments(t *testing.T, fn func(t *testing.T, cgs *cgroup.Manager)) {
	t.Run("pgroup", func(t *testing.T) { fn(t, nil) })
	t.Run("cgroup", func(t *testing.T) {
		m, err := cgroup.Detect(cgroup.Options{})
		if errors.Is(err, cgroup.ErrUnavailable) {
			t.Skipf("no writable cgroup v2 hierarchy: %v", err)
		}
		require.NoError(t, err)
		fn(t, m)
	})
}

// startPausing starts twoCallsAgent with a $0.015 budget that pauses for
// at most timeout, and waits for the pause: the second request's worst
// case does not fit beside the first's spend.
func startPausing(t *testing.T, cgs *cgroup.Manager, timeout time.Duration, reached *atomic.Int64) (*Run, *safeBuffer) {
	t.Helper()
	script := filepath.Join(t.TempDir(), "agent.py")
	require.NoError(t, os.WriteFile(script, []byte(twoCallsAgent), 0o644))
	a := agentWith(config.Checks{Cost: &config.CostLimit{Kill: 0.015}, MaxRuntime: time.Minute})
	a.ID = "pausing"
	a.Command = []string{testPython(t), script}
	a.OnBudget, a.PauseTimeout = config.OnBudgetPause, timeout
	a.Escalation.CoopGrace, a.Escalation.TermGrace = 300*time.Millisecond, 300*time.Millisecond
	stdout := &safeBuffer{}
	gw := pauseGateway(t, reached)
	journal := t.TempDir()
	r := startRealWith(t, a, func(o *Options) { o.Gateway, o.StdoutSink, o.Cgroups, o.JournalDir = gw, stdout, cgs, journal })
	require.Eventually(t, func() bool { return r.Status().State == StatePaused }, 10*time.Second, 5*time.Millisecond,
		"paused at the budget; output: %s", stdout.String())
	return r, stdout
}

// The budget pauses a real agent at the request that does not fit: the
// request is held (it reached no upstream, it was not refused), the tree
// is frozen (cgroup.freeze, or every process stopped, state T), and a
// pause record is written. A resume too small for the held request is
// refused, the run still paused; one that raises the budget enough thaws
// the tree, the held request goes on, and the agent, which never knew,
// exits 0 with both answers.
func TestRunPauseHoldsFreezesAndResumes(t *testing.T) {
	pauseContainments(t, func(t *testing.T, cgs *cgroup.Manager) {
		var reached atomic.Int64
		r, stdout := startPausing(t, cgs, time.Minute, &reached)

		require.Equal(t, 1, r.grant.Metered().Held, "the second request is held")
		require.EqualValues(t, 1, reached.Load(), "the held request did not reach the upstream")
		st := r.Status()
		require.NotNil(t, st.Pause)
		if cgs != nil {
			require.Equal(t, "cgroup", st.Pause.Frozen)
			b, err := os.ReadFile(filepath.Join(r.cg.Path(), "cgroup.events"))
			require.NoError(t, err)
			require.Contains(t, strings.Split(string(b), "\n"), "frozen 1")
		} else {
			require.Equal(t, "sigstop", st.Pause.Frozen)
			s, err := procfs.Default().Stat(r.PID())
			require.NoError(t, err)
			require.Equal(t, byte('T'), s.State, "the agent is stopped")
		}
		paths, err := filepath.Glob(filepath.Join(r.o.CertsDir, "*.json"))
		require.NoError(t, err)
		require.Len(t, paths, 1, "the pause record")
		rec, _, err := certs.Read(paths[0])
		require.NoError(t, err)
		require.Equal(t, certs.ModePaused, rec.Mode)
		require.Equal(t, "cost", rec.TriggerCheck)
		require.Contains(t, rec.TriggerReason, "does not fit in the run's budget")
		require.Len(t, rec.Pauses, 1)
		require.Equal(t, 1, rec.Pauses[0].HeldRequests)
		require.True(t, rec.TerminatedAt.IsZero())
		require.NotNil(t, rec.Metered)
		require.InDelta(t, 0.0101, rec.Metered.CostUSD, 1e-9, "the first request's spend")

		// Should hermeskilld die now, the certificate the next start
		// writes from the run journal says the run was paused.
		entries, err := filepath.Glob(filepath.Join(r.o.JournalDir, "*.run"))
		require.NoError(t, err)
		require.Len(t, entries, 1)
		b, err := os.ReadFile(entries[0])
		require.NoError(t, err)
		var e runjournal.Entry
		require.NoError(t, json.Unmarshal(b, &e))
		require.Len(t, e.Certificate.Pauses, 1, "the journal's certificate carries the pause")
		require.Equal(t, st.Pause.Frozen, e.Certificate.Pauses[0].Frozen)

		ctx := context.Background()
		var re *gateway.ResumeError
		require.ErrorAs(t, r.Resume(ctx, ResumeRequest{CostUSD: 0.016}), &re, "$0.016 does not admit the held request")
		require.Equal(t, StatePaused, r.Status().State)
		require.ErrorIs(t, r.Resume(ctx, ResumeRequest{CostUSD: 0.01}), ErrResumeBudget)

		require.NoError(t, r.Resume(ctx, ResumeRequest{CostUSD: 0.05, Operator: "test"}))
		out := r.Wait()
		require.False(t, out.Killed, "%+v", out.Trigger)
		require.Equal(t, 0, out.Exit.Code, "output: %s", stdout.String())
		require.Equal(t, "answered 1\nanswered 2\n", stdout.String())
		require.EqualValues(t, 2, reached.Load())
		require.EqualValues(t, 0, r.grant.Metered().Refused, "nothing was refused")
	})
}

// A pause not resumed within pause_timeout runs the ladder, the tree
// thawed first (so that the agent can act on its signals): the
// certificate is the money check's, and says since when and how long the
// run was paused.
func TestRunPauseTimeoutKills(t *testing.T) {
	pauseContainments(t, func(t *testing.T, cgs *cgroup.Manager) {
		var reached atomic.Int64
		r, stdout := startPausing(t, cgs, 500*time.Millisecond, &reached)
		out := r.Wait()
		require.True(t, out.Killed)
		require.Equal(t, symptoms.Cost, out.Trigger.Check)
		c := readCert(t, out)
		require.Equal(t, certs.ModeEnforce, c.Mode)
		require.Equal(t, "cost", c.TriggerCheck)
		require.Contains(t, c.TriggerReason, "without a resume (pause_timeout 500ms)")
		require.Len(t, c.Pauses, 1)
		p := c.Pauses[0]
		require.Equal(t, certs.PauseTimeout, p.Ended)
		require.GreaterOrEqual(t, p.DurationMS, 500.0)
		require.False(t, p.PausedAt.After(c.TriggeredAt))
		require.Equal(t, p.EndedAt, c.TriggeredAt, "the kill decision is the pause's end")
		require.EqualValues(t, 1, reached.Load(), "the held request never reached the upstream")
		// The ladder's first step refuses the held request (403): the
		// agent may exit of it before the cooperative signal.
		require.True(t, strings.HasPrefix(stdout.String(), "answered 1\n"), stdout.String())
		require.NotContains(t, stdout.String(), "answered 2")
		revoked := false
		for _, s := range c.ShutdownLog {
			revoked = revoked || s.Step == "capabilities_revoked"
		}
		require.True(t, revoked, "the held request was refused by the revocation: %+v", c.ShutdownLog)
	})
}
