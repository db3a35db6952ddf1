// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/gateway"
)

// pauses is an Observer that also queues the pauses it is told of.
type pauses struct {
	records
	ch chan gateway.Pause
}

func newPauses() pauses { return pauses{records: newRecords(), ch: make(chan gateway.Pause, 16)} }

func (p pauses) Paused(ps gateway.Pause) { p.ch <- ps }

var _ gateway.PauseObserver = pauses{}

// sendAsync posts body and delivers the response (or the error) on a
// channel, so that a held request can be watched waiting.
func sendAsync(t *testing.T, e *env, vars map[string]string, body string) <-chan *http.Response {
	ch := make(chan *http.Response, 1)
	go func() {
		ch <- e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], body)
	}()
	return ch
}

// With Budget.Pause, the request that does not fit is held, not refused:
// the observer is told the grant paused (check cost), every later request
// waits too, nothing reaches the upstream; a Resume that would not admit
// the first held request is refused and changes nothing; one that does
// lets the held requests go on, and they are answered as if nothing
// happened.
func TestPauseHoldsThenResumes(t *testing.T) {
	t.Parallel()
	var reached atomic.Int64
	e := newEnv(t, honestChat(0, &reached), nil)
	body := chatBody(t)
	worst := worstCase(body)
	obs := newPauses()
	gr, vars := e.grant(t, obs)
	gr.SetBudget(gateway.Budget{CostUSD: 1.5 * worst, Pause: true})

	resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], body)
	require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp))
	obs.next(t)

	first := sendAsync(t, e, vars, body)
	var p gateway.Pause
	select {
	case p = <-obs.ch:
	case <-time.After(waitRecord):
		t.Fatal("the request that does not fit did not pause the grant")
	}
	assert.Equal(t, "cost", p.Check)
	assert.Contains(t, p.Reason, "does not fit in the run's budget")
	second := sendAsync(t, e, vars, body)
	require.Eventually(t, func() bool { return gr.Metered().Held == 2 }, waitRecord, 5*time.Millisecond, "both requests held")
	got, paused := gr.Paused()
	require.True(t, paused)
	assert.Equal(t, "cost", got.Check)
	select {
	case r := <-first:
		t.Fatalf("a held request was answered: %d", r.StatusCode)
	case r := <-second:
		t.Fatalf("a held request was answered: %d", r.StatusCode)
	default:
	}
	assert.EqualValues(t, 1, reached.Load(), "nothing held reached the upstream")

	var re *gateway.ResumeError
	require.ErrorAs(t, gr.Resume(gateway.Budget{CostUSD: 1.9 * worst, Pause: true}), &re)
	assert.Equal(t, "cost", re.Check)
	assert.InDelta(t, 2*worst, re.Need, 1e-9, "what the first held request needs beside the one spent")
	assert.Equal(t, 2, gr.Metered().Held, "a refused resume changes nothing")

	require.NoError(t, gr.Resume(gateway.Budget{CostUSD: 3.5 * worst, Pause: true}))
	for _, ch := range []<-chan *http.Response{first, second} {
		select {
		case r := <-ch:
			assert.Equal(t, http.StatusOK, r.StatusCode, readAll(t, r))
		case <-time.After(waitRecord):
			t.Fatal("a held request was not answered after the resume")
		}
	}
	obs.next(t)
	obs.next(t)
	assert.EqualValues(t, 3, reached.Load())
	m := gr.Metered()
	assert.Zero(t, m.Held)
	assert.EqualValues(t, 3, m.Requests)
	assert.Zero(t, m.Refused, "nothing was refused")
	assert.ErrorIs(t, gr.Resume(gateway.Budget{}), gateway.ErrNotPaused)
}

// A revocation of a paused grant (the pause timed out, an operator's
// kill) refuses the held requests, in the provider's format.
func TestPauseRevokeRefusesHeld(t *testing.T) {
	t.Parallel()
	var reached atomic.Int64
	e := newEnv(t, honestChat(0, &reached), nil)
	body := chatBody(t)
	gr, vars := e.grant(t, newPauses())
	gr.SetBudget(gateway.Budget{CostUSD: 1.5 * worstCase(body), Pause: true})
	gr.Pause()
	held := sendAsync(t, e, vars, body)
	require.Eventually(t, func() bool { return gr.Metered().Held == 1 }, waitRecord, 5*time.Millisecond)
	gr.Revoke("cost", "paused for 1h0m0s without a resume")
	select {
	case r := <-held:
		b := readAll(t, r)
		assert.Equal(t, http.StatusForbidden, r.StatusCode, b)
		assert.Contains(t, b, "access_revoked")
	case <-time.After(waitRecord):
		t.Fatal("the held request was not refused by the revocation")
	}
	assert.Zero(t, reached.Load())
}

// An agent that gives up on a held request (its SDK's timeout) is
// forgotten: the resume asks no room for it.
func TestPauseAbandonedHeldRequest(t *testing.T) {
	t.Parallel()
	var reached atomic.Int64
	e := newEnv(t, honestChat(0, &reached), nil)
	body := chatBody(t)
	worst := worstCase(body)
	gr, vars := e.grant(t, newPauses())
	gr.SetBudget(gateway.Budget{CostUSD: 0.5 * worst, Pause: true})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, vars["OPENAI_BASE_URL"]+"/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+vars["OPENAI_API_KEY"])
	_, err = http.DefaultClient.Do(req)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "the held request waited: %v", err)
	require.Eventually(t, func() bool { return gr.Metered().Held == 0 }, waitRecord, 5*time.Millisecond)
	_, paused := gr.Paused()
	assert.True(t, paused, "the grant stays paused")
	require.NoError(t, gr.Resume(gateway.Budget{CostUSD: 0.5 * worst, Pause: true}), "nothing held: any budget resumes")
	assert.Zero(t, reached.Load())
}
