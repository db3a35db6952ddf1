// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/gateway"
)

// openAIError and anthropicError are the providers' error bodies.
type openAIError struct {
	Error struct {
		Message, Type, Code, Check, Reason string
		Param                              *string
	}
}

type anthropicError struct {
	Type  string
	Error struct{ Type, Message, Check, Reason string }
}

func decode[T any](t testing.TB, body string) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal([]byte(body), &v), body)
	return v
}

func echoOK(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"ok":true}`)
}

func TestWrongHandle(t *testing.T) {
	e := newEnv(t, echoOK, echoOK)
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	handle := vars["OPENAI_API_KEY"]
	flipped := handle[:len(handle)-1] + map[bool]string{true: "B", false: "A"}[strings.HasSuffix(handle, "A")]
	other := e.gw.Grant("agent-2", nil)
	other.Close()

	for _, h := range []string{"", "hk-wrong", flipped, openaiKey, strings.ToUpper(handle), other.Env()[1][len("OPENAI_API_KEY="):]} {
		resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", h, `{}`)
		body := readAll(t, resp)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		oe := decode[openAIError](t, body)
		assert.Equal(t, "invalid_api_key", oe.Error.Code)
		assert.Equal(t, "invalid_request_error", oe.Error.Type)

		resp = e.post(t, gateway.Anthropic, vars["ANTHROPIC_BASE_URL"]+"/v1/messages", h, `{}`)
		body = readAll(t, resp)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		ae := decode[anthropicError](t, body)
		assert.Equal(t, "error", ae.Type)
		assert.Equal(t, "authentication_error", ae.Error.Type)
	}
	assert.Empty(t, e.openai.requests())
	assert.Empty(t, e.anthropic.requests())
	assert.Zero(t, gr.Metered().Refused, "a request without this grant's handle is not this grant's")
	assert.Empty(t, recs)
}

func TestOutsideTheAPI(t *testing.T) {
	e := newEnv(t, echoOK, echoOK)
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	oa, an := vars["OPENAI_BASE_URL"], vars["ANTHROPIC_BASE_URL"]
	for _, c := range []struct {
		method, url string
		status      int
	}{
		{"POST", oa + "/files", 404},
		{"POST", oa + "/chat/completions/x", 404},
		{"GET", oa + "/../../etc/passwd", 404},
		{"GET", oa + "/models/a%2Fb", 404},
		{"GET", oa + "/models/..", 404},
		{"POST", oa + "/v1/messages", 404},
		{"DELETE", oa + "/models/gpt-4.1", 405},
		{"GET", oa + "/chat/completions", 405},
		{"POST", an + "/v1/complete", 404},
		{"POST", an + "/v1/messages/batches", 404},
		{"GET", an + "/v1/messages", 405},
		{"POST", an + "/chat/completions", 404},
	} {
		req, err := http.NewRequest(c.method, c.url, strings.NewReader(`{}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+vars["OPENAI_API_KEY"])
		resp, err := e.agent.Do(req)
		require.NoError(t, err)
		body := readAll(t, resp)
		assert.Equal(t, c.status, resp.StatusCode, "%s %s: %s", c.method, c.url, body)
	}
	assert.Empty(t, e.openai.requests())
	assert.Empty(t, e.anthropic.requests())
	m := gr.Metered()
	assert.Equal(t, int64(12), m.Refused)
	assert.Zero(t, m.Requests)
	rec := recs.next(t)
	assert.True(t, rec.Refused)
	assert.Equal(t, "files", rec.Path)

	resp, err := e.agent.Get("http://" + e.gw.Addr() + "/nope/chat/completions")
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, "unknown_upstream", decode[openAIError](t, readAll(t, resp)).Error.Code)
}

func TestRequestBodyBounded(t *testing.T) {
	e := newEnv(t, echoOK, echoOK, func(c *gateway.Config) { c.MaxRequestBytes = 1 << 10 })
	recs := newRecords()
	_, vars := e.grant(t, recs)

	big := `{"model":"m","input":"` + strings.Repeat("x", 2<<10) + `"}`
	resp := e.post(t, gateway.Anthropic, vars["ANTHROPIC_BASE_URL"]+"/v1/messages", vars["ANTHROPIC_API_KEY"], big)
	ae := decode[anthropicError](t, readAll(t, resp))
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Equal(t, "request_too_large", ae.Error.Type)
	rec := recs.next(t)
	assert.True(t, rec.Refused)
	assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Status)
	assert.Empty(t, e.anthropic.requests())

	resp = e.post(t, gateway.Anthropic, vars["ANTHROPIC_BASE_URL"]+"/v1/messages", vars["ANTHROPIC_API_KEY"], `{"model":"m"}`)
	assert.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp))
}

func TestUpstreamErrorsPassThrough(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
	}, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(529)
		io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	})
	recs := newRecords()
	gr, vars := e.grant(t, recs)

	resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], `{"model":"gpt-4.1-mini","stream":true}`)
	assert.Equal(t, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, readAll(t, resp))
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "7", resp.Header.Get("Retry-After"))
	rec := recs.next(t)
	assert.Equal(t, http.StatusTooManyRequests, rec.Status)
	assert.False(t, rec.Incomplete, "an error response spends nothing")
	assert.True(t, rec.Priced, "no tokens, nothing unknown")

	resp = e.post(t, gateway.Anthropic, vars["ANTHROPIC_BASE_URL"]+"/v1/messages", vars["ANTHROPIC_API_KEY"], `{}`)
	assert.Equal(t, 529, resp.StatusCode)
	readAll(t, resp)
	assert.Equal(t, 529, recs.next(t).Status)

	m := gr.Metered()
	assert.Equal(t, int64(2), m.Requests)
	assert.Equal(t, int64(2), m.Errors)
}

func TestUpstreamUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	gw, err := gateway.New(gateway.Config{Upstreams: []gateway.Upstream{{Name: "anthropic", URL: dead, Style: gateway.Anthropic, KeyFile: keyFile(t, anthropicKey)}}})
	require.NoError(t, err)
	e := &env{gw: gw, agent: &http.Client{}}
	done := make(chan error, 1)
	go func() { done <- gw.Serve(t.Context()) }()
	defer func() { require.NoError(t, gw.Close()); <-done }()

	recs := newRecords()
	gr := gw.Grant("a", recs)
	defer gr.Close()
	var base, handle string
	for _, kv := range gr.Env() {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "ANTHROPIC_BASE_URL":
			base = v
		case "ANTHROPIC_API_KEY":
			handle = v
		}
	}
	resp := e.post(t, gateway.Anthropic, base+"/v1/messages", handle, `{}`)
	body := readAll(t, resp)
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
	assert.Equal(t, "api_error", decode[anthropicError](t, body).Error.Type)
	assert.NotContains(t, body, ln.Addr().String(), "the upstream's address is not the agent's business")
	rec := recs.next(t)
	assert.Contains(t, rec.Err, "connection refused")
	assert.Equal(t, int64(1), gr.Metered().Errors)
	e.agent.CloseIdleConnections()
}

func TestKeysNeverReachTheAgent(t *testing.T) {
	// An upstream that answers with everything it was sent, in its body
	// and its headers: the gateway's own answers must not add the key.
	e := newEnv(t, echoOK, echoOK)
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	var got strings.Builder
	collect := func(resp *http.Response) {
		for k, vv := range resp.Header {
			got.WriteString(k + ": " + strings.Join(vv, ",") + "\n")
		}
		got.WriteString(readAll(t, resp))
	}
	oa, an := vars["OPENAI_BASE_URL"], vars["ANTHROPIC_BASE_URL"]
	collect(e.post(t, gateway.OpenAI, oa+"/chat/completions", vars["OPENAI_API_KEY"], `{}`))
	collect(e.post(t, gateway.OpenAI, oa+"/chat/completions", "wrong", `{}`))
	collect(e.post(t, gateway.OpenAI, oa+"/files", vars["OPENAI_API_KEY"], `{}`))
	collect(e.post(t, gateway.Anthropic, an+"/v1/messages", vars["ANTHROPIC_API_KEY"], `{}`))
	gr.Revoke("cost", "spent $5.01 of $5.00")
	collect(e.post(t, gateway.OpenAI, oa+"/chat/completions", vars["OPENAI_API_KEY"], `{}`))
	collect(e.post(t, gateway.Anthropic, an+"/v1/messages", vars["ANTHROPIC_API_KEY"], `{}`))
	for _, s := range gr.Env() {
		got.WriteString(s + "\n")
	}
	for _, key := range []string{openaiKey, anthropicKey, "SECRET"} {
		assert.NotContains(t, got.String(), key)
	}

	var logged strings.Builder
	for _, l := range e.logs.All() {
		logged.WriteString(l.Message)
		for k, v := range l.ContextMap() {
			logged.WriteString(" " + k + "=" + toString(v))
		}
	}
	for _, secret := range []string{openaiKey, anthropicKey, vars["OPENAI_API_KEY"]} {
		assert.NotContains(t, logged.String(), secret, "logs")
	}
	assert.NotEmpty(t, e.logs.All(), "requests are logged")
}

func toString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestNewRefuses(t *testing.T) {
	up := gateway.Upstream{Name: "openai", URL: "https://api.openai.com/v1", Style: gateway.OpenAI}
	for _, listen := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:80", "example.com:80"} {
		_, err := gateway.New(gateway.Config{Upstreams: []gateway.Upstream{up}, Listen: listen})
		assert.ErrorIs(t, err, gateway.ErrNotLoopback, listen)
	}
	_, err := gateway.New(gateway.Config{})
	assert.Error(t, err, "no upstream")
	_, err = gateway.New(gateway.Config{Upstreams: []gateway.Upstream{up, up}})
	assert.ErrorContains(t, err, "twice")
	_, err = gateway.New(gateway.Config{Upstreams: []gateway.Upstream{up, {Name: "b", URL: up.URL, Style: gateway.OpenAI},
		{Name: "B", URL: up.URL, Style: gateway.OpenAI}}})
	assert.ErrorContains(t, err, "HERMESKILL_LLM_B_BASE_URL")
	_, err = gateway.New(gateway.Config{Upstreams: []gateway.Upstream{{Name: "x", URL: "http://api.example.com", Style: gateway.OpenAI}}})
	assert.ErrorContains(t, err, "loopback")

	exposed := keyFile(t, "sk-x")
	require.NoError(t, os.Chmod(exposed, 0o640))
	up.KeyFile = exposed
	_, err = gateway.New(gateway.Config{Upstreams: []gateway.Upstream{up}})
	assert.True(t, errors.Is(err, gateway.ErrKeyExposed), "%v", err)
}
