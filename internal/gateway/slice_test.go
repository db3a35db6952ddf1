// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/gateway"
)

// A sub-agent's slice is never more than the run has left, and never
// widened: 32 requests at once on a slice that pays for 8 get 8 through.
// The run's own requests cannot use what the slice holds; the slice's are
// counted in the run (its metered total, its children) and told to its
// observer as the child's, whose refusals by the slice do not stop the
// run. Given back, the slice's handle ends.
func TestSliceNeverMoreThanLeft(t *testing.T) {
	var reached atomic.Int64
	e := newEnv(t, honestChat(0, &reached), nil)
	body := chatBody(t)
	worst := worstCase(body)
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	base, handle := vars["OPENAI_BASE_URL"], vars["OPENAI_API_KEY"]
	chat := base + "/chat/completions"
	gr.SetBudget(gateway.Budget{CostUSD: 10.5 * worst})
	for range 2 {
		resp := e.post(t, gateway.OpenAI, chat, handle, body)
		readAll(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		recs.next(t)
	}

	ctx := context.Background()
	s, err := gateway.RequestSlice(ctx, base, handle, gateway.SliceRequest{Run: "sub", MaxCostUSD: 20 * worst})
	require.NoError(t, err)
	assert.Equal(t, "agent-1", s.ParentRun)
	assert.InDelta(t, 8.5*worst, s.MaxCostUSD, 1e-12, "what is left, not what was asked")
	_, err = gateway.RequestSlice(ctx, base, handle, gateway.SliceRequest{Run: "sub2"})
	require.ErrorContains(t, err, "HTTP 429")
	require.ErrorContains(t, err, "nothing left for a sub-agent")
	_, err = gateway.RequestSlice(ctx, base, s.Handle, gateway.SliceRequest{Run: "sub-sub"})
	require.ErrorContains(t, err, "HTTP 409", "a slice is not sliced here: the sub-agent's own gateway slices its own")

	resp := e.post(t, gateway.OpenAI, chat, handle, body)
	readAll(t, resp)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the run's own request cannot use the slice's reservation")
	assert.Equal(t, "cost", recs.next(t).OverBudget)

	reached.Store(0)
	ok := 0
	for _, resp := range parallel(t, e, map[string]string{"OPENAI_BASE_URL": base, "OPENAI_API_KEY": s.Handle}, 32, body) {
		readAll(t, resp)
		if resp.StatusCode == http.StatusOK {
			ok++
		} else {
			assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		}
	}
	assert.Equal(t, 8, ok)
	assert.EqualValues(t, 8, reached.Load(), "never widened")
	for range 32 {
		r := recs.next(t)
		assert.Equal(t, "sub", r.Child)
		assert.Empty(t, r.OverBudget, "a slice's refusal does not stop its run")
	}
	m := gr.Metered()
	assert.EqualValues(t, 10, m.Requests)
	assert.LessOrEqual(t, m.CostUSD, 10.5*worst)
	require.Len(t, m.Children, 1)
	assert.Equal(t, "sub", m.Children[0].Run)
	assert.EqualValues(t, 8, m.Children[0].Requests)
	assert.InDelta(t, 8*worst, m.Children[0].CostUSD, 1e-12)

	require.NoError(t, gateway.ReleaseSlice(ctx, base, s.Handle))
	resp = e.post(t, gateway.OpenAI, chat, s.Handle, body)
	readAll(t, resp)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a slice given back is gone")
	assert.Equal(t, []certs.ChildRun{m.Children[0]}, gr.Metered().Children, "its spend stays in the run's record")
}

// What a slice did not spend is the run's again once given back; a
// revocation of the run revokes its slices.
func TestSliceReleaseAndRevoke(t *testing.T) {
	var reached atomic.Int64
	e := newEnv(t, honestChat(0, &reached), nil)
	body := chatBody(t)
	worst := worstCase(body)
	gr, vars := e.grant(t, nil)
	base, handle := vars["OPENAI_BASE_URL"], vars["OPENAI_API_KEY"]
	chat := base + "/chat/completions"
	gr.SetBudget(gateway.Budget{CostUSD: 4.5 * worst})
	ctx := context.Background()
	s, err := gateway.RequestSlice(ctx, base, handle, gateway.SliceRequest{Run: "sub", MaxCostUSD: 3 * worst})
	require.NoError(t, err)
	assert.InDelta(t, 3*worst, s.MaxCostUSD, 1e-12)
	resp := e.post(t, gateway.OpenAI, chat, s.Handle, body)
	readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	own := func() int {
		resp := e.post(t, gateway.OpenAI, chat, handle, body)
		readAll(t, resp)
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusOK, own(), "1 spent by the slice, 2 it holds: 1 left")
	assert.Equal(t, http.StatusTooManyRequests, own())
	require.NoError(t, gateway.ReleaseSlice(ctx, base, s.Handle))
	assert.Equal(t, http.StatusOK, own(), "given back: the 2 it held are the run's again")
	assert.Equal(t, http.StatusOK, own())
	assert.Equal(t, http.StatusTooManyRequests, own())

	gr2, vars2 := e.grant(t, nil)
	s2, err := gateway.RequestSlice(ctx, vars2["OPENAI_BASE_URL"], vars2["OPENAI_API_KEY"], gateway.SliceRequest{Run: "sub"})
	require.NoError(t, err)
	assert.Zero(t, s2.MaxCostUSD, "a run without a cap gives an uncapped slice")
	gr2.Revoke("manual", "test")
	resp = e.post(t, gateway.OpenAI, chat, s2.Handle, body)
	readAll(t, resp)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "the run's revocation revokes its slices")
}
