// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"bufio"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/gateway"
)

// percentile is the p-th percentile (0 < p < 1) of sorted durations, in
// milliseconds.
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(int(float64(len(sorted))*p), len(sorted)-1)
	return float64(sorted[i]) / float64(time.Millisecond)
}

// BenchmarkAddedLatency compares a non-streamed chat completion through
// the gateway with the same request sent straight to the same local fake
// upstream, alternately on one keep-alive client. Reported: each path's
// p50 and p99, and what the gateway adds (the difference of the
// percentiles), in milliseconds.
func BenchmarkAddedLatency(b *testing.B) {
	e := newEnv(b, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, chatCompletion)
	}, nil, quiet)
	gr, vars := e.grant(b, discard{})
	body := `{"model":"gpt-4.1-mini","messages":[{"role":"user","content":"hello"}]}`
	send := func(url, auth string) time.Duration {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+auth)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := e.agent.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(start)
	}
	viaGateway := vars["OPENAI_BASE_URL"] + "/chat/completions"
	direct := e.openai.URL + "/v1/chat/completions"
	for range 200 { // warm both connections
		send(direct, openaiKey)
		send(viaGateway, vars["OPENAI_API_KEY"])
	}
	var d, g []time.Duration
	b.ResetTimer()
	for b.Loop() {
		d = append(d, send(direct, openaiKey))
		g = append(g, send(viaGateway, vars["OPENAI_API_KEY"]))
	}
	b.StopTimer()
	slices.Sort(d)
	slices.Sort(g)
	b.ReportMetric(percentile(d, 0.50), "direct-p50-ms")
	b.ReportMetric(percentile(d, 0.99), "direct-p99-ms")
	b.ReportMetric(percentile(g, 0.50), "gateway-p50-ms")
	b.ReportMetric(percentile(g, 0.99), "gateway-p99-ms")
	b.ReportMetric(percentile(g, 0.50)-percentile(d, 0.50), "added-p50-ms")
	b.ReportMetric(percentile(g, 0.99)-percentile(d, 0.99), "added-p99-ms")
	if m := gr.Metered(); m.Requests < int64(b.N) {
		b.Fatalf("metered %d requests of %d", m.Requests, b.N)
	}
}

// quiet logs nothing: the benchmarks measure the gateway, not a test
// logger that keeps every entry.
func quiet(c *gateway.Config) { c.Log = zap.NewNop() }

type discard struct{}

func (discard) Request(gateway.Record) {}

// BenchmarkStreamEventToAgent measures the time from the fake upstream's
// write of one chat completion chunk to the agent's read of it through the
// gateway (metered, with the usage option added), one event per
// iteration on one stream.
func BenchmarkStreamEventToAgent(b *testing.B) {
	next := make(chan struct{})
	stamps := make(chan time.Time, 1)
	done := make(chan struct{})
	chunk := chatChunks(false)[1]
	e := newEnv(b, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		for {
			select {
			case <-next:
			case <-done:
				sse(w, "[DONE]")
				return
			case <-r.Context().Done():
				return
			}
			t0 := time.Now()
			io.WriteString(w, "data: "+chunk+"\n\n")
			w.(http.Flusher).Flush()
			stamps <- t0
		}
	}, nil, quiet)
	_, vars := e.grant(b, discard{})
	resp := e.post(b, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], `{"model":"gpt-4.1-mini","stream":true}`)
	defer resp.Body.Close()
	er := eventReader{bufio.NewReader(resp.Body)}
	lat := make([]time.Duration, 0, 1024)
	b.ResetTimer()
	for b.Loop() {
		next <- struct{}{}
		if _, err := er.next(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		lat = append(lat, t1.Sub(<-stamps))
	}
	b.StopTimer()
	close(done)
	_, _ = io.Copy(io.Discard, resp.Body)
	slices.Sort(lat)
	b.ReportMetric(percentile(lat, 0.50), "event-p50-ms")
	b.ReportMetric(percentile(lat, 0.99), "event-p99-ms")
}

// BenchmarkConcurrentStreams holds 500 streams open at once, each having
// passed all its events but the last, and measures the memory in use then
// (heap and stacks, after a GC) and the goroutines, through the gateway
// and, for the baseline, straight to the upstream; each measurement on
// new servers and a new client. The agents and the fake upstream live in
// the same process, so total-bytes/stream counts their side too; the
// difference per stream is the gateway's cost.
func BenchmarkConcurrentStreams(b *testing.B) {
	var direct, via holding
	for b.Loop() {
		direct = holdStreams(b, false)
		via = holdStreams(b, true)
	}
	b.ReportMetric(via.bytes, "total-bytes/stream")
	b.ReportMetric(via.bytes-direct.bytes, "gateway-bytes/stream")
	b.ReportMetric(via.goroutines-direct.goroutines, "gateway-goroutines/stream")
}

// holding is what one stream held open costs.
type holding struct{ bytes, goroutines float64 }

const heldStreams = 500

func holdStreams(b *testing.B, viaGateway bool) holding {
	events := chatChunks(false)
	release := make(chan struct{})
	e := newEnv(b, func(w http.ResponseWriter, r *http.Request) {
		sse(w, events[:len(events)-1]...) // all but [DONE]
		select {
		case <-release:
			sse(w, "[DONE]")
		case <-r.Context().Done():
		}
	}, nil, quiet)
	_, vars := e.grant(b, discard{})
	url, handle := e.openai.URL+"/v1/chat/completions", openaiKey
	if viaGateway {
		url, handle = vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"]
	}
	tr := &http.Transport{MaxIdleConnsPerHost: heldStreams}
	defer tr.CloseIdleConnections()
	agent := &http.Client{Transport: tr}

	inUse := func() (uint64, int) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse + ms.StackInuse, runtime.NumGoroutine()
	}
	memBefore, gBefore := inUse()
	var got, finished sync.WaitGroup
	got.Add(heldStreams)
	errs := make(chan error, heldStreams)
	for range heldStreams {
		finished.Go(func() {
			var once sync.Once
			ready := func() { once.Do(got.Done) }
			defer ready()
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"model":"gpt-4.1-mini","stream":true}`))
			req.Header.Set("Authorization", "Bearer "+handle)
			resp, err := agent.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			er := eventReader{bufio.NewReader(resp.Body)}
			for range len(events) - 1 {
				if _, err := er.next(); err != nil {
					errs <- err
					return
				}
			}
			ready()
			_, _ = io.Copy(io.Discard, resp.Body)
		})
	}
	got.Wait()
	memDuring, gDuring := inUse()
	close(release)
	finished.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return holding{
		bytes:      float64(int64(memDuring)-int64(memBefore)) / heldStreams,
		goroutines: float64(gDuring-gBefore) / heldStreams,
	}
}
