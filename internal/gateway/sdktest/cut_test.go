// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package sdktest

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A model that runs on past the budget (it streams 2,000 deltas, 20,000
// output tokens, whatever the request's bound) is cut by the gateway with
// the protocol's own ending of an answer at its output bound: openai-go
// and anthropic-sdk-go read it as a complete short answer, no error, and
// say why it ended (finish_reason "length", status "incomplete" for
// max_output_tokens, stop_reason "max_tokens"). The provider saw the
// client go away long before its answer's end; the certificate's metered
// block has the cut and its overshoot, under one event's output; the run
// is killed by cost, its next request refused.
func TestSDKsReadAStreamCutAtTheBudget(t *testing.T) {
	for _, tc := range []struct {
		name, upstream, model, prices, maxCost, finish string
		args                                           []string
		outPrice                                       float64 // USD per output token
	}{
		{"openai-chat", "openai", "gpt-4.1-mini", "gpt-4.1-mini: {input: 0.40, output: 1.60}", "0.002", "length",
			[]string{"-provider", "openai", "-model", "gpt-4.1-mini", "-stream"}, 1.60 / 1e6},
		{"openai-responses", "openai", "gpt-4.1-mini", "gpt-4.1-mini: {input: 0.40, output: 1.60}", "0.002", "incomplete:max_output_tokens",
			[]string{"-provider", "openai", "-model", "gpt-4.1-mini", "-stream", "-responses"}, 1.60 / 1e6},
		// max_tokens 1024 (the agent's) is reserved, $0.015, and fits in
		// $0.02: the model runs past its bound, the budget cuts it.
		{"anthropic", "anthropic", "claude-sonnet-4-20250514", `"claude-sonnet-4*": {input: 3.00, output: 15.00}`, "0.02", "max_tokens",
			[]string{"-provider", "anthropic", "-model", "claude-sonnet-4-0", "-stream"}, 15.0 / 1e6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, url := newProvider(t, replyText, tc.model, usage{in: 100, out: 10})
			p.long = 2000
			dir := t.TempDir()
			prices := writeFile(t, dir, "prices.yaml", "models:\n  "+tc.prices+"\n")
			key := writeFile(t, dir, tc.upstream+".key", map[string]string{"openai": openaiKey, "anthropic": anthropicKey}[tc.upstream]+"\n")
			upURL := url
			if tc.upstream == "openai" {
				upURL += "/v1"
			}
			r := supervise(t, dir, []string{"--id", "cut-" + tc.name, "--llm-upstream", tc.upstream + "=" + upURL,
				"--llm-key-file", tc.upstream + "=" + key, "--llm-prices", prices, "--max-cost", tc.maxCost},
				goAgent(t, dir, tc.args...)...)

			rep := r.agent(t)
			require.NotEmpty(t, rep.requests)
			first := rep.requests[0]
			require.True(t, first.OK, "the cut stream is an answer, not an error: %+v", first)
			assert.Equal(t, tc.finish, first.Finish, "why the SDK says it ended")
			assert.Positive(t, first.Text, "the text before the cut")
			assert.Less(t, first.Text, 2000*len(longDelta), "cut short")
			for _, l := range rep.requests[1:] {
				assert.False(t, l.OK, "request %d: after the cut the budget is spent", l.N)
			}

			c, _ := r.cert(t)
			assert.Equal(t, "cost", c.TriggerCheck)
			m := c.Metered
			require.NotNil(t, m)
			assert.EqualValues(t, 1, m.StreamsCut)
			eventUSD := 10 * tc.outPrice
			assert.Positive(t, m.OvershootUSD)
			assert.LessOrEqual(t, m.OvershootUSD, eventUSD+1e-12, "one event's output at most")
			assert.LessOrEqual(t, m.CostUSD, mustFloat(t, tc.maxCost)+eventUSD+1e-12)
			assert.Positive(t, m.OvershootTokens)
			assert.LessOrEqual(t, m.OvershootTokens, int64(10))

			cutLines := 0
			for _, l := range r.auditLines(t, "llm_request") {
				var v struct {
					Data struct {
						CutAtBudget  string  `json:"cut_at_budget"`
						OvershootUSD float64 `json:"overshoot_usd"`
					} `json:"data"`
				}
				require.NoError(t, json.Unmarshal([]byte(l), &v), l)
				if v.Data.CutAtBudget != "" {
					cutLines++
					assert.Equal(t, "cost", v.Data.CutAtBudget)
					assert.Equal(t, m.OvershootUSD, v.Data.OvershootUSD)
				}
			}
			assert.Equal(t, 1, cutLines, "the audit line of the cut stream says so")

			p.mu.Lock()
			served, gone := p.served, p.gone
			p.mu.Unlock()
			assert.Equal(t, 1, gone, "the provider saw the cut stream's client go away")
			assert.Less(t, served, 1000, "long before the answer's end")
			t.Logf("%s: budget $%s, metered $%.6f, overshoot %d tokens $%.8f (one event $%.8f); the provider served %d deltas",
				tc.name, tc.maxCost, m.CostUSD, m.OvershootTokens, m.OvershootUSD, eventUSD, served)
		})
	}
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err)
	return f
}
