// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/gateway"
)

// holdingStream sends first, then holds the stream open until the
// request is cancelled (the gateway cut it) or release is closed, and
// says on held when it holds.
func holdingStream(first string, held chan<- struct{}, release <-chan struct{}, rest ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sse(w, first)
		held <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
			sse(w, rest...)
		}
	}
}

func TestRevokeRefusesInEachFormat(t *testing.T) {
	e := newEnv(t, echoOK, echoOK)
	recs := newRecords()
	gr, vars := e.grant(t, recs)

	readAll(t, e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], `{}`))
	recs.next(t)
	rev := gr.Revoke("cost", "spent $5.01 of $5.00")
	assert.Zero(t, rev.InFlight, "the completed request is not cut")
	assert.Equal(t, "cost", rev.Check)
	again := gr.Revoke("tokens", "later")
	assert.Equal(t, rev, again, "the first revocation stands")

	resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], `{}`)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	oe := decode[openAIError](t, readAll(t, resp))
	assert.Equal(t, "access_revoked", oe.Error.Code)
	assert.Equal(t, "cost", oe.Error.Check)
	assert.Equal(t, "spent $5.01 of $5.00", oe.Error.Reason)
	assert.Contains(t, oe.Error.Message, "check cost")

	resp = e.post(t, gateway.Anthropic, vars["ANTHROPIC_BASE_URL"]+"/v1/messages", vars["ANTHROPIC_API_KEY"], `{}`)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	ae := decode[anthropicError](t, readAll(t, resp))
	assert.Equal(t, "error", ae.Type)
	assert.Equal(t, "permission_error", ae.Error.Type)
	assert.Equal(t, "cost", ae.Error.Check)
	assert.Contains(t, ae.Error.Message, "spent $5.01 of $5.00")

	assert.Len(t, e.openai.requests(), 1)
	assert.Empty(t, e.anthropic.requests())
	for range 2 {
		rec := recs.next(t)
		assert.True(t, rec.Refused)
		assert.Equal(t, http.StatusForbidden, rec.Status)
	}
	m := gr.Metered()
	assert.Equal(t, int64(1), m.Requests)
	assert.Equal(t, int64(2), m.Refused)
	assert.Equal(t, rev.At, m.RevokedAt)
}

func TestRevokeCutsStreamsInFlight(t *testing.T) {
	for _, style := range []gateway.Style{gateway.OpenAI, gateway.Anthropic} {
		t.Run(string(style), func(t *testing.T) {
			held := make(chan struct{}, 1)
			first := map[gateway.Style]string{gateway.OpenAI: chatChunks(false)[0], gateway.Anthropic: anthropicStream[0]}[style]
			h := holdingStream(first, held, nil)
			e := newEnv(t, h, h)
			recs := newRecords()
			gr, vars := e.grant(t, recs)
			base, key, path := vars["OPENAI_BASE_URL"], vars["OPENAI_API_KEY"], "/chat/completions"
			if style == gateway.Anthropic {
				base, key, path = vars["ANTHROPIC_BASE_URL"], vars["ANTHROPIC_API_KEY"], "/v1/messages"
			}

			resp := e.post(t, style, base+path, key, `{"model":"m","stream":true}`)
			defer resp.Body.Close()
			er := eventReader{bufio.NewReader(resp.Body)}
			ev, err := er.next()
			require.NoError(t, err)
			assert.Contains(t, ev, strings.SplitN(first, "\n", 2)[0])
			<-held

			rev := gr.Revoke("tool_loop", "web_search called 5 times with the same arguments")
			assert.Equal(t, 1, rev.InFlight)
			ev, err = er.next()
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(ev, "event: error\ndata: "), ev)
			data := strings.TrimPrefix(ev, "event: error\ndata: ")
			if style == gateway.Anthropic {
				ae := decode[anthropicError](t, data)
				assert.Equal(t, "permission_error", ae.Error.Type)
				assert.Equal(t, "tool_loop", ae.Error.Check)
			} else {
				oe := decode[openAIError](t, data)
				assert.Equal(t, "access_revoked", oe.Error.Code)
				assert.Equal(t, "tool_loop", oe.Error.Check)
			}
			_, err = er.next()
			assert.ErrorIs(t, err, io.EOF, "the stream ends")

			rec := recs.next(t)
			assert.True(t, rec.Cut)
			assert.True(t, rec.Stream)
			assert.True(t, rec.Incomplete)
			assert.Contains(t, rec.Err, "revoked")
			assert.Zero(t, gr.Metered().Errors, "a cut is not an upstream error")
		})
	}
}

func TestRevokeCutsARequestWaitingForItsAnswer(t *testing.T) {
	arrived := make(chan struct{})
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
	}, nil)
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	go func() {
		<-arrived
		gr.Revoke("cost", "over budget")
	}()
	resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], `{}`)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Equal(t, "access_revoked", decode[openAIError](t, readAll(t, resp)).Error.Code)
	rec := recs.next(t)
	assert.True(t, rec.Cut)
	assert.False(t, rec.Refused, "it reached the upstream")
}

// revoker revokes its grant from the observer, as the supervisor does
// when a request crosses the budget.
type revoker struct {
	recs records
	once sync.Once
	gr   func() *gateway.Grant
	rev  chan gateway.Revocation
}

func (r *revoker) Request(rec gateway.Record) {
	r.recs.Request(rec)
	r.once.Do(func() { r.rev <- r.gr().Revoke("cost", "spent $5.01 of $5.00") })
}

func TestRevokeFromTheObserverDoesNotCutTheRequestThatCrossed(t *testing.T) {
	e := newEnv(t, streamingChat, nil)
	var gr *gateway.Grant
	obs := &revoker{recs: newRecords(), gr: func() *gateway.Grant { return gr }, rev: make(chan gateway.Revocation, 1)}
	gr, vars := e.grant(t, obs)

	resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], `{"model":"gpt-4.1-mini","stream":true}`)
	got := events(t, readAll(t, resp))
	assert.Equal(t, "data: [DONE]", got[len(got)-1], "the request that crossed the budget completes")
	assert.Zero(t, (<-obs.rev).InFlight)
	rec := obs.recs.next(t)
	assert.False(t, rec.Cut)

	resp = e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], `{"model":"gpt-4.1-mini","stream":true}`)
	readAll(t, resp)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "the next one is refused")
}

func TestGrantClose(t *testing.T) {
	held := make(chan struct{}, 1)
	e := newEnv(t, holdingStream(chatChunks(false)[0], held, nil), nil)
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], `{"stream":true}`)
	<-held
	gr.Close()
	gr.Close()
	got := events(t, readAll(t, resp))
	assert.Contains(t, got[len(got)-1], "run_ended")
	assert.True(t, recs.next(t).Cut)

	resp = e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], `{}`)
	readAll(t, resp)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the handle is forgotten")
	assert.Equal(t, int64(1), gr.Metered().Requests, "Metered still answers")
}

func TestShutdownClosesStreams(t *testing.T) {
	held := make(chan struct{}, 1)
	f := newFake(t, holdingStream(anthropicStream[0], held, nil))
	gw, err := gateway.New(gateway.Config{Upstreams: []gateway.Upstream{{Name: "anthropic", URL: f.URL, Style: gateway.Anthropic}}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.Serve(ctx) }()
	recs := newRecords()
	gr := gw.Grant("a", recs)
	env := gr.Env()
	require.Len(t, env, 3) // base URL, handle, run

	agent := &http.Client{Transport: &http.Transport{}}
	defer agent.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, strings.TrimPrefix(env[0], "ANTHROPIC_BASE_URL=")+"/v1/messages", strings.NewReader(`{"stream":true}`))
	req.Header.Set("X-Api-Key", strings.TrimPrefix(env[1], "ANTHROPIC_API_KEY="))
	resp, err := agent.Do(req)
	require.NoError(t, err)
	<-held
	cancel()
	got := events(t, readAll(t, resp))
	assert.Contains(t, got[len(got)-1], "overloaded_error", "a stream cut at shutdown ends with an error event")
	require.NoError(t, <-done)
	rec := recs.next(t)
	assert.True(t, rec.Cut)
	assert.Contains(t, rec.Err, "shutting down")
	require.NoError(t, gw.Close())
}

func TestUpstreamDropsMidStream(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, chatChunks(false)[:2]...)
		io.WriteString(w, `data: {"choices":[{"ind`) // half an event, then the connection drops
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}, nil)
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], `{"stream":true}`)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Error(t, err, "the agent's stream breaks as the upstream's did")
	assert.Equal(t, "data: "+chatChunks(false)[0]+"\n\ndata: "+chatChunks(false)[1]+"\n\n", string(b), "whole events only")

	rec := recs.next(t)
	assert.Contains(t, rec.Err, "upstream")
	assert.True(t, rec.Incomplete)
	assert.False(t, rec.Cut)
	assert.Equal(t, int64(1), gr.Metered().Errors)
	assert.Equal(t, int64(1), gr.Metered().Incomplete)
}

func TestUpstreamEndsStreamEarly(t *testing.T) {
	e := newEnv(t, nil, func(w http.ResponseWriter, r *http.Request) { sse(w, anthropicStream[:3]...) })
	recs := newRecords()
	_, vars := e.grant(t, recs)
	resp := e.post(t, gateway.Anthropic, vars["ANTHROPIC_BASE_URL"]+"/v1/messages", vars["ANTHROPIC_API_KEY"], `{"stream":true}`)
	assert.Equal(t, anthropicStream[:3], events(t, readAll(t, resp)))
	rec := recs.next(t)
	assert.Contains(t, rec.Err, "before its final event")
	assert.True(t, rec.Incomplete)
	assert.Equal(t, int64(1120), rec.InputTokens, "message_start's input tokens are counted")
}

func TestUpstreamSilentTooLong(t *testing.T) {
	held := make(chan struct{}, 1)
	e := newEnv(t, holdingStream(chatChunks(false)[0], held, nil), nil, func(c *gateway.Config) { c.StreamIdleTimeout = 50 * time.Millisecond })
	recs := newRecords()
	_, vars := e.grant(t, recs)
	resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], `{"stream":true}`)
	_, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Error(t, err)
	assert.Contains(t, recs.next(t).Err, "silent")
}
