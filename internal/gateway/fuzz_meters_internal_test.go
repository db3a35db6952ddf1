// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/pkg/client"
)

// The fuzz targets below feed arbitrary upstream bytes through the meters.
// Seeds here and under testdata/fuzz/FuzzXxx run with every `go test`;
// `make test-fuzz` fuzzes each target briefly.

// Realistic streams of each style, for the seeds.
const (
	fuzzChatStream = `data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"}}]}

data: {"id":"c1","model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"web_search","arguments":""}}]}}]}

data: {"id":"c1","model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\":"}}]}}]}

data: {"id":"c1","model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"go\"}"}}]}}]}

data: {"id":"c1","model":"gpt-4.1-mini","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":30,"prompt_tokens_details":{"cached_tokens":100}}}

data: [DONE]

`
	fuzzResponsesStream = `event: response.created
data: {"type":"response.created","response":{"model":"gpt-4.1","output":[]}}

event: response.output_item.done
data: {"type":"response.output_item.done","item":{"type":"function_call","name":"ls","arguments":"{\"dir\":\"/tmp\"}"}}

event: response.completed
data: {"type":"response.completed","response":{"model":"gpt-4.1","usage":{"input_tokens":50,"output_tokens":7,"input_tokens_details":{"cached_tokens":0}}}}

`
	fuzzMessagesStream = `event: message_start
data: {"type":"message_start","message":{"model":"claude-sonnet-4-20250514","usage":{"input_tokens":25,"cache_read_input_tokens":10,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"bash","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"cmd\": \"l"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"s\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: ping
data: {"type": "ping"}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":42}}

event: message_stop
data: {"type":"message_stop"}

`
)

// fuzzPrices prices every model, so that every reading is costed.
func fuzzPrices(t testing.TB) *Prices {
	p, err := ParsePrices([]byte("models:\n  gpt-4.1-mini: {input: 0.40, output: 1.60, cached_input: 0.10}\ndefault_price: {input: 3, output: 15}\n"), "p.yaml")
	require.NoError(t, err)
	return p
}

// requireSaneReading checks what every reading must satisfy, whatever the
// upstream sent: counts never negative, the cached tokens part of the
// input's, the recorded sum not wrapped, every tool call well formed, and a
// cost that is a finite, non-negative number.
func requireSaneReading(t *testing.T, rd reading, prices *Prices) {
	require.GreaterOrEqual(t, rd.in, int64(0), "input tokens")
	require.GreaterOrEqual(t, rd.out, int64(0), "output tokens")
	require.GreaterOrEqual(t, rd.cached, int64(0), "cached tokens")
	require.LessOrEqual(t, rd.cached, rd.in, "cached tokens are input tokens")
	rec := Record{InputTokens: rd.in, OutputTokens: rd.out}
	require.GreaterOrEqual(t, rec.Tokens(), int64(0), "the tokens' sum does not wrap")
	for _, tc := range rd.tools {
		_, err := hex.DecodeString(tc.ArgsSHA256)
		require.NoError(t, err)
		require.Len(t, tc.ArgsSHA256, 64)
	}
	usd, priced := prices.Cost(rd.model, rd.in, rd.out, rd.cached)
	if rd.model != "" {
		require.True(t, priced)
	}
	require.False(t, math.IsNaN(usd) || math.IsInf(usd, 0), "cost %v", usd)
	require.GreaterOrEqual(t, usd, 0.0)
}

// dropLog wraps a meter and keeps the data of the events it dropped.
type dropLog struct {
	streamMeter
	dropped [][]byte
}

func (d *dropLog) event(data []byte) bool {
	drop := d.streamMeter.event(data)
	if drop {
		d.dropped = append(d.dropped, bytes.Clone(data))
	}
	return drop
}

// fuzzRelay relays src through a relay reading bufSize bytes at a time.
func fuzzRelay(t *testing.T, src []byte, bufSize, maxEvent int, meter streamMeter) []byte {
	w := &countingFlusher{ResponseRecorder: httptest.NewRecorder()}
	rl := &relay{src: pieceReader{bytes.NewReader(src), bufSize}, maxEvent: maxEvent, meter: meter}
	require.NoError(t, pump(w, rl))
	return w.Body.Bytes()
}

// FuzzStreamMeter relays arbitrary upstream bytes as a stream of each
// metered endpoint (openai chat and responses, anthropic messages): the
// relay forwards them unchanged (less the usage chunk the gateway asked
// for itself), and the meter's reading is sane.
func FuzzStreamMeter(f *testing.F) {
	for _, s := range []struct {
		ep     endpoint
		stream string
	}{
		{epChat, fuzzChatStream},
		{epChat, strings.ReplaceAll(fuzzChatStream, "\n", "\r\n")},
		{epResponses, fuzzResponsesStream},
		{epMessages, fuzzMessagesStream},
		{epMessages, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"},
		{epChat, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":-5,\"completion_tokens\":9223372036854775807}}\n\n"},
		{epMessages, "data: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":9223372036854775807,\"cache_read_input_tokens\":9223372036854775807}}\n\n"},
		{epChat, ": keep-alive\n\ndata: {\"choices\":[{\"index\":-9223372036854775808,\"delta\":{\"tool_calls\":[{\"index\":9223372036854775807}]}},{\"index\":1,\"delta\":{\"tool_calls\":[{\"index\":0}]}}]}\n\ndata: [DONE]"},
	} {
		f.Add(uint8(s.ep), true, uint16(1<<10), uint8(16), []byte(s.stream))
		f.Add(uint8(s.ep), false, uint16(8), uint8(0), []byte(s.stream))
	}
	prices := fuzzPrices(f)
	f.Fuzz(func(t *testing.T, ep uint8, strip bool, limit uint16, buf uint8, data []byte) {
		e := []endpoint{epChat, epResponses, epMessages}[int(ep)%3]
		bufSize := 16 + int(buf) // bufio's least
		maxEvent := 256 + int(limit)

		// Forward only: byte for byte.
		require.Equal(t, string(data), string(fuzzRelay(t, data, bufSize, maxEvent, nil)))

		m := &dropLog{streamMeter: newStreamMeter(e, int(limit), strip)}
		out := fuzzRelay(t, data, bufSize, maxEvent, m)
		switch {
		case len(m.dropped) == 0:
			require.Equal(t, string(data), string(out), "nothing dropped: relayed unchanged")
		default:
			require.True(t, e == epChat && strip, "only the chat meter drops, and only the usage it asked for")
			require.Less(t, len(out), len(data))
			for _, d := range m.dropped {
				var c struct {
					Choices []json.RawMessage `json:"choices"`
					Usage   json.RawMessage   `json:"usage"`
				}
				require.NoError(t, json.Unmarshal(d, &c))
				require.Empty(t, c.Choices, "a dropped chunk carries no choices")
			}
		}
		rd := m.result()
		requireSaneReading(t, rd, prices)
		require.LessOrEqual(t, len(rd.tools), maxToolCalls)
	})
}

// FuzzStreamMeterBody reads arbitrary non-streamed bodies of each metered
// endpoint.
func FuzzStreamMeterBody(f *testing.F) {
	for _, s := range []struct {
		ep   endpoint
		body string
	}{
		{epChat, `{"id":"c1","model":"gpt-4.1-mini","choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"web_search","arguments":"{\"q\":\"go\"}"}}]}}],"usage":{"prompt_tokens":12,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}}`},
		{epResponses, `{"model":"gpt-4.1","output":[{"type":"message"},{"type":"function_call","name":"ls","arguments":"{}"}],"usage":{"input_tokens":5,"output_tokens":6}}`},
		{epEmbeddings, `{"model":"text-embedding-3-small","data":[{"embedding":[0.1]}],"usage":{"prompt_tokens":8}}`},
		{epMessages, `{"model":"claude-sonnet-4-20250514","content":[{"type":"text","text":"ok"},{"type":"tool_use","name":"bash","input":{"cmd":"ls"}}],"usage":{"input_tokens":10,"cache_creation_input_tokens":4,"cache_read_input_tokens":6,"output_tokens":2}}`},
		{epMessages, `{"model":"m","usage":{"input_tokens":-1,"cache_read_input_tokens":5,"output_tokens":-9}}`},
		{epChat, `{"model":"m","usage":{"prompt_tokens":9223372036854775807,"input_tokens":1}}`},
	} {
		f.Add(uint8(s.ep), uint16(1<<10), []byte(s.body))
	}
	prices := fuzzPrices(f)
	f.Fuzz(func(t *testing.T, ep uint8, limit uint16, body []byte) {
		e := []endpoint{epChat, epResponses, epEmbeddings, epMessages}[int(ep)%4]
		rd := meterBody(e, body, int(limit))
		requireSaneReading(t, rd, prices)
		if !json.Valid(body) {
			require.True(t, rd.incomplete)
		}
	})
}

// FuzzToolCallAssembly streams a tool call's arguments in arbitrary
// fragments, in both styles that fragment them: the assembled call is the
// one the whole arguments make (the fragmentation never shows), truncated
// exactly when they pass the limit, and hashed as the agents hash them.
func FuzzToolCallAssembly(f *testing.F) {
	f.Add("web_search", []byte(`{"q": "go fuzzing", "n": 3}`), []byte{3, 0, 7, 1}, uint16(1<<10))
	f.Add("bash", []byte(`{"cmd":"ls -la /tmp"}`), []byte{1}, uint16(4))
	f.Add("", []byte(``), []byte{}, uint16(0))
	f.Add("x", []byte("{\"a\":\"\xe2\x82\xac\"}"), []byte{4, 1}, uint16(6))
	f.Add("n", []byte(`{"a":1.0,"b":-0,"c":[1e400]}`), []byte{2, 2, 2}, uint16(100))
	f.Add("bad", []byte("not json \xff"), []byte{5}, uint16(100))
	f.Fuzz(func(t *testing.T, name string, args, cuts []byte, limit uint16) {
		var frags []string
		rest := string(args)
		for _, c := range cuts {
			n := min(int(c), len(rest))
			frags = append(frags, rest[:n])
			rest = rest[n:]
		}
		frags = append(frags, rest)
		// A JSON string carries valid UTF-8 only: the upstream's fragments
		// are whole characters.
		valid := utf8.ValidString(name)
		for _, p := range frags {
			valid = valid && utf8.ValidString(p)
		}
		want := newToolCall(name, args, int(limit))
		require.Equal(t, len(args) > int(limit), want.Truncated)
		require.Equal(t, name, want.Name)
		if !want.Truncated && json.Valid(args) && len(bytes.TrimSpace(args)) > 0 {
			h, err := client.ArgsHash(json.RawMessage(args))
			if err == nil {
				require.Equal(t, h, want.ArgsSHA256, "hashed as client.ArgsHash hashes")
			}
		}

		// Assembled directly, fragment by fragment.
		var ta toolArgs
		ta.name = name
		for _, p := range frags {
			ta.add(p, int(limit))
		}
		require.Equal(t, want, ta.call())
		require.LessOrEqual(t, len(ta.args), int(limit))

		q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
		// Through the chat meter: one call, its name first, then its
		// fragments, among another choice's call.
		chat := newStreamMeter(epChat, int(limit), false)
		chat.event([]byte(`{"choices":[{"index":1,"delta":{"tool_calls":[{"index":0,"function":{"name":"other","arguments":"{}"}}]}}]}`))
		chat.event([]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"function":{"name":` + q(name) + `}}]}}]}`))
		for _, p := range frags {
			chat.event([]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"function":{"arguments":` + q(p) + `}}]}}]}`))
		}
		rd := chat.result()
		require.Len(t, rd.tools, 2)
		if valid {
			require.Equal(t, want, rd.tools[0], "choice 0 sorts first")
		}

		// Through the messages meter.
		msgs := newStreamMeter(epMessages, int(limit), false)
		msgs.event([]byte(`{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","name":` + q(name) + `,"input":{}}}`))
		for _, p := range frags {
			msgs.event([]byte(`{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":` + q(p) + `}}`))
		}
		msgs.event([]byte(`{"type":"content_block_stop","index":3}`))
		rd = msgs.result()
		require.Len(t, rd.tools, 1)
		if valid {
			require.Equal(t, want, rd.tools[0])
		}
	})
}

// FuzzToolCallIndexes sends tool-call fragments of arbitrary choice and
// tool indexes: at most maxToolCalls calls are kept, in (choice, index)
// order.
func FuzzToolCallIndexes(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 0, 1, 255, 255})
	f.Add([]byte{128, 0, 127, 0, 0, 128})
	f.Fuzz(func(t *testing.T, idx []byte) {
		m := newStreamMeter(epChat, 64, false).(*chatStream)
		huge := []int64{math.MinInt64, -1, 0, 1, math.MaxInt64}
		type key struct{ c, i int64 }
		seen := map[key]bool{}
		for i := 0; i+1 < len(idx); i += 2 {
			c, n := int64(idx[i])-128, int64(idx[i+1])
			if idx[i]&0x80 != 0 && idx[i]&0x40 != 0 {
				c = huge[int(idx[i])%len(huge)]
			}
			if idx[i+1]&0x80 != 0 && idx[i+1]&0x40 != 0 {
				n = huge[int(idx[i+1])%len(huge)]
			}
			seen[key{c, n}] = true
			m.event([]byte(`{"choices":[{"index":` + strconv.FormatInt(c, 10) + `,"delta":{"tool_calls":[{"index":` + strconv.FormatInt(n, 10) + `,"function":{"name":"t","arguments":"{}"}}]}}]}`))
		}
		rd := m.result()
		require.Len(t, rd.tools, min(len(seen), maxToolCalls))
		require.Equal(t, len(seen) > maxToolCalls, rd.incomplete)
		for i := 1; i < len(m.calls); i++ {
			a, b := m.calls[i-1], m.calls[i]
			require.True(t, a.choice < b.choice || a.choice == b.choice && a.index < b.index, "sorted: %v before %v", a, b)
		}
	})
}
