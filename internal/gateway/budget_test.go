// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/gateway"
)

// honestChat answers a chat completion after delay with the usage the
// gateway reserves for it at most: its body's bytes / 4 as input, its
// max_tokens as output. A budget that holds against it holds against any
// upstream whose counts are within the reservation.
func honestChat(delay time.Duration, reached *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		body, _ := io.ReadAll(r.Body)
		var req struct {
			MaxTokens int64 `json:"max_tokens"`
		}
		_ = json.Unmarshal(body, &req)
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		in := int64(len(body)+3) / 4
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","model":"gpt-4.1-mini","choices":[{"index":0,`+
			`"message":{"role":"assistant","content":"ok"},"finish_reason":"length"}],`+
			`"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, in, req.MaxTokens, in+req.MaxTokens)
	}
}

// chatBody is a request for gpt-4.1-mini ($0.40/M in, $1.60/M out) with
// about 1,000 input tokens and 1,000 output tokens at most: a worst case
// of about $0.002.
func chatBody(t testing.TB) string {
	return jsonBody(t, map[string]any{"model": "gpt-4.1-mini", "max_tokens": 1000,
		"messages": []map[string]any{{"role": "user", "content": strings.Repeat("word ", 800)}}})
}

// worstCase is what the gateway reserves for chatBody's body: its bytes
// / 4 as input tokens, its max_tokens as output, at gpt-4.1-mini's price.
func worstCase(body string) float64 {
	return (float64((len(body)+3)/4)*0.40 + 1000*1.60) / 1e6
}

// parallel sends n copies of body at once and returns their statuses,
// bodies and headers.
func parallel(t *testing.T, e *env, vars map[string]string, n int, body string) []*http.Response {
	resps := make([]*http.Response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resps[i] = e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], body)
		})
	}
	wg.Wait()
	return resps
}

// 32 requests at once against a budget that pays for 4 of them: 4 reach
// the upstream, the metered total stays within the budget, the others are
// refused before forwarding as OpenAI refuses a used-up quota (429
// insufficient_quota) with x-should-retry: false, so that the SDKs raise
// at once instead of retrying. Run after run: the race is the point.
func TestBudgetHoldsUnderConcurrency(t *testing.T) {
	var reached atomic.Int64
	e := newEnv(t, honestChat(100*time.Millisecond, &reached), nil)
	body := chatBody(t)
	worst := worstCase(body)
	budget := 4.5 * worst
	for run := range 10 {
		reached.Store(0)
		recs := newRecords()
		gr, vars := e.grant(t, recs)
		gr.SetBudget(gateway.Budget{CostUSD: budget})
		resps := parallel(t, e, vars, 32, body)
		var ok, refused int
		for _, resp := range resps {
			b := readAll(t, resp)
			switch resp.StatusCode {
			case http.StatusOK:
				ok++
			case http.StatusTooManyRequests:
				refused++
				assert.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
				var v struct {
					Error struct{ Type, Code, Message string }
				}
				require.NoError(t, json.Unmarshal([]byte(b), &v), b)
				assert.Equal(t, "insufficient_quota", v.Error.Type)
				assert.Equal(t, "insufficient_quota", v.Error.Code)
				assert.Contains(t, v.Error.Message, "does not fit in the run's budget")
			default:
				t.Fatalf("run %d: status %d: %s", run, resp.StatusCode, b)
			}
		}
		assert.Equal(t, 4, ok, "run %d", run)
		assert.Equal(t, 28, refused, "run %d", run)
		assert.EqualValues(t, 4, reached.Load(), "run %d: requests that reached the upstream", run)
		overBudget := 0
		for range 32 {
			if r := recs.next(t); r.OverBudget != "" {
				assert.Equal(t, "cost", r.OverBudget)
				assert.True(t, r.Refused)
				overBudget++
			}
		}
		assert.Equal(t, 28, overBudget)
		m := gr.Metered()
		assert.LessOrEqual(t, m.CostUSD, budget, "run %d: metered over the budget", run)
		assert.EqualValues(t, 4, m.Requests)
		gr.Close()
	}
}

// Requests that fail or are refused by the upstream (a retry storm against
// a 429 or a 500) hold nothing once they end: after a hundred of them, ten
// at a time, the budget (ten requests' worth) is whole, and ten requests
// that fit go through at once; the eleventh does not.
func TestBudgetReleasedByFailures(t *testing.T) {
	var fail atomic.Int64
	var reached atomic.Int64
	ok := honestChat(0, &reached)
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		switch fail.Load() {
		case 429:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(429)
			io.WriteString(w, `{"error":{"message":"slow down","type":"rate_limit_exceeded","code":"rate_limit_exceeded"}}`)
		case 500:
			http.Error(w, "boom", 500)
		default:
			ok(w, r)
		}
	}, nil)
	body := chatBody(t)
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	gr.SetBudget(gateway.Budget{CostUSD: 10.5 * worstCase(body)})
	statuses := func(n int) map[int]int {
		got := map[int]int{}
		for _, resp := range parallel(t, e, vars, n, body) {
			readAll(t, resp)
			got[resp.StatusCode]++
		}
		for range n {
			recs.next(t)
		}
		return got
	}
	for _, status := range []int{429, 500} {
		fail.Store(int64(status))
		for round := range 5 {
			require.Equal(t, map[int]int{status: 10}, statuses(10), "round %d: the upstream's failures, no refusal", round)
		}
	}
	fail.Store(0)
	require.Equal(t, map[int]int{200: 10}, statuses(10), "100 failed requests left the budget whole")
	require.Equal(t, map[int]int{429: 1}, statuses(1), "the ten answered are spent")
	assert.EqualValues(t, 100, gr.Metered().Errors, "every failure counted as an error")
}

// An agent that gives up on its requests (its SDK's timeout) is charged
// what the upstream may bill for them, their reservation, and holds
// nothing more: the budget is not leaked by requests that never end.
func TestBudgetAbandonedRequestsChargedOnce(t *testing.T) {
	var reached atomic.Int64
	e := newEnv(t, honestChat(10*time.Second, &reached), nil)
	body := chatBody(t)
	worst := worstCase(body)
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	gr.SetBudget(gateway.Budget{CostUSD: 3.5 * worst})
	client := &http.Client{Timeout: 200 * time.Millisecond}
	for range 2 {
		req, err := http.NewRequest(http.MethodPost, vars["OPENAI_BASE_URL"]+"/chat/completions", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+vars["OPENAI_API_KEY"])
		_, err = client.Do(req)
		require.Error(t, err, "the agent gave up")
	}
	for range 2 {
		r := recs.next(t)
		assert.True(t, r.UsageUnknown, "charged at its reservation")
	}
	m := gr.Metered()
	assert.InDelta(t, 2*worst, m.CostUSD, 1e-9)
	// 3.5 worst cases, 2 spent: one more fits, then none.
	statuses := []int{}
	for range 2 {
		req, err := http.NewRequest(http.MethodPost, vars["OPENAI_BASE_URL"]+"/chat/completions", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+vars["OPENAI_API_KEY"])
		resp, err := client.Do(req)
		if err == nil {
			readAll(t, resp)
			statuses = append(statuses, resp.StatusCode)
		} else {
			statuses = append(statuses, 0) // given up: it was admitted
		}
	}
	assert.Equal(t, []int{0, http.StatusTooManyRequests}, statuses)
}

// A token budget refuses in the Anthropic format too: 429
// rate_limit_error, which the Anthropic SDKs raise as RateLimitError,
// with x-should-retry: false.
func TestBudgetTokensAnthropicFormat(t *testing.T) {
	var reached atomic.Int64
	e := newEnv(t, nil, func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, anthropicMessage)
	})
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	gr.SetBudget(gateway.Budget{Tokens: 500})
	body := jsonBody(t, map[string]any{"model": "claude-sonnet-4-0", "max_tokens": 1000,
		"messages": []map[string]any{{"role": "user", "content": "hi"}}})
	resp := e.post(t, gateway.Anthropic, vars["ANTHROPIC_BASE_URL"]+"/v1/messages", vars["ANTHROPIC_API_KEY"], body)
	b := readAll(t, resp)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, b)
	assert.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
	var v struct {
		Type  string
		Error struct{ Type, Message string }
	}
	require.NoError(t, json.Unmarshal([]byte(b), &v), b)
	assert.Equal(t, "error", v.Type)
	assert.Equal(t, "rate_limit_error", v.Error.Type)
	assert.Contains(t, v.Error.Message, "tokens")
	r := recs.next(t)
	assert.Equal(t, "tokens", r.OverBudget)
	assert.Zero(t, reached.Load(), "never forwarded")

	gr.SetBudget(gateway.Budget{}) // lifted: no limit
	resp = e.post(t, gateway.Anthropic, vars["ANTHROPIC_BASE_URL"]+"/v1/messages", vars["ANTHROPIC_API_KEY"], body)
	readAll(t, resp)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// A request that names no output bound is reserved the default (4096
// output tokens here): beside requests in flight it must fit, but alone it
// goes while the budget is not spent, so that a sequential agent with no
// max_tokens is not stopped while it has budget left. Its overshoot is
// its own cost.
func TestBudgetUnboundedRequestAlone(t *testing.T) {
	var reached atomic.Int64
	e := newEnv(t, honestChat(300*time.Millisecond, &reached), nil) // the 8 at once overlap
	unbounded := jsonBody(t, map[string]any{"model": "gpt-4.1-mini",
		"messages": []map[string]any{{"role": "user", "content": "hi"}}})
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	// honestChat answers an unbounded request with 0 output tokens: each
	// costs its input only, a few millionths of a dollar; the default
	// reservation (4096 output tokens, $0.0066) is far over the budget.
	gr.SetBudget(gateway.Budget{CostUSD: 0.001})
	for i := range 5 {
		resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], unbounded)
		readAll(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, "request %d alone", i)
		recs.next(t)
	}
	got := map[int]int{}
	for _, resp := range parallel(t, e, vars, 8, unbounded) {
		readAll(t, resp)
		got[resp.StatusCode]++
	}
	require.Equal(t, 1, got[http.StatusOK], "beside one in flight the default must fit: %v", got)
	require.Equal(t, 7, got[http.StatusTooManyRequests], "%v", got)
}
