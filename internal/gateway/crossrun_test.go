// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"context"
	"encoding/json"
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

// grantOf makes a grant for run id and returns it with its environment.
func (e *env) grantOf(t testing.TB, id string, obs gateway.Observer) (*gateway.Grant, map[string]string) {
	gr := e.gw.Grant(id, obs)
	t.Cleanup(gr.Close)
	vars := map[string]string{}
	for _, kv := range gr.Env() {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	return gr, vars
}

// Two runs of one budget across runs, 32 requests each, all at once,
// against a pool that pays for 4 of them: 4 reach the upstream, whichever
// run sent them, the 60 others are refused before forwarding in the
// provider's format, naming the budget, and what the pool's grants
// metered together stays within its limit. Round after round: the race is
// the point.
func TestPoolHoldsAcrossRuns(t *testing.T) {
	var reached atomic.Int64
	e := newEnv(t, honestChat(100*time.Millisecond, &reached), nil)
	body := chatBody(t)
	limit := 4.5 * worstCase(body)
	for round := range 3 {
		reached.Store(0)
		pool := gateway.NewPool("team-a")
		pool.SetLimit(limit, "today")
		recs := newRecords()
		a, va := e.grantOf(t, "a1", recs)
		b, vb := e.grantOf(t, "a2", recs)
		a.SetPools(pool)
		b.SetPools(pool)
		var resps [2][]*http.Response
		var wg sync.WaitGroup
		wg.Go(func() { resps[0] = parallel(t, e, va, 32, body) })
		wg.Go(func() { resps[1] = parallel(t, e, vb, 32, body) })
		wg.Wait()
		got := map[int]int{}
		for _, rs := range resps {
			for _, resp := range rs {
				text := readAll(t, resp)
				got[resp.StatusCode]++
				if resp.StatusCode == http.StatusTooManyRequests {
					assert.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
					var v struct {
						Error struct{ Type, Code, Message string }
					}
					require.NoError(t, json.Unmarshal([]byte(text), &v), text)
					assert.Equal(t, "insufficient_quota", v.Error.Type)
					assert.Contains(t, v.Error.Message, "does not fit in budget team-a: $")
				}
			}
		}
		require.Equal(t, map[int]int{http.StatusOK: 4, http.StatusTooManyRequests: 60}, got, "round %d", round)
		assert.EqualValues(t, 4, reached.Load(), "round %d: requests that reached the upstream", round)
		refused := 0
		for range 64 {
			if r := recs.next(t); r.Refused {
				assert.Equal(t, gateway.OverPool, r.OverBudget)
				assert.Equal(t, "team-a", r.Budget)
				refused++
			}
		}
		assert.Equal(t, 60, refused)
		total := a.Metered().CostUSD + b.Metered().CostUSD
		assert.LessOrEqual(t, total, limit, "round %d: the pool's runs metered over its limit", round)
		spent, held := pool.Use()
		assert.InDelta(t, total, spent, 1e-12, "the pool counted what its runs metered")
		assert.Zero(t, held, "nothing in flight holds anything")
		a.Close()
		b.Close()
	}
}

// A refusal names the budget across runs and how much of it is spent or
// held, in the OpenAI and the Anthropic formats; a request that fits
// still goes; a pool with no limit (a lifted budget) refuses nothing.
func TestPoolRefusalNamesBudget(t *testing.T) {
	var reached atomic.Int64
	e := newEnv(t, honestChat(0, &reached), func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(anthropicMessage))
	})
	pool := gateway.NewPool("team-a")
	pool.SetLimit(1.00, "today")
	pool.SetSpent(0.96)
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	gr.SetPools(pool)

	// 30,000 output tokens at $1.60/M: $0.048, more than the $0.04 left.
	big := jsonBody(t, map[string]any{"model": "gpt-4.1-mini", "max_tokens": 30000,
		"messages": []map[string]any{{"role": "user", "content": "hi"}}})
	resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], big)
	text := readAll(t, resp)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, text)
	assert.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
	var oa struct {
		Error struct{ Type, Code, Message string }
	}
	require.NoError(t, json.Unmarshal([]byte(text), &oa), text)
	assert.Equal(t, "insufficient_quota", oa.Error.Type)
	assert.Equal(t, "insufficient_quota", oa.Error.Code)
	assert.Regexp(t, `^hermeskilld: this request's worst case, \$0\.0480 \(\d+ input tokens estimated, 30000 output at most\), `+
		`does not fit in budget team-a: \$0\.96 of \$1\.00 spent or held today$`, oa.Error.Message)
	r := recs.next(t)
	assert.True(t, r.Refused)
	assert.Equal(t, gateway.OverPool, r.OverBudget)
	assert.Equal(t, "team-a", r.Budget)
	assert.Equal(t, oa.Error.Message, r.Err)

	// 3,000 output tokens at $15/M: $0.045.
	claude := jsonBody(t, map[string]any{"model": "claude-sonnet-4-0", "max_tokens": 3000,
		"messages": []map[string]any{{"role": "user", "content": "hi"}}})
	resp = e.post(t, gateway.Anthropic, vars["ANTHROPIC_BASE_URL"]+"/v1/messages", vars["ANTHROPIC_API_KEY"], claude)
	text = readAll(t, resp)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, text)
	assert.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
	var an struct {
		Type  string
		Error struct{ Type, Message string }
	}
	require.NoError(t, json.Unmarshal([]byte(text), &an), text)
	assert.Equal(t, "error", an.Type)
	assert.Equal(t, "rate_limit_error", an.Error.Type)
	assert.Contains(t, an.Error.Message, "does not fit in budget team-a: $0.96 of $1.00 spent or held today")
	assert.Equal(t, "team-a", recs.next(t).Budget)
	assert.Zero(t, reached.Load(), "neither was forwarded")

	small := chatBody(t) // about $0.002: fits
	resp = e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], small)
	readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	r = recs.next(t)
	spent, _ := pool.Use()
	assert.InDelta(t, 0.96+r.CostUSD, spent, 1e-12, "the pool is charged what the request cost")

	pool.SetLimit(0, "today")
	resp = e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], big)
	readAll(t, resp)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "no limit: nothing refused")
}

// A request the agent gives up on holds its worst case in the pool while
// it is in flight and nothing once it ended: it is charged once, at its
// reservation (the upstream got it), and the hold is freed, so a request
// that fits only without it goes. Requests the upstream fails cost and
// hold nothing.
func TestPoolReleasesEndedRequests(t *testing.T) {
	var mode atomic.Int64 // 0: answer; 1: hang until the agent goes; 2: fail
	arrived := make(chan struct{}, 16)
	var reached atomic.Int64
	answer := honestChat(0, &reached)
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case 1:
			arrived <- struct{}{}
			<-r.Context().Done()
		case 2:
			http.Error(w, "boom", http.StatusInternalServerError)
		default:
			answer(w, r)
		}
	}, nil)
	body := chatBody(t)
	worst := worstCase(body)
	pool := gateway.NewPool("team-a")
	pool.SetLimit(2.5*worst, "today")
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	gr.SetPools(pool)
	post := func() int {
		resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], body)
		readAll(t, resp)
		recs.next(t)
		return resp.StatusCode
	}

	mode.Store(2)
	for range 10 {
		require.Equal(t, http.StatusInternalServerError, post())
	}
	spent, held := pool.Use()
	require.Zero(t, spent, "failed requests cost nothing")
	require.Zero(t, held, "failed requests hold nothing")

	mode.Store(1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, vars["OPENAI_BASE_URL"]+"/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+vars["OPENAI_API_KEY"])
	gave := make(chan error, 1)
	go func() {
		resp, err := e.agent.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		gave <- err
	}()
	select {
	case <-arrived:
	case <-time.After(waitRecord):
		t.Fatal("the request never reached the upstream")
	}
	spent, held = pool.Use()
	assert.Zero(t, spent)
	assert.InDelta(t, worst, held, 1e-12, "in flight, it holds its worst case")
	cancel()
	require.Error(t, <-gave)
	r := recs.next(t)
	assert.True(t, r.UsageUnknown, "charged at its reservation")
	spent, held = pool.Use()
	assert.InDelta(t, worst, spent, 1e-12)
	assert.Zero(t, held, "its hold was freed")

	mode.Store(0)
	assert.Equal(t, http.StatusOK, post(), "fits beside the one given up: 2 of 2.5 worst cases")
	assert.Equal(t, http.StatusTooManyRequests, post(), "3 worst cases do not fit in 2.5")
}

// A stream of a run in a pool is cut when its running cost no longer fits
// in what the pool leaves, with the protocol's clean ending; the pool is
// charged the stream's cost, past its limit by one event's output at most.
func TestPoolCutsStream(t *testing.T) {
	up := newEndless("chat", "gpt-4.1-mini")
	e := newEnv(t, up.ServeHTTP, nil)
	pool := gateway.NewPool("team-a")
	const limit = 0.01
	pool.SetLimit(limit, "today")
	pool.SetSpent(0.002) // another run's
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	gr.SetPools(pool)
	got := postStream(t, e, vars, cutCases[0])
	require.GreaterOrEqual(t, len(got), 3)
	assert.Equal(t, "data: [DONE]", got[len(got)-1])
	ch := eventData(t, got[len(got)-2])["choices"].([]any)[0].(map[string]any)
	assert.Equal(t, "length", ch["finish_reason"])
	r := recs.next(t)
	assert.True(t, r.Cut)
	assert.Equal(t, gateway.OverPool, r.OverBudget)
	assert.Equal(t, "team-a", r.Budget)
	assert.Contains(t, r.Err, "hermeskilld cut the stream at budget team-a")
	eventUSD := float64(deltaTokens) * 1.60 / 1e6
	spent, held := pool.Use()
	assert.Zero(t, held)
	assert.InDelta(t, 0.002+r.CostUSD, spent, 1e-12)
	assert.Greater(t, spent, limit-eventUSD, "cut at the limit, not before")
	assert.LessOrEqual(t, spent, limit+eventUSD+1e-12, "past the limit by one event at most")
	assert.Positive(t, r.OvershootUSD)
	assert.LessOrEqual(t, r.OvershootUSD, eventUSD+1e-12)
}
