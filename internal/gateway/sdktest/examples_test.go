// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package sdktest

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/gateway"
)

// The example price file parses, and prices as its comments say: a dated
// snapshot by its undated name, a family by its prefix, anything else by
// default_price.
func TestExamplePriceFile(t *testing.T) {
	p, err := gateway.LoadPrices("../../../examples/config/prices.yaml")
	require.NoError(t, err)
	for model, want := range map[string]gateway.Price{
		"gpt-4.1-mini-2025-04-14":  {Input: 0.40, Output: 1.60, CachedInput: 0.10},
		"claude-sonnet-4-20250514": {Input: 3.00, Output: 15.00, CachedInput: 0.30},
		"claude-sonnet-4-5":        {Input: 3.00, Output: 15.00, CachedInput: 0.30},
		"text-embedding-3-small":   {Input: 0.02, Output: 0, CachedInput: 0.02},
		"some-new-model":           {Input: 15.00, Output: 75.00, CachedInput: 15.00},
	} {
		got, ok := p.Lookup(model)
		assert.True(t, ok, model)
		assert.Equal(t, want, got, model)
	}
}

// The example agent examples/agents/llm_agent.py (urllib and OpenAI's
// chat-completions format, nothing else) under supervise: --loop is
// killed by --tool-loop, --spend by --max-cost, both on what the gateway
// read on the wire, and the provider saw only the real key.
func TestPythonExampleAgent(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	script, err := filepath.Abs("../../../examples/agents/llm_agent.py")
	require.NoError(t, err)
	require.FileExists(t, script)
	for _, tc := range []struct {
		name        string
		reply       reply
		args, flags []string
		check       string
	}{
		{"loop-streamed", replyTool, []string{"--loop", "--stream"}, []string{"--tool-loop", "3"}, "tool_loop"},
		{"spend", replyText, []string{"--spend"}, []string{"--max-cost", "0.5"}, "cost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, url := newProvider(t, tc.reply, "gpt-4.1-mini-2025-04-14", usage{in: 100_000, cached: 40_000, out: 50_000})
			dir := t.TempDir()
			prices := writeFile(t, dir, "prices.yaml", "models:\n  gpt-4.1-mini: {input: 0.40, output: 1.60, cached_input: 0.10}\n")
			key := writeFile(t, dir, "openai.key", openaiKey)
			args := append([]string{"--id", "llm-agent-" + tc.name, "--llm-upstream", "openai=" + url + "/v1",
				"--llm-key-file", "openai=" + key, "--llm-prices", prices}, tc.flags...)
			r := supervise(t, dir, args, append([]string{python, script}, tc.args...)...)
			assert.NotZero(t, r.code, "an automatic kill is never a success")

			c, raw := r.cert(t)
			assert.Equal(t, tc.check, c.TriggerCheck)
			require.Contains(t, raw, "metered")
			assert.Equal(t, "capabilities_revoked", c.ShutdownLog[0].Step)
			u := modelUsage(t, c.Metered, "gpt-4.1-mini-2025-04-14")
			assert.GreaterOrEqual(t, u.Requests, int64(3))
			assert.Equal(t, u.Requests*100_000, u.InputTokens)
			assert.InDelta(t, float64(u.Requests)*0.108, u.CostUSD, 1e-9)
			if tc.check == "tool_loop" {
				assert.Equal(t, "web_search", c.FinalState.LastTool)
			}
			for i, s := range p.requests() {
				assert.True(t, s.KeyOK, "request %d carried the real key, alone", i)
				assert.False(t, s.At.After(c.Metered.RevokedAt) && !s.Cut, "request %d reached the provider after the revocation", i)
			}
		})
	}
}
