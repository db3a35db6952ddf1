// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package sdktest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
)

// modelUsage is the metered block's entry for model.
func modelUsage(t *testing.T, m *certs.Metered, model string) certs.ModelUsage {
	t.Helper()
	for _, u := range m.Models {
		if u.Model == model {
			return u
		}
	}
	require.Failf(t, "model not metered", "no %q in %+v", model, m.Models)
	return certs.ModelUsage{}
}

// answered counts the agent's requests that got an answer.
func (rep agentReport) answered() int {
	n := 0
	for _, l := range rep.requests {
		if l.OK {
			n++
		}
	}
	return n
}

// terminal is the certificate's terminal symptom.
func terminal(t *testing.T, c *certs.Certificate) certs.Symptom {
	t.Helper()
	for _, s := range c.SymptomsLog {
		if s.Severity == "terminal" {
			return s
		}
	}
	require.Fail(t, "no terminal symptom", "%+v", c.SymptomsLog)
	return certs.Symptom{}
}

// An agent on openai-go calling chat completions in a loop is killed by
// --max-cost on the spend the gateway read from the responses, priced by
// the price file (a dated model name takes its undated price; cached
// input tokens their own). The provider saw only the real key, the agent
// only a handle; after the revocation nothing of the agent's reached the
// provider, and its next requests got 403 in OpenAI's format.
func TestOpenAIAgentKilledByMeteredCost(t *testing.T) {
	t.Parallel()
	p, url := newProvider(t, replyText, "gpt-4.1-mini-2025-04-14", usage{in: 100_000, cached: 40_000, out: 50_000})
	dir := t.TempDir()
	prices := writeFile(t, dir, "prices.yaml", "models:\n  gpt-4.1-mini: {input: 0.40, output: 1.60, cached_input: 0.10}\n")
	key := writeFile(t, dir, "openai.key", openaiKey+"\n")
	r := supervise(t, dir, []string{"--id", "openai-spender", "--llm-upstream", "openai=" + url + "/v1",
		"--llm-key-file", "openai=" + key, "--llm-prices", prices, "--max-cost", "0.5"},
		goAgent(t, dir, "-provider", "openai", "-model", "gpt-4.1-mini")...)
	assert.Equal(t, 1, r.code, "the agent's own status: it gave up once refused")

	c, raw := r.cert(t)
	rep := r.agent(t)
	assert.Equal(t, "auto", c.TriggerType)
	assert.Equal(t, "cost", c.TriggerCheck)
	// Each answer: 60k fresh input tokens at $0.40, 40k cached at $0.10 and
	// 50k output at $1.60 per million, $0.108; the fifth crosses $0.50.
	assert.Equal(t, "$0.54", terminal(t, c).Observed)
	assert.Contains(t, c.TriggerReason, "$0.54")
	k := rep.answered()
	require.GreaterOrEqual(t, k, 5)
	u := modelUsage(t, c.Metered, "gpt-4.1-mini-2025-04-14")
	assert.Equal(t, int64(k), u.Requests)
	assert.Equal(t, int64(k)*100_000, u.InputTokens)
	assert.Equal(t, int64(k)*40_000, u.CachedInputTokens)
	assert.Equal(t, int64(k)*50_000, u.OutputTokens)
	assert.True(t, u.Priced)
	assert.InDelta(t, float64(k)*0.108, u.CostUSD, 1e-9)
	assert.True(t, c.Metered.CostKnown)
	assert.Zero(t, c.FinalState.CostUSD, "final_state keeps what the agent reported: nothing")

	checkKeys(t, rep, p, "OPENAI_API_KEY", "OPENAI_BASE_URL", "openai")
	checkEnvLog(t, r, "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
	assert.NotContains(t, rep.env, "ANTHROPIC_API_KEY", "no anthropic upstream: the operator's key is not passed either")
	checkRevocation(t, c, raw, rep, p)
	checkAudit(t, r, c, rep.env["OPENAI_API_KEY"])
}

// The same with anthropic-sdk-go, every answer streamed: usage is read
// from message_start and message_delta as they pass. One more stream is
// held open by the provider while the agent spends: the revocation cuts
// it, and the agent's SDK gets Anthropic's error event.
func TestAnthropicStreamingAgentKilledByMeteredCost(t *testing.T) {
	t.Parallel()
	p, url := newProvider(t, replyText, "claude-sonnet-4-20250514", usage{in: 30_000, cached: 10_000, out: 2_000})
	dir := t.TempDir()
	prices := writeFile(t, dir, "prices.yaml", `models:
  "claude-sonnet-4*": {input: 3.00, output: 15.00, cached_input: 0.30}
`)
	key := writeFile(t, dir, "anthropic.key", anthropicKey)
	r := supervise(t, dir, []string{"--id", "anthropic-streamer", "--llm-upstream", "anthropic=" + url,
		"--llm-key-file", "anthropic=" + key, "--llm-prices", prices, "--max-cost", "0.27"},
		goAgent(t, dir, "-provider", "anthropic", "-model", "claude-sonnet-4-0", "-stream", "-hold")...)
	assert.Equal(t, 1, r.code)

	c, raw := r.cert(t)
	rep := r.agent(t)
	assert.Equal(t, "cost", c.TriggerCheck)
	// Each answer: 20k fresh input tokens at $3, 10k cached at $0.30 and
	// 2k output at $15 per million, $0.093 ($0.063 of it input, which
	// message_start reports); the third crosses $0.27. (It starts beside
	// the held stream's reservation, $0.0155: its input fits in what
	// $0.27 leaves it, so it is not cut at the budget, and its output,
	// reported at its end, makes it cross.)
	assert.Equal(t, "$0.28", terminal(t, c).Observed)
	k := rep.answered()
	require.GreaterOrEqual(t, k, 3)

	require.NotNil(t, rep.held, "the held stream ended")
	assert.Contains(t, rep.held.HeldErr, "permission_error", "the SDK raised the gateway's error event")
	assert.Contains(t, rep.held.HeldErr, "revoked")
	cut, _ := c.ShutdownLog[0].Detail["llm_requests_cut"].(float64)
	assert.GreaterOrEqual(t, cut, 1.0, "the held stream was in flight")
	held := 0
	for _, s := range p.requests() {
		assert.True(t, s.Stream)
		if s.Held {
			held++
			assert.True(t, s.Cut, "the provider saw the held stream end")
		}
	}
	assert.Equal(t, 1, held)

	// A stream cut in flight never saw its usage: it is charged the
	// larger of what it read (message_start's input tokens) and its
	// reservation (max_tokens 1024 of output), its usage marked unknown.
	u := modelUsage(t, c.Metered, "claude-sonnet-4-20250514")
	streams := u.Requests - int64(k) // the held one, and any other cut after its message_start
	require.GreaterOrEqual(t, streams, int64(1))
	assert.Equal(t, (int64(k)+streams)*30_000, u.InputTokens)
	assert.Equal(t, (int64(k)+streams)*10_000, u.CachedInputTokens)
	assert.Equal(t, int64(k)*2_000+streams*1024, u.OutputTokens)
	assert.InDelta(t, float64(k)*0.093+float64(streams)*(20_000*3+10_000*0.30+1024*15)/1e6, u.CostUSD, 1e-9)

	checkKeys(t, rep, p, "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "anthropic")
	checkEnvLog(t, r, "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID")
	assert.NotContains(t, rep.env, "OPENAI_API_KEY")
	checkRevocation(t, c, raw, rep, p)
	checkAudit(t, r, c, rep.env["ANTHROPIC_API_KEY"])
}

// A model that answers every request with the same tool call, and an agent
// that keeps running it and asking again: --tool-loop kills it on the tool
// calls read from the responses, with no hermeskill client in the agent.
// OpenAI streamed (the gateway asks for the usage chunk the agent did not
// ask for) and Anthropic not; default_price prices both models.
func TestToolLoopReadOnTheWire(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, model, answerModel string
		stream                   bool
	}{
		{"openai", "gpt-4.1-mini", "gpt-4.1-mini-2025-04-14", true},
		{"anthropic", "claude-haiku-4-5", "claude-haiku-4-5-20251001", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, url := newProvider(t, replyTool, tc.answerModel, usage{in: 1_000, out: 20})
			dir := t.TempDir()
			prices := writeFile(t, dir, "prices.yaml", "default_price: {input: 1.00, output: 2.00}\n")
			key := writeFile(t, dir, "key", map[string]string{"openai": openaiKey, "anthropic": anthropicKey}[tc.name])
			upstream := tc.name + "=" + url
			if tc.name == "openai" {
				upstream += "/v1"
			}
			agent := goAgent(t, dir, "-provider", tc.name, "-model", tc.model)
			if tc.stream {
				agent = append(agent, "-stream")
			}
			r := supervise(t, dir, []string{"--id", "looper-" + tc.name, "--llm-upstream", upstream,
				"--llm-key-file", tc.name + "=" + key, "--llm-prices", prices, "--tool-loop", "3"}, agent...)
			assert.Equal(t, 1, r.code)

			c, raw := r.cert(t)
			rep := r.agent(t)
			assert.Equal(t, "tool_loop", c.TriggerCheck)
			assert.Contains(t, c.TriggerReason, "web_search")
			assert.Equal(t, "3 repeats", terminal(t, c).Observed)
			assert.Equal(t, "web_search", c.FinalState.LastTool)
			k := rep.answered()
			require.GreaterOrEqual(t, k, 3)
			for _, l := range rep.requests {
				if l.OK {
					assert.Equal(t, 1, l.Tools, "request %d: the agent got the tool call", l.N)
				}
			}
			for i, s := range p.requests() {
				assert.Equal(t, tc.stream, s.Stream)
				assert.Equal(t, tc.stream, s.IncludeUsage, "request %d: the gateway asks a chat stream for its usage", i)
			}
			u := modelUsage(t, c.Metered, tc.answerModel)
			assert.True(t, u.Priced, "default_price prices it")
			assert.Equal(t, int64(k)*1_020, u.InputTokens+u.OutputTokens)
			assert.InDelta(t, float64(k)*(1_000*1.00+20*2.00)/1e6, u.CostUSD, 1e-12)
			assert.True(t, c.Metered.CostKnown)
			checkRevocation(t, c, raw, rep, p)
		})
	}
}

// A model the price file does not price: its tokens are still counted
// (and kill by --max-tokens), its cost is unknown, never $0 in silence: a
// warning symptom names it, and the certificate says the cost is not
// known.
func TestUnpricedModelIsAWarningAndItsTokensCount(t *testing.T) {
	t.Parallel()
	p, url := newProvider(t, replyText, "mystery-model-1", usage{in: 100_000, out: 50_000})
	dir := t.TempDir()
	prices := writeFile(t, dir, "prices.yaml", "models:\n  gpt-4.1-mini: {input: 0.40, output: 1.60}\n")
	key := writeFile(t, dir, "openai.key", openaiKey)
	r := supervise(t, dir, []string{"--id", "unpriced", "--llm-upstream", "openai=" + url + "/v1",
		"--llm-key-file", "openai=" + key, "--llm-prices", prices, "--max-tokens", "400000", "--max-cost", "0.01"},
		goAgent(t, dir, "-provider", "openai", "-model", "mystery-model-1")...)
	assert.Equal(t, 1, r.code)

	c, raw := r.cert(t)
	rep := r.agent(t)
	assert.Equal(t, "tokens", c.TriggerCheck, "tokens still count; the cost check never fires on unknown spend")
	assert.Equal(t, "450000", terminal(t, c).Observed)
	var warned bool
	for _, s := range c.SymptomsLog {
		if s.Severity == "warning" && s.Check == "cost" {
			warned = true
			assert.Equal(t, "unknown", s.Observed)
			assert.Contains(t, s.Message, "mystery-model-1")
		}
		assert.False(t, s.Severity == "terminal" && s.Check == "cost", "no cost kill: %+v", s)
	}
	assert.True(t, warned, "a warning symptom: %+v", c.SymptomsLog)
	k := rep.answered()
	m := c.Metered
	assert.False(t, m.CostKnown)
	assert.Zero(t, m.CostUSD)
	assert.Equal(t, int64(k)*150_000, m.Tokens)
	u := modelUsage(t, m, "mystery-model-1")
	assert.False(t, u.Priced)
	assert.GreaterOrEqual(t, u.Requests, int64(k), "the answered ones, and any cut in flight (the request's model)")
	assert.True(t, strings.HasPrefix(rep.env["OPENAI_API_KEY"], "hk-"))
	checkRevocation(t, c, raw, rep, p)
}

// Shadow mode refuses nothing: the budget is crossed, a shadow certificate
// says so with what was metered, and the agent goes on to the end of its
// work with every request answered.
func TestShadowModeRefusesNothing(t *testing.T) {
	t.Parallel()
	p, url := newProvider(t, replyText, "gpt-4.1-mini-2025-04-14", usage{in: 100_000, cached: 40_000, out: 50_000})
	dir := t.TempDir()
	prices := writeFile(t, dir, "prices.yaml", "models:\n  gpt-4.1-mini: {input: 0.40, output: 1.60, cached_input: 0.10}\n")
	key := writeFile(t, dir, "openai.key", openaiKey)
	r := supervise(t, dir, []string{"--id", "shadowed", "--shadow", "--llm-upstream", "openai=" + url + "/v1",
		"--llm-key-file", "openai=" + key, "--llm-prices", prices, "--max-cost", "0.5"},
		goAgent(t, dir, "-provider", "openai", "-model", "gpt-4.1-mini", "-turns", "8")...)
	assert.Equal(t, 0, r.code, "the agent did its 8 turns and exited 0")

	c, raw := r.cert(t)
	rep := r.agent(t)
	assert.Equal(t, "shadow", c.Mode)
	assert.Equal(t, "cost", c.TriggerCheck)
	assert.Equal(t, "$0.54", terminal(t, c).Observed, "the fifth answer crossed the budget")
	assert.Empty(t, c.ShutdownLog, "nothing was revoked or signalled")
	require.Contains(t, raw, "metered")
	assert.True(t, c.Metered.RevokedAt.IsZero())
	assert.Zero(t, c.Metered.Refused)
	assert.Equal(t, 8, rep.answered())
	assert.Len(t, rep.requests, 8, "no request failed")
	assert.Len(t, p.requests(), 8)
}
