// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package sdktest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// reply is what the fake provider answers every request with.
type reply int

const (
	replyText         reply = iota // a text answer: the agent asks again
	replyTool                      // the same tool call, every time
	replyToolThenText              // the tool call, then, once the request holds the tool's result, a text answer
)

// usage is what one answer reports spending. in counts every input token,
// the cached ones too (OpenAI's prompt_tokens; Anthropic's input_tokens +
// cache_read_input_tokens).
type usage struct{ in, cached, out int64 }

// longDelta is each delta of a long answer: 40 bytes, 10 output tokens
// as the gateway counts them.
const longDelta = "Lorem ipsum dolor sit amet, consectetur "

// holdMarker in a streamed request makes the provider send the stream's
// first event and then nothing, until the request is cut.
const holdMarker = "HOLD this stream open"

// provider is a fake of both providers' APIs behind one server: OpenAI's
// chat completions at /v1/chat/completions and its Responses API at
// /v1/responses (streamed for text answers; an openai upstream's URL is SERVER/v1), and
// Anthropic's messages at /v1/messages (an anthropic upstream's URL is
// SERVER). It answers only requests that carry the real
// key in the provider's own header (401 otherwise), and records every
// request it gets.
type provider struct {
	reply reply
	model string // the model its answers name
	usage usage
	// long, when set, makes a streamed text answer that many deltas of
	// longDelta, whatever the request's output bound: a model that runs
	// on, for the budget to cut
	long int
	// served counts the deltas of long answers written, gone the long
	// streams whose client went away before their end
	served, gone int

	mu   sync.Mutex
	seen []seen
	held chan struct{} // gets a value when a held stream's first event is sent
}

// seen is one request as the provider got it.
type seen struct {
	At           time.Time
	Path         string
	Model        string // the request's
	Stream       bool
	IncludeUsage bool // stream_options.include_usage
	KeyOK        bool // the real key, in the provider's header, and nothing else
	Headers      string
	Held         bool
	Cut          bool // its answer was cut off by the caller
	ToolResult   bool // the request holds a tool's result (a "tool" message, a function_call_output item)
}

func newProvider(t *testing.T, r reply, model string, u usage) (*provider, string) {
	p := &provider{reply: r, model: model, usage: u, held: make(chan struct{}, 8)}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv.URL
}

// requests returns what the provider got so far.
func (p *provider) requests() []seen {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]seen(nil), p.seen...)
}

func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := seen{At: time.Now(), Path: r.URL.Path}
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
		Input json.RawMessage `json:"input"`
	}
	_ = json.Unmarshal(body, &req)
	s.Model, s.Stream, s.IncludeUsage = req.Model, req.Stream, req.StreamOptions.IncludeUsage
	for _, m := range req.Messages {
		s.ToolResult = s.ToolResult || m.Role == "tool"
	}
	var items []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(req.Input, &items) == nil {
		for _, it := range items {
			s.ToolResult = s.ToolResult || it.Type == "function_call_output"
		}
	}
	s.Held = req.Stream && strings.Contains(string(body), holdMarker)
	var hs []string
	for k, vv := range r.Header {
		hs = append(hs, k+": "+strings.Join(vv, ", "))
	}
	sort.Strings(hs)
	s.Headers = strings.Join(hs, "\n")

	var anthropic, responses bool
	switch r.URL.Path {
	case "/v1/chat/completions", "/v1/responses":
		responses = r.URL.Path == "/v1/responses"
		s.KeyOK = r.Header.Get("Authorization") == "Bearer "+openaiKey && r.Header.Get("X-Api-Key") == ""
	case "/v1/messages":
		anthropic = true
		s.KeyOK = r.Header.Get("X-Api-Key") == anthropicKey && r.Header.Get("Authorization") == ""
	default:
		p.record(s)
		http.NotFound(w, r)
		return
	}
	if !s.KeyOK {
		p.record(s)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		if anthropic {
			io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
		} else {
			io.WriteString(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
		}
		return
	}
	n := p.record(s)
	tool := p.reply == replyTool || p.reply == replyToolThenText && !s.ToolResult
	var events []string
	switch {
	case responses && req.Stream && tool:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"message":"the fake provider streams only text answers of the Responses API","type":"invalid_request_error","param":"stream","code":null}}`)
		return
	case responses && req.Stream:
		events = p.openAIResponseStream(n)
	case responses:
		writeJSON(w, p.openAIResponse(n, tool))
		return
	case anthropic && req.Stream:
		events = p.anthropicStream(n, tool)
	case anthropic:
		writeJSON(w, p.anthropicMessage(n, tool))
		return
	case req.Stream:
		events = p.openAIStream(n, tool, req.StreamOptions.IncludeUsage)
	default:
		writeJSON(w, p.openAICompletion(n, tool))
		return
	}
	if s.Held {
		sse(w, events[0])
		p.held <- struct{}{}
		<-r.Context().Done()
		p.mu.Lock()
		p.seen[n].Cut = true
		p.mu.Unlock()
		return
	}
	p.stream(w, r, events)
}

// stream writes events, each flushed, until the client goes away.
func (p *provider) stream(w http.ResponseWriter, r *http.Request, events []string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, ev := range events {
		if !strings.HasPrefix(ev, "event:") {
			ev = "data: " + ev
		}
		_, err := io.WriteString(w, ev+"\n\n")
		if err == nil {
			err = http.NewResponseController(w).Flush()
		}
		if err != nil || r.Context().Err() != nil {
			p.mu.Lock()
			p.gone++
			p.mu.Unlock()
			return
		}
		p.countServed(ev)
	}
}

// texts is the deltas of a text answer: one, or p.long of longDelta.
func (p *provider) texts() []string {
	if p.long == 0 {
		return []string{"Still looking."}
	}
	out := make([]string, p.long)
	for i := range out {
		out[i] = longDelta
	}
	return out
}

// countServed counts a delta of a long answer written.
func (p *provider) countServed(ev string) {
	if p.long > 0 && strings.Contains(ev, longDelta) {
		p.mu.Lock()
		p.served++
		p.mu.Unlock()
	}
}

// record keeps s and returns its index.
func (p *provider) record(s seen) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, s)
	return len(p.seen) - 1
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// toolArgs are the arguments of the tool call the provider asks for.
const toolArgs = `{"query":"hermeskill"}`

func (p *provider) openAIUsage() map[string]any {
	return map[string]any{"prompt_tokens": p.usage.in, "completion_tokens": p.usage.out,
		"total_tokens": p.usage.in + p.usage.out, "prompt_tokens_details": map[string]any{"cached_tokens": p.usage.cached}}
}

func (p *provider) openAICompletion(n int, tool bool) map[string]any {
	msg := map[string]any{"role": "assistant", "content": "Still looking.", "refusal": nil}
	finish := "stop"
	if tool {
		msg["content"] = nil
		msg["tool_calls"] = []any{map[string]any{"id": fmt.Sprintf("call_%d", n), "type": "function",
			"function": map[string]any{"name": "web_search", "arguments": toolArgs}}}
		finish = "tool_calls"
	}
	return map[string]any{"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 1, "model": p.model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
		"usage":   p.openAIUsage()}
}

// openAIStream is a streamed chat completion's events; the usage chunk
// only when the request asked for it, as OpenAI does.
func (p *provider) openAIStream(n int, tool, includeUsage bool) []string {
	chunk := func(choices []any, extra map[string]any) string {
		c := map[string]any{"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion.chunk", "created": 1,
			"model": p.model, "choices": choices}
		for k, v := range extra {
			c[k] = v
		}
		return mustJSON(c)
	}
	delta := func(d map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": d, "finish_reason": finish}}
	}
	events := []string{chunk(delta(map[string]any{"role": "assistant", "content": ""}, nil), nil)}
	finish := "stop"
	if tool {
		half := len(toolArgs) / 2
		events = append(events,
			chunk(delta(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": fmt.Sprintf("call_%d", n), "type": "function",
				"function": map[string]any{"name": "web_search", "arguments": ""}}}}, nil), nil),
			chunk(delta(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": toolArgs[:half]}}}}, nil), nil),
			chunk(delta(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": toolArgs[half:]}}}}, nil), nil))
		finish = "tool_calls"
	} else {
		for _, text := range p.texts() {
			events = append(events, chunk(delta(map[string]any{"content": text}, nil), nil))
		}
	}
	events = append(events, chunk(delta(map[string]any{}, finish), nil))
	if includeUsage {
		events = append(events, chunk([]any{}, map[string]any{"usage": p.openAIUsage()}))
	}
	return append(events, "[DONE]")
}

// openAIResponse is a Responses API response (not streamed): the tool
// call as a function_call output item, else a message.
func (p *provider) openAIResponse(n int, tool bool) map[string]any {
	item := map[string]any{"type": "message", "id": fmt.Sprintf("msg_%d", n), "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": "Found it.", "annotations": []any{}}}}
	if tool {
		item = map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d", n), "call_id": fmt.Sprintf("call_%d", n),
			"name": "web_search", "arguments": toolArgs, "status": "completed"}
	}
	return map[string]any{"id": fmt.Sprintf("resp_%d", n), "object": "response", "created_at": 1, "status": "completed",
		"model": p.model, "output": []any{item}, "error": nil, "incomplete_details": nil, "instructions": nil,
		"metadata": map[string]any{}, "parallel_tool_calls": true, "temperature": 1.0, "tool_choice": "auto",
		"tools": []any{}, "top_p": 1.0,
		"usage": map[string]any{"input_tokens": p.usage.in, "input_tokens_details": map[string]any{"cached_tokens": p.usage.cached},
			"output_tokens": p.usage.out, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
			"total_tokens": p.usage.in + p.usage.out}}
}

// openAIResponseStream is a streamed Responses API text answer: the
// response created, its message item and text part added, the text's
// deltas, each done, then response.completed with the usage.
func (p *provider) openAIResponseStream(n int) []string {
	seq := 0
	ev := func(typ string, v map[string]any) string {
		v["type"], v["sequence_number"] = typ, seq
		seq++
		return "event: " + typ + "\ndata: " + mustJSON(v)
	}
	done := p.openAIResponse(n, false)
	created := map[string]any{}
	for k, v := range done {
		created[k] = v
	}
	created["status"], created["output"], created["usage"] = "in_progress", []any{}, nil
	itemID := fmt.Sprintf("msg_%d", n)
	item := map[string]any{"type": "message", "id": itemID, "role": "assistant", "status": "in_progress", "content": []any{}}
	part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
	events := []string{
		ev("response.created", map[string]any{"response": created}),
		ev("response.output_item.added", map[string]any{"output_index": 0, "item": item}),
		ev("response.content_part.added", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "part": part}),
	}
	text := ""
	for _, d := range p.texts() {
		text += d
		events = append(events, ev("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": 0,
			"content_index": 0, "delta": d, "logprobs": []any{}}))
	}
	donePart := map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
	doneItem := map[string]any{"type": "message", "id": itemID, "role": "assistant", "status": "completed", "content": []any{donePart}}
	done["output"] = []any{doneItem}
	return append(events,
		ev("response.output_text.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "text": text, "logprobs": []any{}}),
		ev("response.content_part.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "part": donePart}),
		ev("response.output_item.done", map[string]any{"output_index": 0, "item": doneItem}),
		ev("response.completed", map[string]any{"response": done}))
}

func (p *provider) anthropicUsage(out int64) map[string]any {
	return map[string]any{"input_tokens": p.usage.in - p.usage.cached, "cache_creation_input_tokens": 0,
		"cache_read_input_tokens": p.usage.cached, "output_tokens": out}
}

func (p *provider) anthropicMessage(n int, tool bool) map[string]any {
	content := []any{map[string]any{"type": "text", "text": "Still looking."}}
	stop := "end_turn"
	if tool {
		content = []any{map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", n), "name": "web_search",
			"input": json.RawMessage(toolArgs)}}
		stop = "tool_use"
	}
	return map[string]any{"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": p.model,
		"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": p.anthropicUsage(p.usage.out)}
}

// anthropicStream is a streamed message's events: the input's usage in
// message_start, the output's in message_delta, as Anthropic sends them.
func (p *provider) anthropicStream(n int, tool bool) []string {
	ev := func(typ string, v map[string]any) string {
		v["type"] = typ
		return "event: " + typ + "\ndata: " + mustJSON(v)
	}
	events := []string{ev("message_start", map[string]any{"message": map[string]any{"id": fmt.Sprintf("msg_%d", n),
		"type": "message", "role": "assistant", "model": p.model, "content": []any{}, "stop_reason": nil,
		"stop_sequence": nil, "usage": p.anthropicUsage(1)}})}
	stop := "end_turn"
	if tool {
		half := len(toolArgs) / 2
		events = append(events,
			ev("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "tool_use",
				"id": fmt.Sprintf("toolu_%d", n), "name": "web_search", "input": map[string]any{}}}),
			ev("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": toolArgs[:half]}}),
			ev("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": toolArgs[half:]}}))
		stop = "tool_use"
	} else {
		events = append(events, ev("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}}))
		for _, text := range p.texts() {
			events = append(events, ev("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": text}}))
		}
	}
	return append(events,
		ev("content_block_stop", map[string]any{"index": 0}),
		ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": p.usage.out}}),
		ev("message_stop", map[string]any{}))
}
