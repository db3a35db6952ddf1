// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hermeskill/hermeskilld/internal/gateway"
)

func TestMain(m *testing.M) {
	// net/http's server lingers 500 ms (rstAvoidanceDelay) after answering
	// a request whose body it did not read, then the goroutine ends: the
	// standard library's bounded wait, not a leak of ours.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("net/http.(*conn).closeWriteAndWait"))
}

// Keys of the fake upstreams: they must reach the upstream and nothing
// the agent gets.
const (
	openaiKey    = "sk-openai-SECRET-0123456789"
	anthropicKey = "sk-ant-SECRET-9876543210"
)

// waitRecord bounds a test's wait for a record.
const waitRecord = 10 * time.Second

// fake is an upstream: it records what it was sent and answers with its
// handler.
type fake struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

// seen is a request as the upstream got it.
type seen struct {
	Method, Path, Query string
	Header              http.Header
	Body                []byte
}

func newFake(t testing.TB, h http.HandlerFunc) *fake {
	f := &fake{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body})
		f.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fake) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.reqs...)
}

// env is a running gateway in front of an openai and an anthropic fake.
type env struct {
	gw        *gateway.Gateway
	openai    *fake
	anthropic *fake
	logs      *observer.ObservedLogs
	agent     *http.Client
}

type option func(*gateway.Config)

// newEnv starts a gateway whose "openai" and "anthropic" upstreams are
// fakes answering with oh and ah (nil: 500).
func newEnv(t testing.TB, oh, ah http.HandlerFunc, opts ...option) *env {
	t.Helper()
	unset := func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no handler", 500) }
	if oh == nil {
		oh = unset
	}
	if ah == nil {
		ah = unset
	}
	e := &env{openai: newFake(t, oh), anthropic: newFake(t, ah)}
	core, logs := observer.New(zap.DebugLevel)
	e.logs = logs
	prices, err := gateway.ParsePrices([]byte(`
models:
  gpt-4.1-mini: {input: 0.40, output: 1.60, cached_input: 0.10}
  "claude-sonnet-4*": {input: 3.00, output: 15.00, cached_input: 0.30}
`), "prices.yaml")
	require.NoError(t, err)
	cfg := gateway.Config{
		Upstreams: []gateway.Upstream{
			{Name: "openai", URL: e.openai.URL + "/v1", Style: gateway.OpenAI, KeyFile: keyFile(t, openaiKey)},
			{Name: "anthropic", URL: e.anthropic.URL, Style: gateway.Anthropic, KeyFile: keyFile(t, anthropicKey)},
		},
		Prices: prices,
		Log:    zap.New(core),
	}
	for _, o := range opts {
		o(&cfg)
	}
	e.gw, err = gateway.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.gw.Serve(ctx) }()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	e.agent = &http.Client{Transport: tr}
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		tr.CloseIdleConnections()
		require.NoError(t, e.gw.Close())
	})
	return e
}

func keyFile(t testing.TB, key string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(p, []byte(key+"\n"), 0o600))
	return p
}

// records is an Observer that queues what it is told.
type records chan gateway.Record

func newRecords() records { return make(records, 1024) }

func (rs records) Request(r gateway.Record) {
	select {
	case rs <- r:
	default:
		panic("records: queue full")
	}
}

func (rs records) next(t testing.TB) gateway.Record {
	t.Helper()
	select {
	case r := <-rs:
		return r
	case <-time.After(waitRecord):
		t.Fatal("no record")
		return gateway.Record{}
	}
}

// grant makes a grant and returns it with its environment as a map.
func (e *env) grant(t testing.TB, obs gateway.Observer) (*gateway.Grant, map[string]string) {
	gr := e.gw.Grant("agent-1", obs)
	t.Cleanup(gr.Close)
	vars := map[string]string{}
	for _, kv := range gr.Env() {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	return gr, vars
}

// post sends body to url with the handle in the style's header.
func (e *env) post(t testing.TB, style gateway.Style, url, handle, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if style == gateway.Anthropic {
		req.Header.Set("X-Api-Key", handle)
		req.Header.Set("Anthropic-Version", "2023-06-01")
	} else {
		req.Header.Set("Authorization", "Bearer "+handle)
	}
	resp, err := e.agent.Do(req)
	require.NoError(t, err)
	return resp
}

// readAll reads and closes a response body.
func readAll(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// sse writes events as a server-sent event stream, flushing after each.
// An event is its data, or "event: NAME\ndata: …" as given.
func sse(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, ev := range events {
		if !strings.HasPrefix(ev, "event:") {
			ev = "data: " + ev
		}
		io.WriteString(w, ev+"\n\n")
		w.(http.Flusher).Flush()
	}
}

// events splits a stream the agent got into its events.
func events(t testing.TB, stream string) []string {
	t.Helper()
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(stream, "\n\n"), "\n\n") {
		if ev != "" {
			out = append(out, ev)
		}
	}
	return out
}

// eventReader reads one event at a time from a stream.
type eventReader struct{ br *bufio.Reader }

func (er eventReader) next() (string, error) {
	var ev strings.Builder
	for {
		line, err := er.br.ReadString('\n')
		if err != nil {
			return ev.String() + line, err
		}
		if line == "\n" {
			return strings.TrimSuffix(ev.String(), "\n"), nil
		}
		ev.WriteString(line)
	}
}

func jsonBody(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
