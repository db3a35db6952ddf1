// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
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
	r     reading
	calls []chatCall // in order of (choice, index) once sorted
}

type chatCall struct {
	choice, index int
	args          toolArgs
}

func (m *chatStream) event(data []byte) bool {
	if bytes.Equal(data, []byte("[DONE]")) {
		m.r.done = true
		return false
	}
	var c struct {
		Model   string `json:"model"`
		Choices []struct {
			Index int `json:"index"`
			Delta struct {
				ToolCalls []chatToolCall `json:"tool_calls"`
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
	for _, ch := range c.Choices {
		if ch.FinishReason != nil {
			m.r.addFinish(*ch.FinishReason)
		}
		for _, tc := range ch.Delta.ToolCalls {
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
}

func (m *responsesStream) event(data []byte) bool {
	var e struct {
		Type     string          `json:"type"`
		Item     *responseItem   `json:"item"`
		Response *responseObject `json:"response"`
	}
	if err := json.Unmarshal(data, &e); err != nil {
		m.r.incomplete = true
		return false
	}
	switch e.Type {
	case "response.output_item.done":
		if e.Item != nil && e.Item.Type == "function_call" {
			if len(m.r.tools) == maxToolCalls {
				m.r.incomplete = true
				break
			}
			m.r.tools = append(m.r.tools, newToolCall(e.Item.Name, []byte(e.Item.Arguments), m.limit))
		}
	case "response.created", "response.in_progress":
		if e.Response != nil {
			e.Response.apply(&m.r, false, m.limit)
		}
	case "response.completed", "response.incomplete", "response.failed":
		if e.Response != nil {
			e.Response.apply(&m.r, false, m.limit)
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

func (m *responsesStream) result() reading { return m.r }

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
}

func (m *messagesStream) event(data []byte) bool {
	var e struct {
		Type    string `json:"type"`
		Index   int    `json:"index"`
		Message *struct {
			Model string          `json:"model"`
			Usage *usageAnthropic `json:"usage"`
		} `json:"message"`
		ContentBlock *contentBlock `json:"content_block"`
		Delta        *struct {
			Type        string `json:"type"`
			PartialJSON string `json:"partial_json"`
			StopReason  string `json:"stop_reason"`
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
		if e.ContentBlock != nil && e.ContentBlock.Type == "tool_use" {
			if len(m.open)+len(m.r.tools) >= maxToolCalls {
				m.r.incomplete = true
				break
			}
			m.open[e.Index] = &toolArgs{name: e.ContentBlock.Name}
		}
	case "content_block_delta":
		if t := m.open[e.Index]; t != nil && e.Delta != nil && e.Delta.Type == "input_json_delta" {
			t.add(e.Delta.PartialJSON, m.limit)
		}
	case "content_block_stop":
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
