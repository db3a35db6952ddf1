// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/gateway"
)

// gpt-4.1-mini's prices in the test price file, USD per token.
const miniIn, miniOut = 0.40 / 1e6, 1.60 / 1e6

// reserved is what a request body with output bound out is reserved at
// for gpt-4.1-mini: bytes/4 input tokens, out output tokens.
func reserved(bodyLen int, out int64) float64 {
	return float64((bodyLen+3)/4)*miniIn + float64(out)*miniOut
}

// requireUnknown checks a record charged at its reservation.
func requireUnknown(t *testing.T, rec gateway.Record, minUSD float64) {
	t.Helper()
	require.True(t, rec.UsageUnknown, "usage unknown: %+v", rec)
	require.True(t, rec.Priced)
	require.Greater(t, rec.CostUSD, 0.0)
	require.GreaterOrEqual(t, rec.CostUSD, minUSD*0.999)
	require.Positive(t, rec.OutputTokens)
}

// A stream the agent aborts before its usage chunk is charged at its
// reservation (its max_tokens), marked unknown, not $0.
func TestAbortedStreamChargedAtReservation(t *testing.T) {
	release := make(chan struct{})
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 50 {
			fmt.Fprintf(w, "data: {\"model\":\"gpt-4.1-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d\"}}]}\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-release:
			case <-time.After(20 * time.Millisecond):
			}
		}
		sse(w, `{"model":"gpt-4.1-mini","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":50}}`, "[DONE]")
	}, nil)
	defer close(release)
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	body := `{"model":"gpt-4.1-mini","stream":true,"max_tokens":500,"messages":[{"role":"user","content":"hi"}]}`
	resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], body)
	require.Equal(t, 200, resp.StatusCode)
	er := eventReader{bufio.NewReader(resp.Body)}
	for range 2 {
		_, err := er.next()
		require.NoError(t, err)
	}
	resp.Body.Close() // the agent aborts
	rec := recs.next(t)
	requireUnknown(t, rec, reserved(len(body), 500))
	require.EqualValues(t, 500, rec.OutputTokens)
	m := gr.Metered()
	require.False(t, m.CostKnown)
	require.EqualValues(t, 1, m.UsageUnknown)
	require.InDelta(t, rec.CostUSD, m.CostUSD, 1e-12)
	require.EqualValues(t, 1, m.Models[0].UsageUnknown)
}

// Without an output bound, a request is reserved at
// DefaultMaxOutputTokens; a complete response replaces the reservation by
// its usage.
func TestReservationDefaultAndReplaced(t *testing.T) {
	cut := true
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		if cut {
			sse(w, `{"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"content":"x"}}]}`) // ends before its usage
			return
		}
		sse(w, `{"model":"gpt-4.1-mini","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5}}`, "[DONE]")
	}, nil)
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	body := `{"model":"gpt-4.1-mini","stream":true,"messages":[]}`
	readAll(t, e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], body))
	rec := recs.next(t)
	requireUnknown(t, rec, 0)
	require.EqualValues(t, gateway.DefaultMaxOutputTokens, rec.OutputTokens)

	cut = false
	readAll(t, e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], body))
	rec = recs.next(t)
	require.False(t, rec.UsageUnknown)
	require.EqualValues(t, 15, rec.Tokens())
	require.InDelta(t, 10*miniIn+5*miniOut, rec.CostUSD, 1e-12)
	require.EqualValues(t, 1, gr.Metered().UsageUnknown)
}

// A non-streamed body over MaxResponseBytes is forwarded unread: it is
// charged at its reservation.
func TestOversizeResponseChargedAtReservation(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"model":"gpt-4.1-mini","choices":[{"index":0,"message":{"content":%q}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`,
			strings.Repeat("x", 4096))
	}, nil, func(c *gateway.Config) { c.MaxResponseBytes = 1024 })
	recs := newRecords()
	_, vars := e.grant(t, recs)
	body := `{"model":"gpt-4.1-mini","max_completion_tokens":300,"messages":[]}`
	got := readAll(t, e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], body))
	require.Greater(t, len(got), 4096, "forwarded whole")
	rec := recs.next(t)
	requireUnknown(t, rec, reserved(len(body), 300))
	require.True(t, rec.Incomplete)
}

// A body that is not the API's JSON is charged at its reservation too.
func TestUnparseableResponseChargedAtReservation(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"model":"gpt-4.1-mini","usage":`)
	}, nil)
	recs := newRecords()
	_, vars := e.grant(t, recs)
	body := `{"model":"gpt-4.1-mini","max_tokens":100,"messages":[]}`
	readAll(t, e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], body))
	requireUnknown(t, recs.next(t), reserved(len(body), 100))
}

// A Responses stream cut by the revocation is charged at its
// reservation (max_output_tokens), not recorded as 0 tokens, $0, known.
func TestKillCutResponsesStreamChargedAtReservation(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, `event: response.created
data: {"type":"response.created","response":{"model":"gpt-4.1-mini","usage":null}}`,
			`event: response.output_text.delta
data: {"type":"response.output_text.delta","delta":"hello"}`)
		<-r.Context().Done()
	}, nil)
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	body := `{"model":"gpt-4.1-mini","stream":true,"max_output_tokens":800,"input":"hi"}`
	resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/responses", vars["OPENAI_API_KEY"], body)
	require.Equal(t, 200, resp.StatusCode)
	er := eventReader{bufio.NewReader(resp.Body)}
	for range 2 {
		_, err := er.next()
		require.NoError(t, err)
	}
	require.Equal(t, 1, gr.Revoke("cost", "over budget").InFlight)
	last, _ := er.next()
	require.Contains(t, last, "access_revoked")
	resp.Body.Close()
	rec := recs.next(t)
	require.True(t, rec.Cut)
	requireUnknown(t, rec, reserved(len(body), 800))
	require.EqualValues(t, 800, rec.OutputTokens)
	m := gr.Metered()
	require.False(t, m.CostKnown)
	require.Positive(t, m.Tokens)
	require.Positive(t, m.CostUSD)
}

// A request cut by the kill before its response began may still be billed
// by the provider: it is charged at its reservation.
func TestKillCutBeforeHeadersChargedAtReservation(t *testing.T) {
	arrived := make(chan struct{}, 1)
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	}, nil)
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	body := `{"model":"gpt-4.1-mini","max_tokens":200,"messages":[]}`
	go func() {
		<-arrived
		gr.Revoke("cost", "over budget")
	}()
	resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], body)
	require.Equal(t, 403, resp.StatusCode)
	readAll(t, resp)
	rec := recs.next(t)
	require.True(t, rec.Cut)
	requireUnknown(t, rec, reserved(len(body), 200))
}

// "background": true on the Responses API is refused: its usage would
// never pass through the gateway.
func TestBackgroundResponsesRefused(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) { t.Error("forwarded") }, nil)
	recs := newRecords()
	_, vars := e.grant(t, recs)
	resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/responses", vars["OPENAI_API_KEY"],
		`{"model":"gpt-4.1-mini","background":true,"input":"hi"}`)
	require.Equal(t, 400, resp.StatusCode)
	var v struct {
		Error struct{ Type, Code, Message string }
	}
	require.NoError(t, json.Unmarshal([]byte(readAll(t, resp)), &v))
	require.Equal(t, "background_unsupported", v.Error.Code)
	require.Equal(t, "invalid_request_error", v.Error.Type)
	require.True(t, recs.next(t).Refused)
	require.Empty(t, e.openai.requests())

	// "background": false is an ordinary request.
	e2 := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"model":"gpt-4.1-mini","output":[],"usage":{"input_tokens":3,"output_tokens":2}}`)
	}, nil)
	_, vars = e2.grant(t, recs)
	resp = e2.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/responses", vars["OPENAI_API_KEY"],
		`{"model":"gpt-4.1-mini","background":false,"input":"hi"}`)
	require.Equal(t, 200, resp.StatusCode)
	readAll(t, resp)
	rec := recs.next(t)
	require.False(t, rec.UsageUnknown)
	require.EqualValues(t, 5, rec.Tokens())
}

// A body with a member named twice is refused in the provider's format:
// providers differ in which one they take.
func TestDuplicateKeysRefused(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) { t.Error("forwarded") },
		func(w http.ResponseWriter, r *http.Request) { t.Error("forwarded") })
	recs := newRecords()
	_, vars := e.grant(t, recs)
	for _, body := range []string{
		`{"model":"gpt-4.1-mini","stream":false,"messages":[],"stream":true}`,
		`{"model":"gpt-4.1-mini","stream":true,"stream_options":{"include_usage":true,"include_usage":false},"messages":[]}`,
		`{"model":"gpt-4.1-mini","model":"gpt-4.1","messages":[]}`,
	} {
		resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], body)
		require.Equal(t, 400, resp.StatusCode, body)
		var v struct {
			Error struct{ Type, Code, Message string }
		}
		require.NoError(t, json.Unmarshal([]byte(readAll(t, resp)), &v))
		require.Equal(t, "duplicate_key", v.Error.Code)
		require.Contains(t, v.Error.Message, "duplicate key")
		require.True(t, recs.next(t).Refused)
	}
	resp := e.post(t, gateway.Anthropic, vars["ANTHROPIC_BASE_URL"]+"/v1/messages", vars["ANTHROPIC_API_KEY"],
		`{"model":"claude-sonnet-4","max_tokens":10,"max_tokens":100000,"messages":[]}`)
	require.Equal(t, 400, resp.StatusCode)
	var v struct {
		Type  string
		Error struct{ Type, Message string }
	}
	require.NoError(t, json.Unmarshal([]byte(readAll(t, resp)), &v))
	require.Equal(t, "error", v.Type)
	require.Equal(t, "invalid_request_error", v.Error.Type)
	require.Empty(t, e.openai.requests())
	require.Empty(t, e.anthropic.requests())
}

// Keys are read exactly as the provider reads them: "ſtream" (which
// encoding/json's struct decoding folds into "stream") is not "stream".
func TestRequestKeysExact(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, `{"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"content":"x"}}]}`,
			`{"model":"gpt-4.1-mini","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}`, "[DONE]")
	}, nil)
	recs := newRecords()
	_, vars := e.grant(t, recs)

	// The provider streams ("stream": true) and ignores "ſtream": false;
	// the gateway must ask for the usage, and reads it.
	body := `{"model":"gpt-4.1-mini","stream":true,"ſtream":false,"messages":[]}`
	got := readAll(t, e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], body))
	require.NotContains(t, got, `"choices":[]`, "the usage chunk the gateway asked for is dropped")
	sent := e.openai.requests()[0].Body
	var req map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(sent, &req))
	require.JSONEq(t, `{"include_usage":true}`, string(req["stream_options"]))
	require.JSONEq(t, `false`, string(req["ſtream"]), "the agent's other members are kept")
	rec := recs.next(t)
	require.False(t, rec.UsageUnknown)
	require.EqualValues(t, 10, rec.Tokens())

	// "Stream" and "ſtream" are not "stream": the request is not a stream
	// request and is forwarded as it is.
	body = `{"model":"gpt-4.1-mini","ſtream":true,"Stream":true,"messages":[]}`
	readAll(t, e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], body))
	require.Equal(t, body, string(e.openai.requests()[1].Body))
	recs.next(t)
}

// A WebSocket upgrade (the Responses API's WebSocket transport) is
// answered at once with 426, which its clients take as "use HTTP", and
// never reaches the upstream.
func TestWebSocketUpgradeRefused(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) { t.Error("forwarded") }, nil)
	recs := newRecords()
	_, vars := e.grant(t, recs)
	addr := strings.TrimPrefix(vars["OPENAI_BASE_URL"], "http://")
	addr, _, _ = strings.Cut(addr, "/")
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	start := time.Now()
	fmt.Fprintf(c, "GET /openai/responses HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", addr, vars["OPENAI_API_KEY"])
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 2*time.Second)
	require.Equal(t, http.StatusUpgradeRequired, resp.StatusCode)
	var v struct{ Error struct{ Code string } }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
	resp.Body.Close()
	require.Equal(t, "websocket_unsupported", v.Error.Code)
	rec := recs.next(t)
	require.True(t, rec.Refused)
	require.Equal(t, http.StatusUpgradeRequired, rec.Status)
	require.Empty(t, e.openai.requests())
}
