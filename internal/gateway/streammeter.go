// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"bytes"
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// maxToolCalls bounds the tool calls assembled from one stream (each is
// bounded by the arguments' limit): more mark the reading incomplete.
const maxToolCalls = 128

// streamMeter reads a stream's events as they pass.
type streamMeter interface {
	// event reads one event's data (its data lines joined); drop is true
	// for an event the agent must not see.
	event(data []byte) (drop bool)
	// result is what was read; call once, at the end of the stream.
	result() reading
	// progress is what was read so far, for the budget's check after
	// each event (no tool calls assembled).
	progress() reading
	// ending is the events that end the stream in good order, the
	// protocol's own ending of an answer cut short at its output bound,
	// reporting u as its usage: the gateway's cut at the budget.
	ending(u cutUsage) []byte
}

// cutUsage is the usage a stream cut at the budget reports to the agent:
// what it is charged.
type cutUsage struct{ in, out, cached int64 }

// deltaTokens estimates the output tokens of one delta of text, reasoning
// or tool arguments: a token per four bytes, at least one per delta (a
// provider streams a token or a few per event; a token of code or of a
// language other than English is fewer bytes than four, and such deltas
// are counted one each).
func deltaTokens(s string) int64 { return lenTokens(len(s)) }

// lenTokens is deltaTokens of a delta of n bytes.
func lenTokens(n int) int64 {
	if n == 0 {
		return 0
	}
	return max(1, int64(n+3)/4)
}

// rawDeltaTokens is deltaTokens of a delta's member as the upstream sent
// it: a string's text; any other value (content as a list of parts, from
// a provider that sends it so) by its JSON's bytes; nothing for null. A
// member of an unexpected type is counted, never a reason to miss the
// event's usage or tool calls.
func rawDeltaTokens(raw json.RawMessage) int64 {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0, bytes.Equal(raw, []byte("null")):
		return 0
	case raw[0] == '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return deltaTokens(s)
		}
	}
	return deltaTokens(string(raw))
}

// rawInt is a member that should be an integer, 0 when it is not one.
func rawInt(raw json.RawMessage) int64 {
	var n int64
	_ = json.Unmarshal(raw, &n)
	return n
}

func newStreamMeter(ep endpoint, limit int, stripUsage bool) streamMeter {
	switch ep {
	case epChat:
		return &chatStream{limit: limit, strip: stripUsage}
	case epResponses:
		return &responsesStream{limit: limit}
	case epMessages:
		return &messagesStream{limit: limit, open: map[int]*toolArgs{}}
	}
	return nil
}

// chatStream reads a streamed chat completion: chunks carrying deltas,
// tool calls as fragments per choice and index, the usage in a last chunk
// with no choices (when stream_options.include_usage is set), then
// "[DONE]".
type chatStream struct {
	limit int
	strip bool // the gateway asked for usage: drop the usage-only chunk
	// agentUsage: the agent asked for the usage chunk (include_usage),
	// which a cut stream then ends with too.
	agentUsage bool
	r          reading
	calls      []chatCall // in order of (choice, index) once sorted
	// what a cut stream's last chunks repeat: the chunks' id, created and
	// model, the choices seen
	id, created json.RawMessage
	choices     []int
}

type chatCall struct {
	choice, index int
	args          toolArgs
}

func (m *chatStream) event(data []byte) bool {
	if m.scan(data) {
		return false
	}
	return m.decode(data)
}

// decode reads a chunk with encoding/json (and [DONE]): what scan
// declined.
func (m *chatStream) decode(data []byte) bool {
	if bytes.Equal(data, []byte("[DONE]")) {
		m.r.done = true
		return false
	}
	var c struct {
		ID      json.RawMessage `json:"id"`
		Created json.RawMessage `json:"created"`
		Model   string          `json:"model"`
		Choices []struct {
			Index int `json:"index"`
			Delta struct {
				Content          json.RawMessage `json:"content"`
				Refusal          json.RawMessage `json:"refusal"`
				ReasoningContent json.RawMessage `json:"reasoning_content"`
				Reasoning        json.RawMessage `json:"reasoning"`
				ToolCalls        []chatToolCall  `json:"tool_calls"`
				FunctionCall     *struct {
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function_call"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *usageOpenAI     `json:"usage"`
		Error *json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		m.r.incomplete = true
		return false
	}
	if c.Error != nil {
		m.r.upstreamErr = "upstream sent an error event"
	}
	if m.r.model == "" {
		m.r.model = c.Model
	}
	if m.id == nil {
		m.id, m.created = c.ID, c.Created
	}
	for _, ch := range c.Choices {
		d := &ch.Delta
		m.r.counted += rawDeltaTokens(d.Content) + rawDeltaTokens(d.Refusal) + rawDeltaTokens(d.ReasoningContent) + rawDeltaTokens(d.Reasoning)
		if d.FunctionCall != nil {
			m.r.counted += rawDeltaTokens(d.FunctionCall.Arguments)
		}
		if !slices.Contains(m.choices, ch.Index) && len(m.choices) < maxToolCalls {
			m.choices = append(m.choices, ch.Index)
		}
		if ch.FinishReason != nil {
			m.r.addFinish(*ch.FinishReason)
		}
		for _, tc := range ch.Delta.ToolCalls {
			m.r.counted += deltaTokens(tc.Function.Arguments)
			if call := m.call(ch.Index, tc.Index); call != nil {
				if tc.Function.Name != "" {
					call.args.name = tc.Function.Name
				}
				call.args.add(tc.Function.Arguments, m.limit)
			}
		}
	}
	if c.Usage != nil {
		c.Usage.apply(&m.r)
		return m.strip && len(c.Choices) == 0
	}
	return false
}

func (m *chatStream) call(choice, index int) *chatCall {
	for i := range m.calls {
		if m.calls[i].choice == choice && m.calls[i].index == index {
			return &m.calls[i]
		}
	}
	if len(m.calls) == maxToolCalls {
		m.r.incomplete = true
		return nil
	}
	m.calls = append(m.calls, chatCall{choice: choice, index: index})
	return &m.calls[len(m.calls)-1]
}

func (m *chatStream) progress() reading { return m.r }

// ending is a last chunk per choice with finish_reason "length" (its
// output bound reached), the usage chunk when the agent asked for it, and
// [DONE].
func (m *chatStream) ending(u cutUsage) []byte {
	id, created := m.id, m.created
	if len(id) == 0 {
		id = json.RawMessage(`""`)
	}
	if len(created) == 0 {
		created = json.RawMessage("0")
	}
	type choice struct {
		Index        int      `json:"index"`
		Delta        struct{} `json:"delta"`
		FinishReason string   `json:"finish_reason"`
	}
	type chunk struct {
		ID      json.RawMessage `json:"id"`
		Object  string          `json:"object"`
		Created json.RawMessage `json:"created"`
		Model   string          `json:"model"`
		Choices []choice        `json:"choices"`
		Usage   map[string]any  `json:"usage,omitempty"`
	}
	last := chunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: m.r.model, Choices: []choice{}}
	choices := m.choices
	if len(choices) == 0 {
		choices = []int{0}
	}
	for _, i := range choices {
		last.Choices = append(last.Choices, choice{Index: i, FinishReason: "length"})
	}
	var b []byte
	b = appendEvent(b, "", last)
	if m.agentUsage {
		usage := last
		usage.Choices = []choice{}
		usage.Usage = map[string]any{"prompt_tokens": u.in, "completion_tokens": u.out, "total_tokens": u.in + u.out,
			"prompt_tokens_details": map[string]any{"cached_tokens": u.cached}}
		b = appendEvent(b, "", usage)
	}
	return append(b, "data: [DONE]\n\n"...)
}

// appendEvent appends a server-sent event, named name unless empty, whose
// data is v as JSON.
func appendEvent(b []byte, name string, v any) []byte {
	data, err := marshalNoEscape(v)
	if err != nil { // the gateway's own values: not expected
		panic("gateway: an event of a cut stream: " + err.Error())
	}
	if name != "" {
		b = append(append(append(b, "event: "...), name...), '\n')
	}
	return append(append(append(b, "data: "...), data...), "\n\n"...)
}

func (m *chatStream) result() reading {
	slices.SortStableFunc(m.calls, func(a, b chatCall) int {
		// Compared, not subtracted: the upstream's indexes are any ints.
		return cmp.Or(cmp.Compare(a.choice, b.choice), cmp.Compare(a.index, b.index))
	})
	for i := range m.calls {
		m.r.tools = append(m.r.tools, m.calls[i].args.call())
	}
	return m.r
}

// responsesStream reads a streamed Responses API response: typed events;
// each function call complete in a response.output_item.done; the model
// and usage in the final response.completed (or .incomplete, .failed).
type responsesStream struct {
	limit int
	r     reading
	// what a cut stream's response.incomplete repeats: the response as
	// response.created gave it, its output items by output_index (those
	// done, else as added), the last sequence_number
	response json.RawMessage
	items    map[int]outputItem
	kept     int // the items' bytes
	seq      int64
}

// maxKeptItemBytes bounds the output items a Responses stream keeps for
// its ending, should it be cut: past it, the ending lists fewer.
const maxKeptItemBytes = 1 << 20

// outputItem is one item of a response's output, as the stream gave it.
type outputItem struct {
	raw  json.RawMessage
	done bool
}

func (m *responsesStream) event(data []byte) bool {
	if m.scan(data) {
		return false
	}
	return m.decode(data)
}

// decode reads an event with encoding/json: what scan declined.
func (m *responsesStream) decode(data []byte) bool {
	var e struct {
		Type        string          `json:"type"`
		Seq         json.RawMessage `json:"sequence_number"`
		OutputIndex json.RawMessage `json:"output_index"`
		Item        json.RawMessage `json:"item"`
		Delta       json.RawMessage `json:"delta"`
		Response    json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(data, &e); err != nil {
		m.r.incomplete = true
		return false
	}
	m.seq = max(m.seq, rawInt(e.Seq))
	var item *responseItem
	if len(e.Item) > 0 && !bytes.Equal(e.Item, []byte("null")) {
		item = new(responseItem)
		if json.Unmarshal(e.Item, item) != nil {
			m.r.incomplete = true
			return false
		}
	}
	var resp *responseObject
	if len(e.Response) > 0 && !bytes.Equal(e.Response, []byte("null")) {
		resp = new(responseObject)
		if json.Unmarshal(e.Response, resp) != nil {
			m.r.incomplete = true
			return false
		}
	}
	if strings.HasSuffix(e.Type, ".delta") {
		// Text, reasoning, a refusal, a tool call's arguments: each
		// output delta of the API is a string.
		m.r.counted += rawDeltaTokens(e.Delta)
	}
	switch e.Type {
	case "response.output_item.added", "response.output_item.done":
		m.keepItem(int(rawInt(e.OutputIndex)), e.Item, e.Type == "response.output_item.done")
		if e.Type == "response.output_item.done" && item != nil && item.Type == "function_call" {
			if len(m.r.tools) == maxToolCalls {
				m.r.incomplete = true
				break
			}
			m.r.tools = append(m.r.tools, newToolCall(item.Name, []byte(item.Arguments), m.limit))
		}
	case "response.created", "response.in_progress":
		if resp != nil {
			resp.apply(&m.r, false, m.limit)
			m.response = append(m.response[:0], e.Response...)
		}
	case "response.completed", "response.incomplete", "response.failed":
		if resp != nil {
			resp.apply(&m.r, false, m.limit)
		}
		m.r.done = true
		if e.Type == "response.failed" {
			m.r.upstreamErr = "upstream sent response.failed"
		}
	case "error":
		m.r.upstreamErr = "upstream sent an error event"
	}
	return false
}

// keepItem keeps an output item for a cut stream's ending (at most
// maxToolCalls of them).
func (m *responsesStream) keepItem(i int, raw json.RawMessage, done bool) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return
	}
	if m.items == nil {
		m.items = map[int]outputItem{}
	}
	old, ok := m.items[i]
	if !ok && len(m.items) == maxToolCalls || m.kept-len(old.raw)+len(raw) > maxKeptItemBytes {
		return
	}
	m.kept += len(raw) - len(old.raw)
	m.items[i] = outputItem{raw: append(json.RawMessage(nil), raw...), done: done}
}

func (m *responsesStream) result() reading { return m.r }

func (m *responsesStream) progress() reading { return m.r }

// ending is response.incomplete with incomplete_details.reason
// "max_output_tokens": the response as response.created gave it, with
// status "incomplete", the usage charged, and as output the items done
// and those begun (marked "incomplete"; their text is in the deltas the
// agent got).
func (m *responsesStream) ending(u cutUsage) []byte {
	resp := map[string]json.RawMessage{}
	if len(m.response) > 0 && json.Unmarshal(m.response, &resp) != nil {
		resp = map[string]json.RawMessage{}
	}
	set := func(k string, v any) {
		b, err := marshalNoEscape(v)
		if err != nil { // the gateway's own values: not expected
			panic("gateway: an event of a cut stream: " + err.Error())
		}
		resp[k] = b
	}
	if _, ok := resp["object"]; !ok {
		set("object", "response")
	}
	set("status", "incomplete")
	set("incomplete_details", map[string]string{"reason": "max_output_tokens"})
	set("usage", map[string]any{"input_tokens": u.in, "input_tokens_details": map[string]any{"cached_tokens": u.cached},
		"output_tokens": u.out, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": u.in + u.out})
	idx := slices.Sorted(maps.Keys(m.items))
	output := make([]json.RawMessage, 0, len(idx))
	for _, i := range idx {
		it := m.items[i]
		if it.done {
			output = append(output, it.raw)
			continue
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(it.raw, &obj) != nil {
			continue
		}
		obj["status"] = json.RawMessage(`"incomplete"`)
		b, err := marshalNoEscape(obj)
		if err == nil {
			output = append(output, b)
		}
	}
	set("output", output)
	return appendEvent(nil, "response.incomplete", map[string]any{"type": "response.incomplete", "sequence_number": m.seq + 1, "response": resp})
}

// messagesStream reads a streamed Anthropic message: message_start with
// the model and the input's usage, content blocks (a tool_use block's
// input arrives as input_json_delta fragments until its
// content_block_stop), message_delta with the final output_tokens, then
// message_stop.
type messagesStream struct {
	limit int
	r     reading
	tally anthropicTally
	open  map[int]*toolArgs // tool_use blocks by index, until they stop
	// blocks are the content blocks started and not stopped, by index:
	// a cut stream stops them
	blocks []int
}

func (m *messagesStream) event(data []byte) bool {
	if m.scan(data) {
		return false
	}
	return m.decode(data)
}

// decode reads an event with encoding/json: what scan declined.
func (m *messagesStream) decode(data []byte) bool {
	var e struct {
		Type    string `json:"type"`
		Index   int    `json:"index"`
		Message *struct {
			Model string          `json:"model"`
			Usage *usageAnthropic `json:"usage"`
		} `json:"message"`
		ContentBlock *contentBlock `json:"content_block"`
		Delta        *struct {
			Type        string          `json:"type"`
			Text        json.RawMessage `json:"text"`
			Thinking    json.RawMessage `json:"thinking"`
			PartialJSON string          `json:"partial_json"`
			StopReason  string          `json:"stop_reason"`
		} `json:"delta"`
		Usage *usageAnthropic `json:"usage"`
		Error *struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &e); err != nil {
		m.r.incomplete = true
		return false
	}
	switch e.Type {
	case "message_start":
		if e.Message != nil {
			m.r.model = e.Message.Model
			if e.Message.Usage != nil {
				m.tally.add(e.Message.Usage)
				m.tally.apply(&m.r)
			}
		}
	case "content_block_start":
		if !slices.Contains(m.blocks, e.Index) && len(m.blocks) < maxToolCalls {
			m.blocks = append(m.blocks, e.Index)
		}
		if e.ContentBlock != nil && e.ContentBlock.Type == "tool_use" {
			if len(m.open)+len(m.r.tools) >= maxToolCalls {
				m.r.incomplete = true
				break
			}
			m.open[e.Index] = &toolArgs{name: e.ContentBlock.Name}
		}
	case "content_block_delta":
		if e.Delta != nil {
			m.r.counted += rawDeltaTokens(e.Delta.Text) + rawDeltaTokens(e.Delta.Thinking) + deltaTokens(e.Delta.PartialJSON)
		}
		if t := m.open[e.Index]; t != nil && e.Delta != nil && e.Delta.Type == "input_json_delta" {
			t.add(e.Delta.PartialJSON, m.limit)
		}
	case "content_block_stop":
		m.blocks = slices.DeleteFunc(m.blocks, func(i int) bool { return i == e.Index })
		if t := m.open[e.Index]; t != nil {
			m.r.tools = append(m.r.tools, t.call())
			delete(m.open, e.Index)
		}
	case "message_delta":
		if e.Delta != nil && e.Delta.StopReason != "" {
			m.r.finish = append(m.r.finish[:0], e.Delta.StopReason)
		}
		if e.Usage != nil {
			m.tally.add(e.Usage)
			m.tally.apply(&m.r)
			m.r.usage = true
		}
	case "message_stop":
		m.r.done = true
	case "error":
		m.r.upstreamErr = "upstream sent an error event"
		if e.Error != nil && e.Error.Type != "" {
			m.r.upstreamErr += " (" + e.Error.Type + ")"
		}
	}
	return false
}

func (m *messagesStream) result() reading { return m.r }

func (m *messagesStream) progress() reading { return m.r }

// ending stops the content blocks still open, then message_delta with
// stop_reason "max_tokens" (its output bound reached) and the usage
// charged, then message_stop.
func (m *messagesStream) ending(u cutUsage) []byte {
	var b []byte
	for _, i := range m.blocks {
		b = appendEvent(b, "content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	b = appendEvent(b, "message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": "max_tokens", "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": u.out}})
	return appendEvent(b, "message_stop", map[string]string{"type": "message_stop"})
}
