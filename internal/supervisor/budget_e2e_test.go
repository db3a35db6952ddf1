// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// parallelAgent fires 32 chat completions at once, each of about 1,000
// input tokens (4,000 characters) and at most 500 output tokens, reports
// how each ended, and waits: an agent with no hermeskill code that
// ignores the cooperative signal.
const parallelAgent = `
import json, os, signal, sys, threading, urllib.error, urllib.request
signal.signal(signal.SIGINT, signal.SIG_IGN)
lock = threading.Lock()
def say(line):
    with lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
base = os.environ["OPENAI_BASE_URL"].rstrip("/")
prompt = "word " * 800
def call():
    req = urllib.request.Request(base + "/chat/completions", method="POST",
        data=json.dumps({"model": "gpt-test", "max_tokens": 500, "messages": [{"role": "user", "content": prompt}]}).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    try:
        urllib.request.urlopen(req, timeout=20).read()
        say("answered")
    except urllib.error.HTTPError as e:
        say("refused %d %s" % (e.code, e.headers.get("x-should-retry")))
ts = [threading.Thread(target=call) for _ in range(32)]
for t in ts: t.start()
for t in ts: t.join()
threading.Event().wait()
`

// A budget is a cap under concurrency: 32 requests at once, each really
// costing $0.02 ($10/M input, $20/M output), against --max-cost 0.10.
// Those whose worst case fits are forwarded (4: each reserves a little
// over $0.02), the others refused before the upstream; the run is killed
// by cost once the forwarded ones have been answered, and the metered total
// never exceeds the budget. Run after run.
func TestRunBudgetCapsParallelRequests(t *testing.T) {
	var reached atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			MaxTokens int64 `json:"max_tokens"`
			Messages  []struct{ Content string }
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		_, _ = io.Copy(io.Discard, r.Body)
		reached.Add(1)
		select {
		case <-time.After(300 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		in := int64(len(req.Messages[0].Content) / 4)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,`+
			`"message":{"role":"assistant","content":"ok"},"finish_reason":"length"}],`+
			`"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, in, req.MaxTokens, in+req.MaxTokens)
	}))
	defer up.Close()
	prices, err := gateway.ParsePrices([]byte("models:\n  gpt-test: {input: 10.00, output: 20.00}\n"), "prices.yaml")
	require.NoError(t, err)
	gw, err := gateway.New(gateway.Config{Listen: "127.0.0.1:0", Prices: prices,
		Upstreams: []gateway.Upstream{{Name: "openai", URL: up.URL + "/v1", Style: gateway.OpenAI}}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx) }()
	defer func() { cancel(); <-served }()

	python := testPython(t)
	script := filepath.Join(t.TempDir(), "agent.py")
	require.NoError(t, os.WriteFile(script, []byte(parallelAgent), 0o644))
	for run := range 3 {
		reached.Store(0)
		a := agentWith(config.Checks{Cost: &config.CostLimit{Kill: 0.10}, MaxRuntime: time.Minute})
		a.ID = fmt.Sprintf("parallel-%d", run)
		a.Command = []string{python, script}
		a.Escalation.CoopGrace, a.Escalation.TermGrace = 300*time.Millisecond, 300*time.Millisecond
		var stdout safeBuffer
		out := startRealWith(t, a, func(o *Options) { o.Gateway, o.StdoutSink = gw, &stdout }).Wait()
		require.NotNil(t, out.Trigger, "run %d", run)
		require.Equal(t, symptoms.Cost, out.Trigger.Check, "run %d: %s", run, out.Trigger.Message)
		require.Contains(t, out.Trigger.Message, "does not fit in the run's budget")
		c, _, err := certs.Read(out.CertPath)
		require.NoError(t, err)
		require.NotNil(t, c.Metered)
		require.EqualValues(t, 4, reached.Load(), "run %d: requests forwarded", run)
		require.EqualValues(t, 4, c.Metered.Requests, "run %d", run)
		require.EqualValues(t, 28, c.Metered.Refused, "run %d", run)
		require.LessOrEqual(t, c.Metered.CostUSD, 0.10, "run %d: metered over the budget", run)
		require.InDelta(t, 0.08, c.Metered.CostUSD, 1e-9, "run %d: the four answered, in full", run)
		require.Zero(t, c.Metered.UsageUnknown, "run %d: the forwarded requests were answered before the kill", run)
		got := stdout.String()
		require.Equal(t, 4, countLines(got, "answered"), "run %d: %s", run, got)
		require.Equal(t, 28, countLines(got, "refused 429 false"), "run %d: %s", run, got)
	}
}

// safeBuffer is an io.Writer the agent's output is copied to, read by the
// test.
type safeBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// countLines counts the lines of out that are line.
func countLines(out, line string) int {
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if l == line {
			n++
		}
	}
	return n
}
