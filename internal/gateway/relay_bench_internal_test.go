// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// discardFlusher is the agent's side of BenchmarkRelayChatStream: writes
// and flushes counted, nothing kept.
type discardFlusher struct {
	h               http.Header
	writes, flushes int
}

func (d *discardFlusher) Header() http.Header         { return d.h }
func (d *discardFlusher) WriteHeader(int)             {}
func (d *discardFlusher) Write(b []byte) (int, error) { d.writes++; return len(b), nil }
func (d *discardFlusher) Flush()                      { d.flushes++ }

// BenchmarkRelayChatStream relays a metered chat completion stream of 20
// content chunks, the usage chunk (dropped: the gateway asked for it) and
// [DONE], from a source that hands it over whole, as an upstream read
// does when the events came together: the meter's and the relay's own
// cost per stream, without sockets. writes/op is what the agent's
// connection gets.
func BenchmarkRelayChatStream(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n")
	for range 20 {
		sb.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"content":" token"},"finish_reason":null}]}` + "\n\n")
	}
	sb.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":20,"total_tokens":32}}` + "\n\n")
	sb.WriteString("data: [DONE]\n\n")
	stream := []byte(sb.String())
	w := &discardFlusher{h: http.Header{}}
	src := bytes.NewReader(stream)
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(stream)
		m := newStreamMeter(epChat, DefaultMaxToolArgsBytes, true)
		if err := pump(w, &relay{src: src, maxEvent: DefaultMaxEventBytes, meter: m}); err != nil {
			b.Fatal(err)
		}
		if rd := m.result(); !rd.done || !rd.usage {
			b.Fatalf("reading %+v", rd)
		}
	}
	b.ReportMetric(float64(w.writes)/float64(b.N), "writes/op")
}
