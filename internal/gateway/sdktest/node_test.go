// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package sdktest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
)

// The TypeScript SDKs npm serves, end to end: test/agents/node/agent.mjs,
// an agent with one tool on the openai package, @openai/agents or the
// Vercel AI SDK (ai + @ai-sdk/openai), run by the real `hermeskilld
// supervise` with the gateway in front of the fake provider. Their
// versions are pinned by test/agents/node/package-lock.json; .ci/run
// installs them with `npm ci --prefix test/agents/node`.

// nodeAgentsDir is the agents' npm project, from this package.
const nodeAgentsDir = "../../../test/agents/node"

// nodeSDKs are agent.mjs's --sdk values, and the provider API each one's
// requests take.
var nodeSDKs = []struct{ sdk, path string }{
	{"openai", "/v1/chat/completions"},    // the openai package, chat completions with tools
	{"agents", "/v1/responses"},           // @openai/agents, run(): the Responses API by default
	{"ai", "/v1/responses"},               // generateText with openai(model): the Responses API
	{"ai-stream", "/v1/chat/completions"}, // streamText with openai.chat(model), streamed
}

// nodeAgent is the command of agent.mjs with args, reporting to
// dir/agent.jsonl, or skips the test (fails it under
// HK_REQUIRE_NPM_AGENTS=1, as CI sets) when node or the agents'
// node_modules are missing.
func nodeAgent(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	missing := func(what string) {
		if os.Getenv("HK_REQUIRE_NPM_AGENTS") == "1" {
			t.Fatalf("%s (HK_REQUIRE_NPM_AGENTS=1: the npm agents' tests must run)", what)
		}
		t.Skipf("%s: run `npm ci --prefix test/agents/node` (from the repository's root) to run these tests", what)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("no node in PATH")
	}
	nodeVersion.once.Do(func() {
		out, err := exec.Command(node, "--version").Output()
		nodeVersion.v, nodeVersion.err = strings.TrimSpace(string(out)), err
	})
	require.NoError(t, nodeVersion.err, "node --version")
	var major int
	if _, err := fmt.Sscanf(nodeVersion.v, "v%d.", &major); err != nil || major < 20 {
		missing("node " + nodeVersion.v + " is older than 20, which the pinned SDKs need")
	}
	abs, err := filepath.Abs(nodeAgentsDir)
	require.NoError(t, err)
	for _, pkg := range []string{"openai", "@openai/agents", "ai", "@ai-sdk/openai", "zod"} {
		if _, err := os.Stat(filepath.Join(abs, "node_modules", pkg, "package.json")); err != nil {
			missing("test/agents/node/node_modules has no " + pkg)
		}
	}
	return append([]string{node, filepath.Join(abs, "agent.mjs"), "--report", filepath.Join(dir, "agent.jsonl")}, args...)
}

var nodeVersion struct {
	once sync.Once
	v    string
	err  error
}

// nodeReport is what agent.mjs wrote: its environment, its tasks, its
// error if it had one, and every request it tried to send past loopback.
type nodeReport struct {
	env    map[string]string
	tasks  []nodeLine
	failed *nodeLine
	egress []string
}

type nodeLine struct {
	Env    []string `json:"env"`
	N      int      `json:"n"`
	OK     bool     `json:"ok"`
	Tools  int      `json:"tools"`
	Status int      `json:"status"`
	Err    string   `json:"err"`
	Egress string   `json:"egress"`
}

func (r e2e) nodeReport(t *testing.T) nodeReport {
	t.Helper()
	rep := nodeReport{}
	rep.env = readAgentLines(t, r, func(l nodeLine) []string {
		switch {
		case l.Env != nil:
			return l.Env
		case l.Egress != "":
			rep.egress = append(rep.egress, l.Egress)
		case l.OK:
			rep.tasks = append(rep.tasks, l)
		default:
			rep.failed = &l
		}
		return nil
	})
	return rep
}

// checkNodeKeys is (d) for a Node agent: its environment has the
// gateway's URL and a handle, never the key; the provider saw the real
// key alone, on the API the SDK speaks; nothing went past loopback.
func checkNodeKeys(t *testing.T, rep nodeReport, p *provider, path string) {
	t.Helper()
	handle := rep.env["OPENAI_API_KEY"]
	assert.True(t, strings.HasPrefix(handle, "hk-"), "OPENAI_API_KEY is a handle of the gateway's, not %q", handle)
	assert.Regexp(t, `^http://127\.0\.0\.1:\d+/openai$`, rep.env["OPENAI_BASE_URL"])
	for k, v := range rep.env {
		assert.NotContains(t, v, openaiKey, "the agent's %s", k)
		assert.NotContains(t, v, anthropicKey, "the agent's %s", k)
		assert.NotContains(t, v, "api.openai.com", "the agent's %s", k)
		assert.NotContains(t, v, "api.anthropic.com", "the agent's %s", k)
	}
	assert.NotContains(t, rep.env, "OPENAI_PROJECT", "an inherited project id is not passed")
	assert.NotContains(t, rep.env, "ANTHROPIC_API_URL", "nor an endpoint the gateway does not set")
	assert.Equal(t, "1", rep.env["OPENAI_AGENTS_DISABLE_TRACING"], "the setting passes")
	assert.Empty(t, rep.egress, "nothing but loopback")
	seen := p.requests()
	require.NotEmpty(t, seen)
	for i, s := range seen {
		assert.Equal(t, path, s.Path, "request %d", i)
		assert.True(t, s.KeyOK, "request %d carried the real key, alone", i)
		assert.NotContains(t, s.Headers, handle, "request %d: the agent's handle never leaves the gateway", i)
	}
}

// checkNodeKill checks a kill by check of a Node agent: the certificate's
// trigger, the handle revoked first, nothing of the agent's reaching the
// provider after the revocation but requests in flight then, which were
// cut, and the agent's end: the cooperative SIGINT, or the refusal of its
// next request as its SDK's error (status 403).
func checkNodeKill(t *testing.T, r e2e, rep nodeReport, p *provider, check string) *certs.Certificate {
	t.Helper()
	c, raw := r.cert(t)
	assert.Equal(t, "auto", c.TriggerType)
	assert.Equal(t, check, c.TriggerCheck)
	require.Contains(t, raw, "metered")
	require.NotEmpty(t, c.ShutdownLog)
	first := c.ShutdownLog[0]
	require.Equal(t, "capabilities_revoked", first.Step, "the ladder's first step")
	require.False(t, c.Metered.RevokedAt.IsZero())
	cut, _ := first.Detail["llm_requests_cut"].(float64)
	after := 0
	for _, s := range p.requests() {
		if s.At.After(c.Metered.RevokedAt) {
			after++
		}
	}
	assert.LessOrEqual(t, after, int(cut), "the provider got %d requests after the revocation; only the %v in flight may have", after, cut)
	// Node, with no SIGINT handler of the agent's, dies at once of the
	// cooperative SIGINT (130); when the agent's next request came first,
	// it was refused and the SDK raised the 403 as its error.
	if rep.failed == nil {
		assert.Equal(t, 130, r.code, "dead of the cooperative SIGINT")
	} else {
		assert.Equal(t, 403, rep.failed.Status, "the SDK's error: %s", rep.failed.Err)
		assert.Contains(t, rep.failed.Err, "revoked")
		assert.Positive(t, c.Metered.Refused)
		assert.Contains(t, []int{1, 130}, r.code, "the agent's own status after its error, or the SIGINT's")
	}
	return c
}

// meteredCost sums the cost of the audit log's llm_request lines.
func (r e2e) meteredCost(t *testing.T) (requests int, cost float64) {
	t.Helper()
	for _, l := range r.auditLines(t, "llm_request") {
		var v struct {
			Data struct {
				Status  int     `json:"status"`
				CostUSD float64 `json:"cost_usd"`
				Priced  bool    `json:"priced"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &v))
		assert.Equal(t, 200, v.Data.Status, l)
		assert.True(t, v.Data.Priced, l)
		requests++
		cost += v.Data.CostUSD
	}
	return requests, cost
}

const nodePrices = "models:\n  gpt-4.1-mini: {input: 0.40, output: 1.60, cached_input: 0.10}\n"

// Every SDK, three ways: (a) a healthy agent does its tasks (a tool call,
// then an answer, each) under a budget and a tool-loop limit and exits 0,
// its spend metered in the audit log; (b) a model that keeps asking for
// the same call with the same arguments kills it by tool_loop; (c) a
// budget kills it by cost. And always (d): the key never reaches the
// agent, nothing reaches the provider after the kill decision, nothing
// leaves loopback.
func TestNodeAgents(t *testing.T) {
	t.Parallel()
	for _, sdk := range nodeSDKs {
		t.Run(sdk.sdk, func(t *testing.T) {
			t.Parallel()
			t.Run("healthy", func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				agent := nodeAgent(t, dir, "--sdk", sdk.sdk, "--tasks", "2")
				p, url := newProvider(t, replyToolThenText, "gpt-4.1-mini-2025-04-14", usage{in: 1_000, cached: 200, out: 100})
				r := supervise(t, dir, nodeArgs(t, dir, "node-"+sdk.sdk, url, "--max-cost", "1", "--tool-loop", "3",
					"--heartbeat-timeout", "20s"), agent...)
				require.Equal(t, 0, r.code, "the agent did its tasks")
				files, _ := filepath.Glob(filepath.Join(dir, "certs", "*.json"))
				assert.Empty(t, files, "no kill, no certificate")
				rep := r.nodeReport(t)
				require.Len(t, rep.tasks, 2)
				for _, task := range rep.tasks {
					assert.Equal(t, 1, task.Tools, "task %d ran the tool once", task.N)
				}
				assert.Nil(t, rep.failed)
				checkNodeKeys(t, rep, p, sdk.path)
				// Two requests a task: the tool call, the answer. Each: 800
				// fresh input tokens at $0.40, 200 cached at $0.10 and 100
				// output at $1.60 per million.
				n, cost := r.meteredCost(t)
				assert.Equal(t, 4, n)
				assert.Len(t, p.requests(), 4)
				assert.InDelta(t, 4*(800*0.40+200*0.10+100*1.60)/1e6, cost, 1e-12)
			})
			t.Run("tool_loop", func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				agent := nodeAgent(t, dir, "--sdk", sdk.sdk)
				p, url := newProvider(t, replyTool, "gpt-4.1-mini-2025-04-14", usage{in: 1_000, out: 20})
				r := supervise(t, dir, nodeArgs(t, dir, "node-loop-"+sdk.sdk, url, "--max-cost", "1", "--tool-loop", "3"), agent...)
				rep := r.nodeReport(t)
				c := checkNodeKill(t, r, rep, p, "tool_loop")
				assert.Contains(t, c.TriggerReason, "web_search")
				assert.Equal(t, "web_search", c.FinalState.LastTool)
				assert.Empty(t, rep.tasks, "the task never ended")
				checkNodeKeys(t, rep, p, sdk.path)
			})
			t.Run("cost", func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				agent := nodeAgent(t, dir, "--sdk", sdk.sdk, "--tasks", "50")
				p, url := newProvider(t, replyToolThenText, "gpt-4.1-mini-2025-04-14", usage{in: 100_000, cached: 40_000, out: 50_000})
				r := supervise(t, dir, nodeArgs(t, dir, "node-spender-"+sdk.sdk, url, "--max-cost", "0.5", "--tool-loop", "3"), agent...)
				rep := r.nodeReport(t)
				c := checkNodeKill(t, r, rep, p, "cost")
				// Each answer: 60k fresh input tokens at $0.40, 40k cached at
				// $0.10 and 50k output at $1.60 per million, $0.108; the
				// fifth crosses $0.50.
				assert.Equal(t, "$0.54", terminal(t, c).Observed)
				u := modelUsage(t, c.Metered, "gpt-4.1-mini-2025-04-14")
				assert.GreaterOrEqual(t, u.Requests, int64(5))
				assert.Less(t, len(rep.tasks), 3, "killed in its third task")
				checkNodeKeys(t, rep, p, sdk.path)
			})
		})
	}
}

// The pitfall OPENAI_AGENTS_DISABLE_TRACING=1 avoids: without it,
// @openai/agents posts the run's traces to OpenAI's trace endpoint itself,
// past the gateway (the agent's loopback guard refuses and reports it).
func TestNodeAgentsSDKTracesPastTheGateway(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	agent := nodeAgent(t, dir, "--sdk", "agents")
	_, url := newProvider(t, replyToolThenText, "gpt-4.1-mini-2025-04-14", usage{in: 1_000, out: 100})
	r := superviseEnv(t, dir, []string{"OPENAI_AGENTS_DISABLE_TRACING="},
		nodeArgs(t, dir, "node-tracing", url, "--max-cost", "1"), agent...)
	assert.Equal(t, 0, r.code)
	rep := r.nodeReport(t)
	require.Len(t, rep.tasks, 1)
	assert.Contains(t, rep.egress, "https://api.openai.com/v1/traces/ingest", "the SDK's trace export, refused by the agent's guard")
}

// nodeArgs are supervise's flags for a Node agent behind the gateway with
// the fake provider at url.
func nodeArgs(t *testing.T, dir, id, url string, checks ...string) []string {
	prices := writeFile(t, dir, "prices.yaml", nodePrices)
	key := writeFile(t, dir, "openai.key", openaiKey+"\n")
	return append([]string{"--id", id, "--llm-upstream", "openai=" + url + "/v1", "--llm-key-file", "openai=" + key,
		"--llm-prices", prices}, checks...)
}
