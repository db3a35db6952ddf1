// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// decoder is a stream meter's decode, the reading scan must match.
type decoder interface {
	streamMeter
	decode(data []byte) bool
}

// FuzzStreamScan reads arbitrary events (one per line of the input) with
// each meter twice: through event, which scans what it can, and through
// decode alone (encoding/json). After every event the two meters must be
// in the same state: the scan reads exactly what the decode reads, or
// declines.
func FuzzStreamScan(f *testing.F) {
	for _, s := range []string{fuzzChatStream, fuzzResponsesStream, fuzzMessagesStream} {
		for ep := range uint8(3) {
			f.Add(ep, []byte(strings.ReplaceAll(strings.ReplaceAll(s, "\n\n", "\n"), "data: ", "")))
		}
	}
	for _, ev := range []string{
		`{"id":"c1","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}`,
		`{"id":"c1","model":"m","choices":[{"index":1,"delta":{"content":"\u00e9t\u00e9","reasoning":"r"}},{"index":0,"delta":{"refusal":null}}]}`,
		`{"ID":"x","Model":"M","Choices":[{"Index":2,"Delta":{"Content":"a","reasoning_content":["x",1]}}]}`,
		`{"model":"m","choices":[{"index":0,"delta":{"content":"a","content":"bb"}}]}`,
		`{"model":"m","choices":[{"index":1.0,"delta":{"content":"a"}}]}`,
		`{"model":"m","choices":[{"index":0,"delta":{"content":"caf\xc3"}}]}`,
		`{"model":7,"choices":[]}`,
		`{"model":"m","choices":[{"index":9223372036854775808,"delta":{}}]} `,
		`{"model":"m"} x`,
		`{"type":"response.output_text.delta","sequence_number":4,"output_index":0,"delta":"Hi there"}`,
		`{"type":"response.output_text.delta","sequence_number":1.5,"delta":"\n"}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":99999999999999999999,"delta":"{\"a\""}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm","signature":"s"}}`,
		`{"type":"content_block_delta","index":"0","delta":{"type":"text_delta","text":"x"}}`,
		`{"type":"ping"}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"},"x":[[[[{"y":[true,false,null,-0.5e+3]}]]]]}`,
		"{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\tb\"}}",
		`{"typ\u0065":"content_block_delta","index":0,"delta":{"text":"abc"}}`,
	} {
		for ep := range uint8(3) {
			f.Add(ep, []byte(ev))
		}
	}
	// An agent's turn asking for a tool in each protocol
	// (toolTurn): text deltas, the call's argument deltas, the usage.
	for sel, ep := range fuzzEndpoints {
		f.Add(uint8(sel), bytes.Join(eventsOf(toolTurn(ep, "grep", `{"path":"/tmp/caf\u00e9","pattern":"a\"b\\c","n":3}`)), []byte("\n")))
	}
	f.Fuzz(func(t *testing.T, ep uint8, input []byte) {
		e := fuzzEndpoints[int(ep)%len(fuzzEndpoints)]
		scanned := newStreamMeter(e, 64, true).(decoder)
		decoded := newStreamMeter(e, 64, true).(decoder)
		for ev := range bytes.SplitSeq(input, []byte("\n")) {
			require.Equal(t, decoded.decode(ev), scanned.event(ev), "drop of %q", ev)
			require.Equal(t, decoded, scanned, "after %q", ev)
		}
		require.Equal(t, decoded.result(), scanned.result())
	})
}

// TestStreamScanTakesTextDeltas: the events that only add text are read
// by the scan, without an allocation; those that carry more are left to
// the decode.
func TestStreamScanTakesTextDeltas(t *testing.T) {
	for _, c := range []struct {
		ep         endpoint
		first      string // read first: the model and id
		delta      string // scanned
		notScanned []string
	}{
		{epChat, `{"id":"c1","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"content":" world"},"finish_reason":null}]}`,
			[]string{`{"id":"c1","choices":[],"usage":{"prompt_tokens":1}}`, `{"choices":[{"index":0,"delta":{"tool_calls":[]}}]}`,
				`{"error":{"message":"x"}}`, `{"choices":[],"mod\u0065l":"m"}`, `[DONE]`}},
		{epResponses, `{"type":"response.created","response":{"model":"gpt-4.1"}}`,
			`{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":" world"}`,
			[]string{`{"type":"response.output_item.done","item":{"type":"function_call"}}`, `{"type":"response.completed","response":{}}`, `{"type":"error"}`}},
		{epMessages, `{"type":"message_start","message":{"model":"claude-sonnet-4-20250514","usage":{"input_tokens":3}}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" world"}}`,
			[]string{`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{"}}`,
				`{"type":"message_delta","delta":{},"usage":{"output_tokens":2}}`, `{"type":"content_block_stop","index":0}`}},
	} {
		m := newStreamMeter(c.ep, 64, false).(interface {
			decoder
			scan([]byte) bool
		})
		m.event([]byte(c.first))
		before := m.progress().counted
		delta := []byte(c.delta)
		require.True(t, m.scan(delta), "%s", c.delta)
		require.Equal(t, before+2, m.progress().counted, "\" world\" is 2 tokens")
		require.Zero(t, testing.AllocsPerRun(100, func() { m.scan(delta) }), "%s", c.delta)
		for _, ev := range c.notScanned {
			require.False(t, m.scan([]byte(ev)), "%s", ev)
		}
	}
}
