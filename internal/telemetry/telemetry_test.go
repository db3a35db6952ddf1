// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestResolve(t *testing.T) {
	t.Parallel()
	c, err := Resolve(Settings{}, env(nil))
	require.NoError(t, err)
	assert.False(t, c.On(), "nothing configured: off")

	c, err = Resolve(Settings{}, env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://traces.example/v1/t",
		"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20x,tenant=a", "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "tenant=b",
		"OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
	}))
	require.NoError(t, err)
	assert.Equal(t, "http://collector:4318/v1/logs", c.LogsURL)
	assert.Equal(t, "https://traces.example/v1/t", c.TracesURL, "the signal's own endpoint, as is")
	assert.Equal(t, map[string]string{"authorization": "Bearer x", "tenant": "b"}, c.LogsHeaders)
	assert.Equal(t, map[string]string{"authorization": "Bearer x", "tenant": "a"}, c.TracesHeaders)
	assert.Equal(t, 2500*time.Millisecond, c.Timeout)
	assert.Equal(t, DefaultShutdownTimeout, c.ShutdownTimeout)
	assert.True(t, c.Gzip)

	c, err = Resolve(Settings{Endpoint: "http://127.0.0.1:4318", Headers: map[string]string{"tenant": "file"}},
		env(map[string]string{"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://elsewhere/v1/logs", "OTEL_TRACES_EXPORTER": "none",
			"OTEL_EXPORTER_OTLP_HEADERS": "tenant=env"}))
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:4318/v1/logs", c.LogsURL, "the setting replaces the environment's endpoints")
	assert.Empty(t, c.TracesURL, "OTEL_TRACES_EXPORTER=none")
	assert.Equal(t, "file", c.LogsHeaders["tenant"])

	c, err = Resolve(Settings{}, env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}))
	require.NoError(t, err)
	assert.False(t, c.On())

	for name, kv := range map[string]map[string]string{
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc: hermeskilld exports OTLP over http/protobuf only": {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		`OTEL_EXPORTER_OTLP_ENDPOINT: "c:4318" must be an absolute http(s) URL`:              {"OTEL_EXPORTER_OTLP_ENDPOINT": "c:4318"},
		`OTEL_EXPORTER_OTLP_HEADERS: "novalue" is not key=value`:                             {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_HEADERS": "novalue"},
		"OTEL_EXPORTER_OTLP_TIMEOUT=10s: must be a number of milliseconds":                   {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TIMEOUT": "10s"},
		"OTEL_LOGS_EXPORTER=console: hermeskilld exports only otlp":                          {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_LOGS_EXPORTER": "console"},
	} {
		_, err := Resolve(Settings{}, env(kv))
		require.ErrorIs(t, err, ErrConfig, name)
		assert.ErrorContains(t, err, name)
	}
	_, err = Resolve(Settings{}, env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_HEADERS": "authorization=%zz"}))
	require.ErrorIs(t, err, ErrConfig)
	assert.NotContains(t, err.Error(), "%zz", "a header's value (a credential) is never in an error")
}

func certEvent(id string) supervisor.Event {
	code := 0
	return supervisor.Event{Type: supervisor.EventCertificate, AgentID: "a", Time: time.Now(),
		Cert: &certs.Certificate{CertID: id, TriggerType: certs.TriggerAuto, TriggerCheck: "max_runtime", Exit: certs.Exit{Code: &code}}}
}

// A collector that refuses every batch (HTTP 400): each record is
// counted as failed, none as exported, and Shutdown returns at once.
func TestExportFailuresAreCounted(t *testing.T) {
	t.Parallel()
	var posts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		assert.Equal(t, "application/x-protobuf", r.Header.Get("Content-Type"))
		assert.Equal(t, "/v1/logs", r.URL.Path)
		http.Error(w, "no", http.StatusBadRequest)
	}))
	defer srv.Close()
	e, err := New(Options{Config: Config{LogsURL: srv.URL + "/v1/logs", Timeout: time.Second, ShutdownTimeout: 5 * time.Second}, Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	for i := range 5 {
		e.Event(certEvent(string(rune('a' + i))))
	}
	e.Close()
	s := e.Stats()
	assert.Equal(t, Stats{Failed: 5, LastError: "logs: POST " + srv.URL + "/v1/logs: 400 Bad Request"}, s)
	assert.Equal(t, uint64(5), s.Lost())
	assert.Positive(t, posts.Load())
	e.Event(certEvent("late"))
	assert.Equal(t, uint64(1), e.Stats().Dropped, "after Shutdown: dropped, counted")
}

// A collector that accepts the connection and never answers: the
// shutdown at exit waits its bound, no more, and what it could not send is
// counted. Events never block, even with the queue full.
func TestShutdownIsBounded(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() { // accept, read nothing, answer nothing
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	const bound = 300 * time.Millisecond
	e, err := New(Options{Config: Config{LogsURL: "http://" + l.Addr().String() + "/v1/logs", Timeout: 10 * time.Second, ShutdownTimeout: bound},
		QueueSize: 4, Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	start := time.Now()
	for range 100 {
		e.Event(certEvent("x"))
	}
	assert.Less(t, time.Since(start), 100*time.Millisecond, "Event never waits for the collector")
	start = time.Now()
	e.Close()
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, bound)
	assert.Less(t, took, bound+2*time.Second, "Shutdown within its bound (and a loaded machine's slack)")
	s := e.Stats()
	assert.Zero(t, s.Exported)
	assert.Equal(t, uint64(100), s.Lost(), "every event is counted lost: %+v", s)
	assert.Positive(t, s.Dropped, "the queue of 4 filled")
}
