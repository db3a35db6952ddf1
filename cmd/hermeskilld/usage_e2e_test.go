// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/control"
)

// usageAgent is an agent with no hermeskill code: urllib and the
// variables an OpenAI SDK reads. It calls its model N times, then: exits
// 0 ("exit"), waits for ever ("wait"), or sends one more request that the
// upstream holds ("hold") and waits.
const usageAgent = `
import json, os, sys, threading, time, urllib.error, urllib.request
n, then = int(sys.argv[1]), sys.argv[2]
base = os.environ["OPENAI_BASE_URL"].rstrip("/")

bounded = os.environ.get("TEST_BOUNDED") == "1"

def call(how=""):
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
    if bounded:  # an output bound, and a body whose bytes / 4 cover the 1000 input tokens billed
        body["max_tokens"] = 100
        body["messages"][0]["content"] = "hi " * 1340
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
               "X-Test-Upstream": how}
    req = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=60) as r:
        r.read()

for _ in range(n):
    try:
        call()
    except urllib.error.HTTPError as e:  # bounded: a refusal waits for what the supervisor decides
        if not bounded:
            raise
        print("refused", e.code, flush=True)
        break
print("called", n, flush=True)
if then == "hold":
    threading.Thread(target=call, args=("hold",), daemon=True).start()
if then != "exit":
    threading.Event().wait()
`

// usagePrices prices gpt-test so that each of usageUpstream's answers
// (1000 tokens in, 100 out) costs $0.12: 1100 tokens and $0.12 a request.
const usagePrices = "models:\n  gpt-test: {input: 20.00, output: 1000.00}\n"

// usageUpstream is a fake OpenAI upstream answering every request at
// once with 1000 input and 100 output tokens, but one whose
// X-Test-Upstream is "hold": that one waits for release (or its end).
func usageUpstream(t *testing.T) (url string, release func()) {
	t.Helper()
	held := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Header.Get("X-Test-Upstream") == "hold" {
			select {
			case <-held:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-test",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":1000,"completion_tokens":100,"total_tokens":1100}}`)
	}))
	var once bool
	release = func() {
		if !once {
			once = true
			close(held)
		}
	}
	t.Cleanup(func() { release(); srv.Close() })
	return srv.URL + "/v1", release
}

// auditRecords are the audit log's lines of type typ, their data decoded.
func auditRecords(t *testing.T, path, typ string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
		if line.Type == typ {
			out = append(out, line.Data)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// wantMetered is the metered object of five answered requests, as JSON
// decodes it.
var wantMetered = map[string]any{"requests": 5.0, "in_flight": 0.0, "refused": 0.0, "errors": 0.0,
	"tokens": 5500.0, "cost_usd": 0.6, "cost_known": true}

// A gateway-metered agent with no client, which reports nothing itself:
// what the wire saw is what supervise's end line, the audit log's end of
// the run and `certs show` tell — for a run that exits by itself and for
// one the tokens check kills on those same figures.
func TestSuperviseGatewayUsage(t *testing.T) {
	t.Parallel()
	upstream, _ := usageUpstream(t)
	dir := t.TempDir()
	script := writeTestFile(t, dir, "agent.py", usageAgent)
	prices := writeTestFile(t, dir, "prices.yaml", usagePrices)
	supervise := func(t *testing.T, id string, flags ...string) (result, string, string) {
		certsDir, auditLog := filepath.Join(t.TempDir(), "certs"), filepath.Join(t.TempDir(), "audit.jsonl")
		args := append([]string{"supervise", "--id", id, "--certs-dir", certsDir, "--audit-log", auditLog,
			"--llm-upstream", "openai=" + upstream, "--llm-prices", prices, "--coop-grace", "300ms", "--term-grace", "300ms"}, flags...)
		return hkRun(t, nil, args...), certsDir, auditLog
	}

	t.Run("exits", func(t *testing.T) {
		t.Parallel()
		r, certsDir, auditLog := supervise(t, "usage-exit", "--", python(t), script, "5", "exit")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Regexp(t, `(?m)^hermeskilld: agent usage-exit exited 0 after \d+\.\ds: 5 LLM requests, 5500 tokens, \$0\.6000$`, r.stderr)
		files, _ := filepath.Glob(filepath.Join(certsDir, "*.json"))
		assert.Empty(t, files, "a run that ends by itself has no certificate")

		ended := auditRecords(t, auditLog, "agent_exited")
		require.Len(t, ended, 1)
		u, ok := ended[0]["usage"].(map[string]any)
		require.True(t, ok, "agent_exited carries the run's usage: %v", ended[0])
		assert.Equal(t, 5500.0, u["tokens"])
		assert.InDelta(t, 0.6, u["cost_usd"], 1e-9)
		assert.Equal(t, 0.0, u["reported_tokens"])
		assert.Equal(t, 0.0, u["reported_cost_usd"])
		m := u["metered"].(map[string]any)
		assert.InDelta(t, 0.6, m["cost_usd"], 1e-9)
		m["cost_usd"] = 0.6
		assert.Equal(t, wantMetered, m)
		assert.Greater(t, ended[0]["runtime_s"], 0.0)
	})

	t.Run("killed by the tokens check", func(t *testing.T) {
		t.Parallel()
		r, certsDir, auditLog := supervise(t, "usage-kill", "--max-tokens", "5000", "--", python(t), script, "5", "wait")
		require.NotEqual(t, 0, r.code, r.stderr)
		assert.Regexp(t, `(?m)^hermeskilld: agent usage-kill killed \(tokens: tokens 5500 over kill threshold 5000\)`, r.stderr,
			"the check counts the metered tokens")
		assert.Regexp(t, `(?m)^hermeskilld: agent usage-kill (exited \d+|ended by SIG[A-Z]+) after \d+\.\ds: 5 LLM requests, 5500 tokens, \$0\.6000`,
			r.stderr, "the end line follows the kill's")
		ended := auditRecords(t, auditLog, "agent_exited")
		require.Len(t, ended, 1)
		assert.Equal(t, 5500.0, ended[0]["usage"].(map[string]any)["tokens"])

		files, err := filepath.Glob(filepath.Join(certsDir, "*.json"))
		require.NoError(t, err)
		require.Len(t, files, 1)
		show := hkRun(t, nil, "certs", "show", files[0])
		require.Equal(t, 0, show.code, show.stderr)
		for _, want := range []string{
			`(?m)^metered\s+5 requests, 5500 tokens, \$0\.6000`,
			`(?m)^  tokens\s+5500 metered \(agent reported 0\)$`,
			`(?m)^  cost\s+\$0\.6000 metered \(agent reported \$0\.0000\)$`,
		} {
			assert.Regexp(t, want, show.stdout)
		}
		assert.NotRegexp(t, `(?m)^  tokens\s+0$`, show.stdout, "never the agent's 0 unlabelled")
	})

	t.Run("killed by the cost rate", func(t *testing.T) {
		t.Parallel()
		r, _, _ := supervise(t, "usage-rate", "--max-cost", "5", "--max-cost-rate", "0.30/1m", "--", python(t), script, "5", "wait")
		require.NotEqual(t, 0, r.code, r.stderr)
		assert.Regexp(t, `(?m)^hermeskilld: agent usage-rate killed \(cost_rate: spent \$0\.36 in the last 1m, over the \$0\.30 per minute limit\)`, r.stderr,
			"the third request of $0.12 is over $0.30 per minute, long before $5")
	})
}

// Under the daemon, an agent with no client whose five requests the
// gateway metered and whose sixth is in flight: ps, status and the
// control API show the metered tokens and cost, not 0, and the request
// in flight.
func TestDaemonGatewayUsage(t *testing.T) {
	t.Parallel()
	upstream, release := usageUpstream(t)
	root := shortTemp(t)
	prices := writeTestFile(t, root, "prices.yaml", usagePrices)
	script := writeTestFile(t, root, "agent.py", usageAgent)
	d := startDaemonIn(t, root, fmt.Sprintf("gateway:\n  upstreams: [openai=%s]\n  prices: %s\n", upstream, prices))
	d.writeAgent("wire-bot", fmt.Sprintf("id: wire-bot\ncommand: [%s, %s, '5', hold]\nescalation: {coop_grace: 200ms, term_grace: 1s}\n",
		python(t), script))

	var info control.AgentInfo
	require.Eventually(t, func() bool {
		info = d.agentsByID()["wire-bot"]
		return info.Metered != nil && info.Metered.Requests == 5 && info.Metered.InFlight == 1
	}, 30*time.Second, 50*time.Millisecond, "five requests metered, one in flight: %+v", info)
	assert.Equal(t, uint64(5500), info.Tokens)
	assert.InDelta(t, 0.6, info.CostUSD, 1e-9)
	assert.Zero(t, info.ReportedTokens)
	assert.Zero(t, info.ReportedCostUSD)
	assert.Equal(t, control.MeteredUsage{Requests: 5, InFlight: 1, Tokens: 5500, CostUSD: info.Metered.CostUSD, CostKnown: true}, *info.Metered)

	r := d.ctl("ps")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^wire-bot\s+running\s+\d+\s+\S+\s+\S+( ago)?\s+5\s+\$0\.60\s+0`, r.stdout)
	r = d.ctl("ps", "--format", "wide")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^wire-bot\s+running\s+\d+\s+\S+\s+\S+( ago)?\s+5\s+5500\s+\$0\.60\s`, r.stdout)

	r = d.ctl("status", "wire-bot", "--lines", "0")
	require.Equal(t, 0, r.code, r.stderr)
	for _, want := range []string{
		`(?m)^  tokens\s+5500 metered \(agent reported 0\)$`,
		`(?m)^  cost\s+\$0\.60 metered \(agent reported \$0\.00\)$`,
		`(?m)^  LLM requests\s+5 \(1 in flight\)$`,
	} {
		assert.Regexp(t, want, r.stdout)
	}

	r = d.ctl("status", "wire-bot", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &raw))
	assert.Equal(t, 5500.0, raw["tokens"])
	assert.Equal(t, 0.0, raw["reported_tokens"])
	m := raw["metered"].(map[string]any)
	assert.Equal(t, 1.0, m["in_flight"])
	assert.Equal(t, 5500.0, m["tokens"])
	assert.True(t, strings.HasPrefix(fmt.Sprint(raw["cost_usd"]), "0.6"), "cost_usd %v", raw["cost_usd"])

	// Once released, the held request is counted too.
	release()
	require.Eventually(t, func() bool {
		info = d.agentsByID()["wire-bot"]
		return info.Metered != nil && info.Metered.Requests == 6 && info.Metered.InFlight == 0
	}, 30*time.Second, 50*time.Millisecond, "the sixth request metered: %+v", info)
	assert.Equal(t, uint64(6600), info.Tokens)
}
