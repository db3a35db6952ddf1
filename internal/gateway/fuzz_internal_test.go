// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"
)

// fuzzEndpoints are the streamed APIs, by the fuzz input's selector.
var fuzzEndpoints = []endpoint{epChat, epResponses, epMessages}

// relayAll runs a stream through the relay and its meter, reading it in
// pieces of at most bufSize bytes.
func relayAll(t *testing.T, stream []byte, ep endpoint, strip bool, bufSize, maxEvent int) (out []byte, rd reading, skipped bool) {
	return relayAllBuf(t, stream, ep, strip, bufSize, maxEvent, 32<<10)
}

// relayAllBuf is relayAll through a copy buffer of copySize bytes.
func relayAllBuf(t *testing.T, stream []byte, ep endpoint, strip bool, bufSize, maxEvent, copySize int) (out []byte, rd reading, skipped bool) {
	w := httptest.NewRecorder()
	m := newStreamMeter(ep, 256, strip)
	rl := &relay{src: pieceReader{bytes.NewReader(stream), bufSize}, maxEvent: maxEvent, meter: m}
	if err := pumpBuf(w, rl, copySize); err != nil {
		t.Fatalf("relay of a whole stream: %v", err)
	}
	return w.Body.Bytes(), m.result(), rl.skipped
}

// FuzzStreamMeters feeds arbitrary streams through the relay and each
// stream meter (chat completions with tool-call fragments, the Responses
// API, Anthropic messages). It must never panic, and what it forwards and
// reads must not depend on how the upstream's bytes were cut into reads:
// the same stream read 16 bytes at a time and 64 KiB at a time gives the
// same bytes to the agent and the same reading. A stream the meter drops
// nothing from reaches the agent byte for byte; tool calls stay within
// their bounds.
func FuzzStreamMeters(f *testing.F) {
	f.Add([]byte("data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"ls\",\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\n"+
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]}}]}\n\n"+
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\ndata: [DONE]\n\n"), uint8(0), true)
	f.Add([]byte("event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"function_call\",\"name\":\"f\",\"arguments\":\"{}\"}}\n\n"+
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"model\":\"m\",\"usage\":{\"input_tokens\":5,\"output_tokens\":6}}}\n\n"), uint8(1), false)
	f.Add([]byte("event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"c\",\"usage\":{\"input_tokens\":9}}}\r\n\r\n"+
		"data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"name\":\"t\"}}\n\n"+
		"data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"x\\\":\"}}\n\n"+
		"data: {\"type\":\"content_block_stop\",\"index\":1}\n\n"+
		"data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":2}}\n\ndata: {\"type\":\"message_stop\"}"), uint8(2), false)
	f.Add([]byte(": comment\n\ndata: x\ndata: y\n\n\n\ndata:"), uint8(0), false)
	f.Fuzz(func(t *testing.T, stream []byte, sel uint8, strip bool) {
		ep := fuzzEndpoints[int(sel)%len(fuzzEndpoints)]
		strip = strip && ep == epChat
		const maxEvent = 512
		small, rdSmall, skSmall := relayAll(t, stream, ep, strip, 16, maxEvent)
		big, rdBig, skBig := relayAll(t, stream, ep, strip, 64<<10, maxEvent)
		if !bytes.Equal(small, big) {
			t.Fatalf("forwarded bytes depend on the reads:\n16:  %q\n64K: %q", small, big)
		}
		if skSmall != skBig {
			t.Fatalf("skipped %v with 16-byte reads, %v with 64 KiB", skSmall, skBig)
		}
		if !sameReading(rdSmall, rdBig) {
			t.Fatalf("reading depends on the reads:\n16:  %+v\n64K: %+v", rdSmall, rdBig)
		}
		// The relay reads the upstream into the copy buffer: a small one
		// (events held past it, a full buffer with bytes read still to
		// take) and the gateway's own give the same.
		for _, size := range []int{minRelayRead / 2, minRelayRead + 100, relayBufSize} {
			for _, reads := range []int{7, 64 << 10} {
				got, rd, sk := relayAllBuf(t, stream, ep, strip, reads, maxEvent, size)
				if !bytes.Equal(got, big) || sk != skBig || !sameReading(rd, rdBig) {
					t.Fatalf("through a %d-byte copy buffer, %d-byte reads: forwarded %q, skipped %v, read %+v; want %q, %v, %+v",
						size, reads, got, sk, rd, big, skBig, rdBig)
				}
			}
		}
		if !strip && !bytes.Equal(small, stream) {
			t.Fatalf("a stream with nothing dropped was changed:\nin:  %q\nout: %q", stream, small)
		}
		if len(small) > len(stream) {
			t.Fatalf("forwarded %d bytes of a %d-byte stream", len(small), len(stream))
		}
		if len(rdSmall.tools) > maxToolCalls {
			t.Fatalf("%d tool calls, over %d", len(rdSmall.tools), maxToolCalls)
		}
		for _, tc := range rdSmall.tools {
			if b, err := hex.DecodeString(tc.ArgsSHA256); err != nil || len(b) != 32 {
				t.Fatalf("tool call hash %q", tc.ArgsSHA256)
			}
		}
	})
}

func sameReading(a, b reading) bool {
	if a.model != b.model || a.in != b.in || a.out != b.out || a.cached != b.cached || a.usage != b.usage ||
		a.incomplete != b.incomplete || a.done != b.done || a.upstreamErr != b.upstreamErr || len(a.tools) != len(b.tools) {
		return false
	}
	for i := range a.tools {
		if a.tools[i] != b.tools[i] {
			return false
		}
	}
	return true
}

// FuzzParseRequest checks the request reader against encoding/json's map
// decoding, which matches keys exactly: for a body without duplicate
// keys, "stream", "background" and "model" are what the map holds, and
// a valid JSON object is always read as one.
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","stream":true,"ſtream":false,"stream_options":{"include_usage":true},"max_tokens":5}`))
	f.Add([]byte(`{"stream":false,"stream":true}`))
	f.Add([]byte(`{"Background":true,"background":false,"max_output_tokens":1e9}`))
	f.Add([]byte(` {"model":"\u006d"} `))
	f.Fuzz(func(t *testing.T, body []byte) {
		info, err := parseRequest(body)
		var m map[string]any
		isObject := json.Unmarshal(body, &m) == nil && m != nil
		if err != nil {
			if !errors.Is(err, errDuplicateKey) {
				t.Fatalf("error %v is not a duplicate key", err)
			}
			return
		}
		if info.json != isObject {
			t.Fatalf("read as an object: %v; encoding/json: %v", info.json, isObject)
		}
		if !isObject {
			return
		}
		if want := m["stream"] == true; info.stream != want {
			t.Fatalf("stream %v, want %v", info.stream, want)
		}
		if want := m["background"] == true; info.background != want {
			t.Fatalf("background %v, want %v", info.background, want)
		}
		if s, _ := m["model"].(string); info.model != s {
			t.Fatalf("model %q, want %q", info.model, s)
		}
		if info.maxOut < 0 {
			t.Fatalf("max output %d", info.maxOut)
		}
	})
}
