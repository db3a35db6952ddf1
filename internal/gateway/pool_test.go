// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/gateway"
)

// The upstream pool holds as many connections as the agents can keep busy
// at once: a second round of 100 concurrent requests (above the 64 the
// pool was once bounded by) opens no new upstream connection. (With the
// bound set to 64 the second round opens 36: BenchmarkUpstreamChurn
// measures that churn.)
func TestUpstreamPoolHoldsConcurrency(t *testing.T) {
	const concurrent = 100
	var accepted atomic.Int64
	var (
		mu      sync.Mutex
		arrived int
		release chan struct{}
	)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every request of a round waits for the others: all
		// of them hold an upstream connection at once.
		mu.Lock()
		ch := release
		if arrived++; arrived == concurrent {
			close(ch)
		}
		mu.Unlock()
		select {
		case <-ch:
		case <-r.Context().Done():
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, chatCompletion)
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted.Add(1)
		}
	}
	up.Start()
	t.Cleanup(up.Close)
	gw, err := gateway.New(gateway.Config{Upstreams: []gateway.Upstream{{Name: "openai", URL: up.URL + "/v1", Style: gateway.OpenAI}},
		Log: zap.NewNop(), MaxConns: 512, MaxConnsPerUser: 512})
	require.NoError(t, err)
	require.Equal(t, 512, gw.UpstreamIdleConns(), "the pool is bounded by the gateway's connection bound")
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-served); require.NoError(t, gw.Close()) })
	gr := gw.Grant("agent-1", discard{})
	t.Cleanup(gr.Close)
	var url, handle string
	for _, kv := range gr.Env() {
		if v, ok := strings.CutPrefix(kv, "OPENAI_BASE_URL="); ok {
			url = v + "/chat/completions"
		}
		if v, ok := strings.CutPrefix(kv, "OPENAI_API_KEY="); ok {
			handle = v
		}
	}
	agents := &http.Transport{MaxIdleConnsPerHost: concurrent}
	t.Cleanup(agents.CloseIdleConnections)
	round := func() int64 {
		mu.Lock()
		arrived, release = 0, make(chan struct{})
		mu.Unlock()
		var wg sync.WaitGroup
		for range concurrent {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"model":"gpt-4.1-mini"}`))
				req.Header.Set("Authorization", "Bearer "+handle)
				resp, err := agents.RoundTrip(req)
				if !assert.NoError(t, err) {
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
			})
		}
		wg.Wait()
		return accepted.Load()
	}
	first := round()
	require.Equal(t, int64(concurrent), first, "one upstream connection per request in flight")
	second := round() - first
	assert.Zero(t, second, "upstream connections opened again at the same concurrency")
	t.Logf("upstream connections: %d in the first round, %d new in the second", first, second)
}
