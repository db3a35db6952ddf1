// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/pkg/client"
)

const chatCompletion = `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4.1-mini-2025-04-14",
"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[
 {"id":"call_1","type":"function","function":{"name":"web_search","arguments":"{\"q\":\"caf\\u00e9\",\"n\":3}"}},
 {"id":"call_2","type":"function","function":{"name":"read_file","arguments":""}}]},"finish_reason":"tool_calls"}],
"usage":{"prompt_tokens":1000,"completion_tokens":200,"total_tokens":1200,"prompt_tokens_details":{"cached_tokens":400}}}`

func argsHash(t testing.TB, args any) string {
	t.Helper()
	h, err := client.ArgsHash(args)
	require.NoError(t, err)
	return h
}

func TestOpenAIChat(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req_1")
		w.Header().Set("Set-Cookie", "__cf_bm=x")
		io.WriteString(w, chatCompletion)
	}, nil)
	recs := newRecords()
	gr, vars := e.grant(t, recs)

	resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions?x=1", vars["OPENAI_API_KEY"],
		`{"model":"gpt-4.1-mini","messages":[{"role":"user","content":"<b>hi</b>"}]}`)
	body := readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, chatCompletion, body, "the body passes unchanged")
	assert.Equal(t, "req_1", resp.Header.Get("X-Request-Id"))
	assert.Empty(t, resp.Header.Get("Set-Cookie"))

	up := e.openai.requests()
	require.Len(t, up, 1)
	assert.Equal(t, "/v1/chat/completions", up[0].Path)
	assert.Equal(t, "x=1", up[0].Query)
	assert.Equal(t, "Bearer "+openaiKey, up[0].Header.Get("Authorization"), "the upstream gets the real key")
	assert.Empty(t, up[0].Header.Get("X-Api-Key"))
	assert.JSONEq(t, `{"model":"gpt-4.1-mini","messages":[{"role":"user","content":"<b>hi</b>"}]}`, string(up[0].Body))

	rec := recs.next(t)
	assert.Equal(t, "openai", rec.Upstream)
	assert.Equal(t, "chat/completions", rec.Path)
	assert.Equal(t, "gpt-4.1-mini-2025-04-14", rec.Model, "the response's model")
	assert.Equal(t, "gpt-4.1-mini", rec.RequestModel, "the request's model")
	assert.Equal(t, []string{"tool_calls"}, rec.FinishReasons)
	assert.Equal(t, http.StatusOK, rec.Status)
	assert.False(t, rec.Stream)
	assert.False(t, rec.Refused)
	assert.False(t, rec.Incomplete)
	assert.Empty(t, rec.Err)
	assert.Equal(t, [3]int64{1000, 200, 400}, [3]int64{rec.InputTokens, rec.OutputTokens, rec.CachedInputTokens})
	assert.True(t, rec.Priced, "a dated snapshot takes its model's price")
	assert.InDelta(t, (600*0.40+400*0.10+200*1.60)/1e6, rec.CostUSD, 1e-12)
	assert.Equal(t, []gateway.ToolCall{
		{Name: "web_search", ArgsSHA256: argsHash(t, map[string]any{"n": 3, "q": "café"})},
		{Name: "read_file", ArgsSHA256: argsHash(t, map[string]any{})},
	}, rec.ToolCalls)

	m := gr.Metered()
	assert.Equal(t, int64(1), m.Requests)
	assert.Equal(t, int64(1200), m.Tokens)
	assert.True(t, m.CostKnown)
	require.Len(t, m.Models, 1)
	assert.Equal(t, certs.ModelUsage{Model: "gpt-4.1-mini-2025-04-14", Requests: 1, InputTokens: 1000, OutputTokens: 200,
		CachedInputTokens: 400, CostUSD: rec.CostUSD, Priced: true}, m.Models[0])
	assert.Equal(t, rec.At, m.FirstRequestAt)
}

// chatChunks is a streamed chat completion whose two tool calls arrive as
// fragments, interleaved, and whose usage chunk comes only if asked for.
func chatChunks(usage bool) []string {
	c := []string{
		`{"id":"c","object":"chat.completion.chunk","model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"web_search","arguments":""}}]}}]}`,
		`{"id":"c","object":"chat.completion.chunk","model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\":"}}]}}]}`,
		`{"id":"c","object":"chat.completion.chunk","model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"fetch","arguments":"{\"url\": \"x\"}"}}]}}]}`,
		`{"id":"c","object":"chat.completion.chunk","model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"golang\"}"}}]}}]}`,
		`{"id":"c","object":"chat.completion.chunk","model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	}
	if usage {
		c = append(c, `{"id":"c","object":"chat.completion.chunk","model":"gpt-4.1-mini-2025-04-14","choices":[],"usage":{"prompt_tokens":50,"completion_tokens":20,"total_tokens":70,"prompt_tokens_details":{"cached_tokens":0}}}`)
	}
	return append(c, "[DONE]")
}

// streamingChat answers as the API does: the usage chunk only when the
// request asked for it.
func streamingChat(w http.ResponseWriter, r *http.Request) {
	var req struct {
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	sse(w, chatChunks(req.StreamOptions.IncludeUsage)...)
}

func TestOpenAIChatStreamAddsAndStripsUsage(t *testing.T) {
	e := newEnv(t, streamingChat, nil)
	recs := newRecords()
	_, vars := e.grant(t, recs)

	resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"],
		`{"model":"gpt-4.1-mini","stream":true,"stream_options":{"other":1},"messages":[{"role":"user","content":"a < b & c"}]}`)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	got := events(t, readAll(t, resp))

	var want []string
	for _, c := range chatChunks(false) {
		want = append(want, "data: "+c)
	}
	assert.Equal(t, want, got, "the agent sees exactly the stream it asked for")

	sent := e.openai.requests()[0].Body
	assert.JSONEq(t, `{"model":"gpt-4.1-mini","stream":true,"stream_options":{"other":1,"include_usage":true},"messages":[{"role":"user","content":"a < b & c"}]}`, string(sent))
	assert.Contains(t, string(sent), "a < b & c", "the prompt is not re-escaped")

	rec := recs.next(t)
	assert.True(t, rec.Stream)
	assert.False(t, rec.Incomplete)
	assert.Empty(t, rec.Err)
	assert.Equal(t, [3]int64{50, 20, 0}, [3]int64{rec.InputTokens, rec.OutputTokens, rec.CachedInputTokens})
	assert.Equal(t, []gateway.ToolCall{
		{Name: "web_search", ArgsSHA256: argsHash(t, map[string]string{"q": "golang"})},
		{Name: "fetch", ArgsSHA256: argsHash(t, map[string]string{"url": "x"})},
	}, rec.ToolCalls, "assembled from the fragments, in index order")
	assert.Equal(t, []string{"tool_calls"}, rec.FinishReasons, "from the last chunk, not the null ones before it")
}

func TestOpenAIChatStreamKeepsUsageItAskedFor(t *testing.T) {
	e := newEnv(t, streamingChat, nil)
	recs := newRecords()
	_, vars := e.grant(t, recs)

	body := `{"model":"gpt-4.1-mini","stream":true,"stream_options":{"include_usage":true},"messages":[]}`
	resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], body)
	got := events(t, readAll(t, resp))
	assert.Len(t, got, len(chatChunks(true)), "the usage chunk it asked for passes")
	assert.Equal(t, body, string(e.openai.requests()[0].Body), "a request that asked for usage passes unchanged")
	assert.Equal(t, int64(70), recs.next(t).Tokens())
}

const responsesBody = `{"id":"resp_1","object":"response","model":"gpt-4.1-mini-2025-04-14","status":"completed",
"output":[{"type":"reasoning","id":"rs_1","summary":[]},
 {"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
 {"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"ok"}]}],
"usage":{"input_tokens":300,"input_tokens_details":{"cached_tokens":100},"output_tokens":40,"output_tokens_details":{"reasoning_tokens":10},"total_tokens":340}}`

func TestOpenAIResponses(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Stream bool }
		_ = json.NewDecoder(r.Body).Decode(&req)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, responsesBody)
			return
		}
		sse(w,
			"event: response.created\ndata: "+`{"type":"response.created","response":{"model":"gpt-4.1-mini-2025-04-14","output":[],"usage":null}}`,
			"event: response.output_item.added\ndata: "+`{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","name":"get_weather","arguments":""}}`,
			"event: response.function_call_arguments.delta\ndata: "+`{"type":"response.function_call_arguments.delta","output_index":0,"delta":"{\"city\":"}`,
			"event: response.function_call_arguments.delta\ndata: "+`{"type":"response.function_call_arguments.delta","output_index":0,"delta":"\"Paris\"}"}`,
			"event: response.output_item.done\ndata: "+`{"type":"response.output_item.done","output_index":0,"item":{"type":"function_call","name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}`,
			"event: response.completed\ndata: "+`{"type":"response.completed","response":`+strings.ReplaceAll(responsesBody, "\n", "")+`}`,
		)
	}, nil)
	recs := newRecords()
	_, vars := e.grant(t, recs)
	wantTools := []gateway.ToolCall{{Name: "get_weather", ArgsSHA256: argsHash(t, map[string]string{"city": "Paris"})}}

	for _, stream := range []bool{false, true} {
		resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/responses", vars["OPENAI_API_KEY"],
			jsonBody(t, map[string]any{"model": "gpt-4.1-mini", "input": "weather?", "stream": stream}))
		body := readAll(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		rec := recs.next(t)
		assert.Equal(t, stream, rec.Stream)
		assert.False(t, rec.Incomplete, "stream=%v", stream)
		assert.Equal(t, "gpt-4.1-mini-2025-04-14", rec.Model)
		assert.Equal(t, [3]int64{300, 40, 100}, [3]int64{rec.InputTokens, rec.OutputTokens, rec.CachedInputTokens}, "stream=%v", stream)
		assert.Equal(t, wantTools, rec.ToolCalls, "once, from the item, not again from response.completed")
		assert.Equal(t, []string{"completed"}, rec.FinishReasons, "the response's status, once (stream=%v)", stream)
	}
	assert.NotContains(t, string(e.openai.requests()[1].Body), "include_usage", "the Responses API always reports usage")
}

func TestOpenAIEmbeddingsAndModels(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/embeddings":
			io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}`)
		default:
			io.WriteString(w, `{"object":"list","data":[{"id":"gpt-4.1-mini","object":"model"}]}`)
		}
	}, nil)
	recs := newRecords()
	gr, vars := e.grant(t, recs)

	readAll(t, e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/embeddings", vars["OPENAI_API_KEY"], `{"model":"text-embedding-3-small","input":"x"}`))
	rec := recs.next(t)
	assert.Equal(t, int64(8), rec.InputTokens)
	assert.False(t, rec.Priced, "no price for this model, no default_price")
	assert.Zero(t, rec.CostUSD)

	req, _ := http.NewRequest(http.MethodGet, vars["OPENAI_BASE_URL"]+"/models/ft:gpt-4o-mini:org::abc", nil)
	req.Header.Set("Authorization", "Bearer "+vars["OPENAI_API_KEY"])
	resp, err := e.agent.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	rec = recs.next(t)
	assert.False(t, rec.Incomplete, "listing models spends nothing: no usage expected")
	assert.True(t, rec.Priced)

	m := gr.Metered()
	assert.False(t, m.CostKnown, "an unpriced model was used")
	assert.Equal(t, int64(2), m.Requests)
}
