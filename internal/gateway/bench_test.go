// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// BenchmarkUpstreamChurn sends non-streamed completions from c agents at
// once (each on a keep-alive connection of its own, as agents are) through
// the gateway and, for comparison, through a bare httputil.ReverseProxy on
// the gateway's upstream transport with the same pool bound; the pool
// bound is the gateway's default (its connection bound, the concurrency
// it admits) or 64 (the fixed bound it had before). Reported per path:
// the connections the fake upstream accepted per second once warm
// (new-conns/s: with a pool smaller than c, most requests open one) and
// requests per second.
func BenchmarkUpstreamChurn(b *testing.B) {
	for _, c := range []int{64, 256, 1024} {
		for _, pool := range []int{0, 64} {
			name := fmt.Sprintf("c=%d/pool=%d", c, pool)
			if pool == 0 {
				name = fmt.Sprintf("c=%d/pool=default", c)
			}
			for _, path := range []string{"gateway", "bare-proxy"} {
				b.Run(name+"/"+path, func(b *testing.B) { churn(b, c, pool, path == "gateway") })
			}
		}
	}
}

func churn(b *testing.B, c, pool int, viaGateway bool) {
	var accepted atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, chatCompletion)
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted.Add(1)
		}
	}
	up.Start()
	defer up.Close()
	// Bounds above c, so that no agent connection is refused.
	cfg := gateway.Config{Upstreams: []gateway.Upstream{{Name: "openai", URL: up.URL + "/v1", Style: gateway.OpenAI}},
		Log: zap.NewNop(), MaxConns: 2 * c, MaxConnsPerUser: 2 * c, UpstreamIdleConns: pool}
	gw, err := gateway.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx) }()
	defer func() { cancel(); <-served; _ = gw.Close() }()
	gr := gw.Grant("agent-1", discard{})
	defer gr.Close()
	vars := map[string]string{}
	for _, kv := range gr.Env() {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	url, auth := vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"]
	if !viaGateway {
		cfg.UpstreamIdleConns = cmp.Or(pool, 2*c) // the gateway's default: its connection bound
		target, _ := neturl.Parse(up.URL)
		tr := gateway.NewTransport(cfg)
		defer tr.CloseIdleConnections()
		proxy := httptest.NewServer(&httputil.ReverseProxy{Transport: tr, Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.URL.Path = "/v1/chat/completions"
		}})
		defer proxy.Close()
		url = proxy.URL + "/chat/completions"
	}
	agents := &http.Transport{MaxIdleConns: 2 * c, MaxIdleConnsPerHost: 2 * c}
	defer agents.CloseIdleConnections()
	client := &http.Client{Transport: agents}
	body := `{"model":"gpt-4.1-mini","messages":[{"role":"user","content":"hello"}]}`
	send := func() error {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+auth)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	// c agents at once, n requests each.
	run := func(n int) error {
		var wg sync.WaitGroup
		errs := make(chan error, c)
		for range c {
			wg.Go(func() {
				for range n {
					if err := send(); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		return <-errs
	}
	if err := run(4); err != nil { // warm: every agent connection and the pool
		b.Fatal(err)
	}
	before := accepted.Load()
	b.ResetTimer()
	start := time.Now()
	per := max(b.N/c, 1)
	if err := run(per); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start).Seconds()
	b.StopTimer()
	b.ReportMetric(float64(accepted.Load()-before)/elapsed, "new-conns/s")
	b.ReportMetric(float64(per*c)/elapsed, "req/s")
}
