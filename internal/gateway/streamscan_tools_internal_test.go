// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// toolTurn is one streamed answer asking for a tool, in each protocol:
// text deltas around a call whose arguments come in fragments (escaped
// quotes, a non-ASCII character, an escape split between two fragments),
// then the usage. args is the call's arguments whole.
func toolTurn(ep endpoint, name, args string) string {
	frags := []string{args[:5], args[5:11], args[11:]}
	var b strings.Builder
	ev := func(event, data string) {
		if event != "" {
			fmt.Fprintf(&b, "event: %s\n", event)
		}
		fmt.Fprintf(&b, "data: %s\n\n", data)
	}
	q := func(s string) string { // s as a JSON string
		v, err := marshalNoEscape(s)
		if err != nil {
			panic(err)
		}
		return string(v)
	}
	switch ep {
	case epChat:
		chunk := func(delta string, finish string) {
			ev("", `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":`+delta+`,"finish_reason":`+finish+`}]}`)
		}
		chunk(`{"role":"assistant","content":""}`, "null")
		chunk(`{"content":"Let me look."}`, "null")
		chunk(`{"content":" One moment…"}`, "null")
		chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":`+q(name)+`,"arguments":""}}]}`, "null")
		for _, f := range frags {
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+q(f)+`}}]}`, "null")
		}
		chunk(`{}`, `"tool_calls"`)
		ev("", `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":31,"total_tokens":151}}`)
		ev("", "[DONE]")
	case epResponses:
		ev("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"r1","object":"response","model":"gpt-4.1","status":"in_progress","output":[]}}`)
		ev("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":1,"item_id":"m1","output_index":0,"content_index":0,"delta":"Let me look."}`)
		ev("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":2,"item_id":"m1","output_index":0,"content_index":0,"delta":" One moment…"}`)
		ev("response.output_item.added", `{"type":"response.output_item.added","sequence_number":3,"output_index":1,"item":{"type":"function_call","id":"fc1","call_id":"call_1","name":`+q(name)+`,"arguments":"","status":"in_progress"}}`)
		for i, f := range frags {
			ev("response.function_call_arguments.delta", fmt.Sprintf(`{"type":"response.function_call_arguments.delta","sequence_number":%d,"item_id":"fc1","output_index":1,"delta":%s}`, 4+i, q(f)))
		}
		ev("response.function_call_arguments.done", `{"type":"response.function_call_arguments.done","sequence_number":7,"item_id":"fc1","output_index":1,"arguments":`+q(args)+`}`)
		ev("response.output_item.done", `{"type":"response.output_item.done","sequence_number":8,"output_index":1,"item":{"type":"function_call","id":"fc1","call_id":"call_1","name":`+q(name)+`,"arguments":`+q(args)+`,"status":"completed"}}`)
		ev("response.completed", `{"type":"response.completed","sequence_number":9,"response":{"id":"r1","object":"response","model":"gpt-4.1","status":"completed","usage":{"input_tokens":120,"output_tokens":31,"input_tokens_details":{"cached_tokens":0}}}}`)
	case epMessages:
		ev("message_start", `{"type":"message_start","message":{"id":"msg_1","model":"claude-sonnet-4-20250514","usage":{"input_tokens":120,"output_tokens":1}}}`)
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me look."}}`)
		ev("ping", `{"type": "ping"}`)
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" One moment…"}}`)
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
		ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":`+q(name)+`,"input":{}}}`)
		for _, f := range frags {
			ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":`+q(f)+`}}`)
		}
		ev("content_block_stop", `{"type":"content_block_stop","index":1}`)
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":31}}`)
		ev("message_stop", `{"type":"message_stop"}`)
	}
	return b.String()
}

// eventsOf is the data of each event of an event stream.
func eventsOf(stream string) [][]byte {
	var out [][]byte
	for ev := range strings.SplitSeq(stream, "\n\n") {
		var data []byte
		for line := range strings.SplitSeq(ev, "\n") {
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				data = append(data, v...)
			}
		}
		if data != nil {
			out = append(out, data)
		}
	}
	return out
}

// scanner is a stream meter's cheap path.
type scanner interface{ scan(data []byte) bool }

// TestStreamScanToolCallsAsDecoded: for each protocol, an agent's turns
// asking for tools (the same call three times over, then another) read
// through the relay, which scans the text deltas and decodes the rest,
// give the meter exactly what a decode of every event gives: the tool
// calls' names and argument hashes, the tokens counted from the deltas
// (the arguments' included), the usage; so tool_loop fires on the same
// turn with the same message and the budgets count the same tokens. The
// tool-argument deltas of chat completions (tool_calls[].function.arguments)
// and of Anthropic (input_json_delta) are decoded, not scanned; those of
// the Responses API (response.function_call_arguments.delta) are scanned
// for their tokens only, the call being read from its
// response.output_item.done.
func TestStreamScanToolCallsAsDecoded(t *testing.T) {
	const args = `{"path":"/tmp/caf\u00e9","pattern":"a\"b\\c","n":3}`
	calls := []struct{ name, args string }{{"grep", args}, {"grep", args}, {"grep", args}, {"read_file", `{"path":"/etc/hosts","max":100}`}}
	for _, p := range []struct {
		name string
		ep   endpoint
	}{{"chat", epChat}, {"responses", epResponses}, {"messages", epMessages}} {
		ep := p.ep
		t.Run(p.name, func(t *testing.T) {
			now := time.Unix(1_700_000_000, 0)
			engine := func() *symptoms.Engine {
				return symptoms.New(symptoms.Config{Metered: true, Checks: config.Checks{ToolLoop: &config.ToolLoop{Repeats: 3}}}, now)
			}
			viaScan, viaDecode := engine(), engine()
			var scanFired, decodeFired []symptoms.Symptom
			for turn, c := range calls {
				stream := toolTurn(ep, c.name, c.args)
				var scanned, toolDeltas, toolDeltasScanned int
				for _, data := range eventsOf(stream) {
					ok := newStreamMeter(ep, DefaultMaxToolArgsBytes, true).(scanner).scan(data)
					if ok {
						scanned++
					}
					if bytes.Contains(data, []byte(`"tool_calls":[{"index":0,"function":{"arguments":`)) ||
						bytes.Contains(data, []byte(`"type":"response.function_call_arguments.delta"`)) || bytes.Contains(data, []byte(`"input_json_delta"`)) {
						toolDeltas++
						if ok {
							toolDeltasScanned++
						}
					}
				}
				require.Positive(t, scanned, "no event took the cheap path")
				require.Equal(t, 3, toolDeltas)
				if ep == epResponses {
					assert.Equal(t, 3, toolDeltasScanned, "the Responses API's argument deltas are scanned")
				} else {
					assert.Zero(t, toolDeltasScanned, "a tool call's deltas are decoded")
				}

				m := newStreamMeter(ep, DefaultMaxToolArgsBytes, true)
				rl := &relay{src: bufio.NewReaderSize(strings.NewReader(stream), relayBufSize), maxEvent: DefaultMaxEventBytes, meter: m}
				out, err := io.ReadAll(rl)
				require.NoError(t, err)
				assert.NotContains(t, string(out), `"usage":{"prompt_tokens"`, "the usage chunk the gateway asked for is dropped")
				got := m.result()

				d := newStreamMeter(ep, DefaultMaxToolArgsBytes, true).(decoder)
				for _, data := range eventsOf(stream) {
					d.decode(data)
				}
				want := d.result()
				require.Equal(t, want, got, "turn %d", turn)
				require.Len(t, got.tools, 1)
				assert.Equal(t, c.name, got.tools[0].Name)
				assert.Equal(t, argsHash([]byte(c.args)), got.tools[0].ArgsSHA256)
				assert.Equal(t, deltaTokens("Let me look.")+deltaTokens(" One moment…")+
					deltaTokens(c.args[:5])+deltaTokens(c.args[5:11])+deltaTokens(c.args[11:]), got.counted, "tokens counted from the deltas")

				now = now.Add(time.Second)
				tool := func(r reading) []symptoms.ToolCall {
					var out []symptoms.ToolCall
					for _, tc := range r.tools {
						out = append(out, symptoms.ToolCall{Name: tc.Name, ArgsSHA256: tc.ArgsSHA256})
					}
					return out
				}
				scanFired = append(scanFired, viaScan.ObserveMetered(uint64(got.in+got.out), 0, true, got.model, tool(got), now)...)
				decodeFired = append(decodeFired, viaDecode.ObserveMetered(uint64(want.in+want.out), 0, true, want.model, tool(want), now)...)
				if turn == 2 {
					require.Len(t, scanFired, 1, "tool_loop fires on the third same call")
					assert.Equal(t, symptoms.ToolLoop, scanFired[0].Check)
				}
			}
			assert.Equal(t, decodeFired, scanFired)
			assert.Equal(t, viaDecode.State(), viaScan.State())
		})
	}
}
