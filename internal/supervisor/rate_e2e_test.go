// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// loopAgent calls its model again and again, as a stuck agent loop does,
// with no hermeskill code, and ignores the cooperative signal.
const loopAgent = `
import json, os, signal, urllib.request
signal.signal(signal.SIGINT, signal.SIG_IGN)
base = os.environ["OPENAI_BASE_URL"].rstrip("/")
while True:
    req = urllib.request.Request(base + "/chat/completions", method="POST",
        data=json.dumps({"model": "gpt-test", "max_tokens": 100, "messages": [{"role": "user", "content": "again"}]}).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    try:
        urllib.request.urlopen(req, timeout=20).read()
    except Exception:
        pass
`

// A loop that spends $0.02 a call is killed by cost_rate ($0.10 per
// minute) at its sixth call, seconds into its run, while its total budget
// ($5.00) is far away: the certificate names cost_rate and says what was
// spent in the window.
func TestRunCostRateKillsALoop(t *testing.T) {
	var reached atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		reached.Add(1)
		w.Header().Set("Content-Type", "application/json")
		// 1000 tokens in and 500 out at $10/M and $20/M: $0.02.
		fmt.Fprint(w, `{"id":"c","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,`+
			`"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":1000,"completion_tokens":500,"total_tokens":1500}}`)
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

	script := filepath.Join(t.TempDir(), "agent.py")
	require.NoError(t, os.WriteFile(script, []byte(loopAgent), 0o644))
	a := agentWith(config.Checks{MaxRuntime: time.Minute,
		Cost:     &config.CostLimit{Kill: 5.00},
		CostRate: &config.CostRate{Warn: 0.05, Kill: 0.10, Per: time.Minute}})
	a.ID = "rate-loop"
	a.Command = []string{testPython(t), script}
	a.Escalation.CoopGrace, a.Escalation.TermGrace = 200*time.Millisecond, 300*time.Millisecond
	began := time.Now()
	out := startRealWith(t, a, func(o *Options) { o.Gateway = gw }).Wait()
	took := time.Since(began)

	require.NotNil(t, out.Trigger)
	require.Equal(t, symptoms.CostRate, out.Trigger.Check, out.Trigger.Message)
	require.Equal(t, "spent $0.12 in the last 1m, over the $0.10 per minute limit", out.Trigger.Message)
	require.Less(t, took, 30*time.Second, "within the window, not at max_runtime")
	c, _, err := certs.Read(out.CertPath)
	require.NoError(t, err)
	require.Equal(t, "cost_rate", c.TriggerCheck)
	require.Equal(t, out.Trigger.Message, c.TriggerReason)
	var warned bool
	for _, s := range c.SymptomsLog {
		warned = warned || (s.Check == "cost_rate" && s.Severity == "warning")
	}
	require.True(t, warned, "the warning came first: %+v", c.SymptomsLog)
	require.NotNil(t, c.Metered)
	// One request may reach the upstream between the decision and the
	// revocation of the run's handle; the total budget is far away.
	require.GreaterOrEqual(t, c.Metered.CostUSD, 0.12-1e-9)
	require.Less(t, c.Metered.CostUSD, 1.00, "killed by the rate, long before the total")
	require.LessOrEqual(t, reached.Load(), int64(10), "requests forwarded")
}
