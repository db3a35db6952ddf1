// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/gateway"
)

const anthropicMessage = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-20250514",
"content":[{"type":"text","text":"Let me look."},
 {"type":"tool_use","id":"toolu_1","name":"web_search","input":{"q":"café","n":3}},
 {"type":"tool_use","id":"toolu_2","name":"list_files","input":{}}],
"stop_reason":"tool_use","usage":{"input_tokens":100,"cache_creation_input_tokens":20,"cache_read_input_tokens":1000,"output_tokens":50}}`

// anthropicStream is a streamed message with a text block and a tool_use
// block whose input arrives in fragments.
var anthropicStream = []string{
	"event: message_start\ndata: " + `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[],"usage":{"input_tokens":100,"cache_creation_input_tokens":20,"cache_read_input_tokens":1000,"output_tokens":1}}}`,
	"event: content_block_start\ndata: " + `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
	"event: ping\ndata: " + `{"type":"ping"}`,
	"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me look."}}`,
	"event: content_block_stop\ndata: " + `{"type":"content_block_stop","index":0}`,
	"event: content_block_start\ndata: " + `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"web_search","input":{}}}`,
	"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`,
	"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"n\": 3, \"q\": \"caf"}}`,
	"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\u00e9\"}"}}`,
	"event: content_block_stop\ndata: " + `{"type":"content_block_stop","index":1}`,
	"event: content_block_start\ndata: " + `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_2","name":"list_files","input":{}}}`,
	"event: content_block_stop\ndata: " + `{"type":"content_block_stop","index":2}`,
	"event: message_delta\ndata: " + `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":50}}`,
	"event: message_stop\ndata: " + `{"type":"message_stop"}`,
}

func TestAnthropicMessages(t *testing.T) {
	e := newEnv(t, nil, func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Stream bool }
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.Stream {
			sse(w, anthropicStream...)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, anthropicMessage)
	})
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	wantTools := []gateway.ToolCall{
		{Name: "web_search", ArgsSHA256: argsHash(t, map[string]any{"q": "café", "n": 3})},
		{Name: "list_files", ArgsSHA256: argsHash(t, map[string]any{})},
	}

	for _, stream := range []bool{false, true} {
		body := jsonBody(t, map[string]any{"model": "claude-sonnet-4-0", "max_tokens": 100, "stream": stream,
			"messages": []any{map[string]string{"role": "user", "content": "hi"}}})
		resp := e.post(t, gateway.Anthropic, vars["ANTHROPIC_BASE_URL"]+"/v1/messages", vars["ANTHROPIC_API_KEY"], body)
		got := readAll(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, got)
		if stream {
			assert.Equal(t, anthropicStream, events(t, got), "the stream passes unchanged")
		} else {
			assert.Equal(t, anthropicMessage, got)
		}

		up := e.anthropic.requests()
		last := up[len(up)-1]
		assert.Equal(t, "/v1/messages", last.Path)
		assert.Equal(t, anthropicKey, last.Header.Get("X-Api-Key"), "the upstream gets the real key")
		assert.Empty(t, last.Header.Get("Authorization"))
		assert.Equal(t, "2023-06-01", last.Header.Get("Anthropic-Version"))
		assert.Equal(t, body, string(last.Body))

		rec := recs.next(t)
		assert.Equal(t, stream, rec.Stream)
		assert.False(t, rec.Incomplete)
		assert.Empty(t, rec.Err)
		assert.Equal(t, "claude-sonnet-4-20250514", rec.Model)
		assert.Equal(t, [3]int64{1120, 50, 1000}, [3]int64{rec.InputTokens, rec.OutputTokens, rec.CachedInputTokens},
			"cache writes and reads are input; reads are the cached part (stream=%v)", stream)
		assert.True(t, rec.Priced, "the prefix claude-sonnet-4*")
		assert.InDelta(t, (120*3.00+1000*0.30+50*15.00)/1e6, rec.CostUSD, 1e-12)
		assert.Equal(t, wantTools, rec.ToolCalls, "stream=%v", stream)
		assert.Equal(t, []string{"tool_use"}, rec.FinishReasons, "stream=%v", stream)
	}
	assert.Equal(t, int64(2*1170), gr.Metered().Tokens)
}

func TestAnthropicCountTokensIsNotSpend(t *testing.T) {
	e := newEnv(t, nil, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"input_tokens":2095}`)
	})
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	resp := e.post(t, gateway.Anthropic, vars["ANTHROPIC_BASE_URL"]+"/v1/messages/count_tokens", vars["ANTHROPIC_API_KEY"], `{"model":"claude-sonnet-4-0","messages":[]}`)
	assert.Equal(t, `{"input_tokens":2095}`, readAll(t, resp))
	rec := recs.next(t)
	assert.Zero(t, rec.Tokens())
	assert.False(t, rec.Incomplete)
	assert.Zero(t, gr.Metered().Tokens)
}
