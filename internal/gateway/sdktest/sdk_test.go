// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package sdktest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/gateway"
)

const (
	openaiKey    = "sk-openai-SECRET"
	anthropicKey = "sk-ant-SECRET"
)

const chatCompletion = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4.1-mini-2025-04-14",
"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[
 {"id":"call_1","type":"function","function":{"name":"web_search","arguments":"{\"q\":\"go\"}"}}]},"finish_reason":"tool_calls"}],
"usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120,"prompt_tokens_details":{"cached_tokens":0}}}`

var chatChunks = []string{
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}`,
}

const chatUsageChunk = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini-2025-04-14","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`

const responsesBody = `{"id":"resp_1","object":"response","created_at":1,"model":"gpt-4.1-mini-2025-04-14","status":"completed",
"output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"ok","annotations":[]}]}],
"usage":{"input_tokens":30,"input_tokens_details":{"cached_tokens":0},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":35}}`

const anthropicMessage = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-20250514",
"content":[{"type":"tool_use","id":"toolu_1","name":"web_search","input":{"q":"go"}}],
"stop_reason":"tool_use","usage":{"input_tokens":50,"output_tokens":7}}`

var anthropicStream = []string{
	"event: message_start\ndata: " + `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[],"stop_reason":null,"usage":{"input_tokens":50,"output_tokens":1}}}`,
	"event: content_block_start\ndata: " + `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"web_search","input":{}}}`,
	"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"q\":"}}`,
	"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"go\"}"}}`,
	"event: content_block_stop\ndata: " + `{"type":"content_block_stop","index":0}`,
	"event: message_delta\ndata: " + `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":7}}`,
	"event: message_stop\ndata: " + `{"type":"message_stop"}`,
}

func sse(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, ev := range events {
		if !strings.HasPrefix(ev, "event:") {
			ev = "data: " + ev
		}
		io.WriteString(w, ev+"\n\n")
		w.(http.Flusher).Flush()
	}
}

// upstream fakes both providers; hold makes streams stop after their
// first event until the request is cut.
type upstream struct {
	mu    sync.Mutex
	paths []string
	keys  []string
	hold  bool
	held  chan struct{}
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Stream        bool
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	u.mu.Lock()
	u.paths = append(u.paths, r.URL.Path)
	u.keys = append(u.keys, r.Header.Get("Authorization")+r.Header.Get("X-Api-Key"))
	hold := u.hold
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	var stream []string
	switch r.URL.Path {
	case "/v1/chat/completions":
		if !req.Stream {
			io.WriteString(w, chatCompletion)
			return
		}
		stream = append(stream, chatChunks...)
		if req.StreamOptions.IncludeUsage {
			stream = append(stream, chatUsageChunk)
		}
		stream = append(stream, "[DONE]")
	case "/v1/responses":
		io.WriteString(w, responsesBody)
		return
	case "/v1/messages":
		if !req.Stream {
			io.WriteString(w, anthropicMessage)
			return
		}
		stream = anthropicStream
	default:
		http.NotFound(w, r)
		return
	}
	if hold {
		sse(w, stream[0])
		u.held <- struct{}{}
		<-r.Context().Done()
		return
	}
	sse(w, stream...)
}

type records chan gateway.Record

func (rs records) Request(r gateway.Record) { rs <- r }

func (rs records) next(t *testing.T) gateway.Record {
	t.Helper()
	select {
	case r := <-rs:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no record")
		return gateway.Record{}
	}
}

// start runs a gateway in front of a fake of both providers and sets the
// test's environment from a grant, as the supervisor sets an agent's.
func start(t *testing.T) (*upstream, *gateway.Grant, records) {
	up := &upstream{held: make(chan struct{}, 1)}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	key := func(name, k string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(k), 0o600))
		return p
	}
	gw, err := gateway.New(gateway.Config{Upstreams: []gateway.Upstream{
		{Name: "openai", URL: srv.URL + "/v1", Style: gateway.OpenAI, KeyFile: key("o", openaiKey)},
		{Name: "anthropic", URL: srv.URL, Style: gateway.Anthropic, KeyFile: key("a", anthropicKey)},
	}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.Serve(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	recs := make(records, 64)
	gr := gw.Grant("sdk", recs)
	t.Cleanup(gr.Close)
	for _, kv := range gr.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return up, gr, recs
}

func TestOpenAISDK(t *testing.T) {
	up, gr, recs := start(t)
	client := openai.NewClient(option.WithMaxRetries(0))
	ctx := t.Context()
	params := openai.ChatCompletionNewParams{Model: "gpt-4.1-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}

	cc, err := client.Chat.Completions.New(ctx, params)
	require.NoError(t, err)
	require.Len(t, cc.Choices[0].Message.ToolCalls, 1)
	rec := recs.next(t)
	assert.Equal(t, int64(120), rec.Tokens())
	require.Len(t, rec.ToolCalls, 1)
	assert.Equal(t, "web_search", rec.ToolCalls[0].Name)

	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	n := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		n++
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, 2, n, "the usage chunk the gateway asked for is not seen")
	assert.Equal(t, "Hello", acc.Choices[0].Message.Content)
	assert.Equal(t, int64(12), recs.next(t).Tokens())

	resp, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-4.1-mini", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	require.NoError(t, err)
	assert.Equal(t, "ok", resp.OutputText())
	assert.Equal(t, int64(35), recs.next(t).Tokens())

	assert.Equal(t, []string{"/v1/chat/completions", "/v1/chat/completions", "/v1/responses"}, up.paths)
	for _, k := range up.keys {
		assert.Equal(t, "Bearer "+openaiKey, k)
	}

	// Revoked while a stream is in flight: the stream fails, the next
	// request gets 403 as an *openai.Error.
	up.mu.Lock()
	up.hold = true
	up.mu.Unlock()
	stream = client.Chat.Completions.NewStreaming(ctx, params)
	require.True(t, stream.Next())
	<-up.held
	gr.Revoke("cost", "spent $5.01 of $5.00")
	for stream.Next() {
	}
	require.Error(t, stream.Err())
	assert.Contains(t, stream.Err().Error(), "revoked")
	assert.True(t, recs.next(t).Cut)

	_, err = client.Chat.Completions.New(ctx, params)
	var apiErr *openai.Error
	require.True(t, errors.As(err, &apiErr), "%v", err)
	assert.Equal(t, http.StatusForbidden, apiErr.StatusCode)
	assert.Equal(t, "access_revoked", apiErr.Code)
	assert.NotContains(t, err.Error(), openaiKey)
}

func TestAnthropicSDK(t *testing.T) {
	up, gr, recs := start(t)
	client := anthropic.NewClient(aoption.WithMaxRetries(0))
	ctx := t.Context()
	params := anthropic.MessageNewParams{Model: "claude-sonnet-4-0", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}

	msg, err := client.Messages.New(ctx, params)
	require.NoError(t, err)
	assert.Equal(t, "web_search", msg.Content[0].Name)
	rec := recs.next(t)
	assert.Equal(t, int64(57), rec.Tokens())

	stream := client.Messages.NewStreaming(ctx, params)
	var acc anthropic.Message
	for stream.Next() {
		require.NoError(t, acc.Accumulate(stream.Current()))
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, `{"q":"go"}`, string(acc.Content[0].Input))
	rec = recs.next(t)
	assert.Equal(t, int64(57), rec.Tokens())
	require.Len(t, rec.ToolCalls, 1)
	assert.Equal(t, msg.Content[0].Name, rec.ToolCalls[0].Name)

	assert.Equal(t, []string{"/v1/messages", "/v1/messages"}, up.paths)
	for _, k := range up.keys {
		assert.Equal(t, anthropicKey, k)
	}

	up.mu.Lock()
	up.hold = true
	up.mu.Unlock()
	stream = client.Messages.NewStreaming(ctx, params)
	require.True(t, stream.Next())
	<-up.held
	gr.Revoke("tool_loop", "web_search 5 times")
	for stream.Next() {
	}
	require.Error(t, stream.Err())
	assert.True(t, recs.next(t).Cut)

	_, err = client.Messages.New(ctx, params)
	var apiErr *anthropic.Error
	require.True(t, errors.As(err, &apiErr), "%v", err)
	assert.Equal(t, http.StatusForbidden, apiErr.StatusCode)
	assert.Contains(t, err.Error(), "permission_error")
	assert.NotContains(t, err.Error(), anthropicKey)
}
