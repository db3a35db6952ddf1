// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/pkg/client"
)

// The wire's hash is the client's: the same arguments, however the model
// wrote them, hash as client.ArgsHash hashes the agent's own value.
func TestArgsHashIsTheClients(t *testing.T) {
	for _, c := range []struct {
		wire string
		args any
	}{
		{`{"q": "café", "n": 3}`, map[string]any{"n": 3, "q": "café"}},
		{`{"n":3,"q":"caf\u00e9"}`, map[string]any{"q": "café", "n": 3}},
		{`{ "b": [1, 2.5, {"z": null, "a": true}], "a": "<&>" }`, map[string]any{"a": "<&>", "b": []any{1, 2.5, map[string]any{"a": true, "z": nil}}}},
		{`{"big": 12345678901234567890}`, json.RawMessage(`{"big":12345678901234567890}`)},
		{``, map[string]any{}},
		{`  `, struct{}{}},
		{`"just a string"`, "just a string"},
	} {
		want, err := client.ArgsHash(c.args)
		require.NoError(t, err)
		assert.Equal(t, want, argsHash([]byte(c.wire)), c.wire)
	}
	notJSON := `{"q": "unterminated`
	sum := sha256.Sum256([]byte(notJSON))
	assert.Equal(t, hex.EncodeToString(sum[:]), argsHash([]byte(notJSON)), "arguments that are not JSON hash as their bytes")
}

func TestToolArgsBounded(t *testing.T) {
	var ta toolArgs
	ta.name = "write_file"
	ta.add(`{"content":"`, 32)
	ta.add(strings.Repeat("x", 100), 32)
	ta.add(`"}`, 32)
	tc := ta.call()
	assert.True(t, tc.Truncated)
	assert.Len(t, ta.args, 32)
	sum := sha256.Sum256([]byte(`{"content":"` + strings.Repeat("x", 20)))
	assert.Equal(t, hex.EncodeToString(sum[:]), tc.ArgsSHA256, "the hash of what was kept")
	assert.Equal(t, "write_file", tc.Name)
}

func TestChatStreamToolCallsOfSeveralChoices(t *testing.T) {
	m := newStreamMeter(epChat, 1<<10, false)
	for _, ev := range []string{
		`{"model":"m","choices":[{"index":1,"delta":{"tool_calls":[{"index":0,"function":{"name":"b","arguments":"{}"}}]}}]}`,
		`{"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"name":"a1","arguments":"{\"x\""}}]}},{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"a0","arguments":""}}]}}]}`,
		`{"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":":1}"}}]}}]}`,
		`{"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}`,
		`not json`,
		`[DONE]`,
	} {
		assert.False(t, m.event([]byte(ev)), "nothing is dropped unless the gateway asked for usage")
	}
	r := m.result()
	var names []string
	for _, tc := range r.tools {
		names = append(names, tc.Name)
	}
	assert.Equal(t, []string{"a0", "a1", "b"}, names, "by choice, then index")
	h, _ := client.ArgsHash(map[string]int{"x": 1})
	assert.Equal(t, h, r.tools[1].ArgsSHA256)
	assert.True(t, r.usage)
	assert.True(t, r.done)
	assert.True(t, r.incomplete, "an event that was not JSON")
}

func TestMessagesStreamDropsUnfinishedToolUse(t *testing.T) {
	m := newStreamMeter(epMessages, 1<<10, false)
	m.event([]byte(`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","name":"rm","input":{}}}`))
	m.event([]byte(`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\":"}}`))
	r := m.result()
	assert.Empty(t, r.tools, "a tool call the stream never finished is not one the agent can run")
	assert.False(t, r.done)
}

func TestMeterBodyNotJSON(t *testing.T) {
	for _, ep := range []endpoint{epChat, epResponses, epEmbeddings, epMessages} {
		r := meterBody(ep, []byte("<html>bad gateway</html>"), 1<<10)
		assert.True(t, r.incomplete)
		assert.False(t, r.usage)
	}
}

func TestWithIncludeUsage(t *testing.T) {
	for in, want := range map[string]string{
		`{"stream":true,"model":"m"}`:                                    `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`,
		`{"stream":true,"stream_options":null}`:                          `{"stream":true,"stream_options":{"include_usage":true}}`,
		`{"stream":true,"stream_options":{"include_usage":false,"x":1}}`: `{"stream":true,"stream_options":{"include_usage":true,"x":1}}`,
	} {
		got, err := withIncludeUsage([]byte(in))
		require.NoError(t, err)
		assert.JSONEq(t, want, string(got), in)
	}
	_, err := withIncludeUsage([]byte(`[1]`))
	assert.Error(t, err)
}

// The output a stream's deltas add is counted a token per four bytes, at
// least one per delta; a member of an unexpected type (content as a list
// of parts) is counted by its JSON and does not lose the event.
func TestStreamCountsDeltas(t *testing.T) {
	chat := newStreamMeter(epChat, 1<<10, false)
	chat.event([]byte(`{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`))
	chat.event([]byte(`{"id":"c","choices":[{"index":0,"delta":{"content":"Hello, world"}}]}`))                                        // 12 bytes: 3
	chat.event([]byte(`{"id":"c","choices":[{"index":0,"delta":{"reasoning_content":"é"}}]}`))                                         // 2 bytes: 1
	chat.event([]byte(`{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\":1}"}}]}}]}`)) // 7 bytes: 2
	chat.event([]byte(`{"id":"c","choices":[{"index":0,"delta":{"content":[{"type":"text","text":"hi"}]}}]}`))                         // 30 bytes of JSON: 8
	chat.event([]byte(`{"id":"c","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9}}`))
	rd := chat.result()
	assert.EqualValues(t, 3+1+2+8, rd.counted)
	assert.True(t, rd.usage, "the usage chunk after a delta of an unexpected type")
	assert.False(t, rd.incomplete)

	resp := newStreamMeter(epResponses, 1<<10, false)
	resp.event([]byte(`{"type":"response.output_text.delta","sequence_number":3,"delta":"abcdefgh"}`))       // 2
	resp.event([]byte(`{"type":"response.reasoning_summary_text.delta","sequence_number":4,"delta":"a"}`))   // 1
	resp.event([]byte(`{"type":"response.function_call_arguments.delta","sequence_number":5,"delta":"{}"}`)) // 1
	resp.event([]byte(`{"type":"response.output_text.done","sequence_number":6,"text":"abcdefgh"}`))
	assert.EqualValues(t, 4, resp.progress().counted)

	msgs := newStreamMeter(epMessages, 1<<10, false)
	msgs.event([]byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"abcde"}}`))                // 2
	msgs.event([]byte(`{"type":"content_block_delta","index":1,"delta":{"type":"thinking_delta","thinking":"abc"}}`))          // 1
	msgs.event([]byte(`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}}`)) // 1
	assert.EqualValues(t, 4, msgs.progress().counted)
}
