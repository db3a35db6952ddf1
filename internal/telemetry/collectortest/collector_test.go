// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package collectortest

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry"
)

// sink is what the collector's pipeline delivered to its exporter.
type sink struct {
	mu    sync.Mutex
	logs  []record
	spans []span
}

// record is one log record with its resource's attributes.
type record struct {
	resource, attrs map[string]any
	event, body     string
	severity        plog.SeverityNumber
	traceID, spanID string
}

type span struct {
	resource, attrs map[string]any
	name            string
	kind            ptrace.SpanKind
	traceID, spanID string
	parentID        string
	start, end      time.Time
	status          ptrace.StatusCode
}

func (s *sink) consumeLogs(_ context.Context, ld plog.Logs) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rl := range ld.ResourceLogs().All() {
		res := rl.Resource().Attributes().AsRaw()
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				s.logs = append(s.logs, record{resource: res, attrs: lr.Attributes().AsRaw(), event: lr.EventName(),
					body: lr.Body().AsString(), severity: lr.SeverityNumber(),
					traceID: lr.TraceID().String(), spanID: lr.SpanID().String()})
			}
		}
	}
	return nil
}

func (s *sink) consumeTraces(_ context.Context, td ptrace.Traces) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range td.ResourceSpans().All() {
		res := rs.Resource().Attributes().AsRaw()
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				s.spans = append(s.spans, span{resource: res, attrs: sp.Attributes().AsRaw(), name: sp.Name(), kind: sp.Kind(),
					traceID: sp.TraceID().String(), spanID: sp.SpanID().String(), parentID: sp.ParentSpanID().String(),
					start: sp.StartTimestamp().AsTime(), end: sp.EndTimestamp().AsTime(), status: sp.Status().Code()})
			}
		}
	}
	return nil
}

// logsOf are the records of event name (hermeskill.certificate_written, …).
func (s *sink) logsOf(event string) []record {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []record
	for _, r := range s.logs {
		if r.event == event {
			out = append(out, r)
		}
	}
	return out
}

func (s *sink) allSpans() []span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]span(nil), s.spans...)
}

type sinkConfig struct{}

// quiet is the collector's own telemetry: none (its logger, meter and
// tracer are no-ops), so that it needs no configuration.
var quiet = telemetry.NewFactory(func() component.Config { return &struct{}{} })

// sinkFactory is the exporter component "sink", delivering to s.
func sinkFactory(s *sink) exporter.Factory {
	typ := component.MustNewType("sink")
	return exporter.NewFactory(typ, func() component.Config { return &sinkConfig{} },
		exporter.WithLogs(func(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
			return exporterhelper.NewLogs(ctx, set, cfg, s.consumeLogs)
		}, component.StabilityLevelDevelopment),
		exporter.WithTraces(func(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
			return exporterhelper.NewTraces(ctx, set, cfg, s.consumeTraces)
		}, component.StabilityLevelDevelopment))
}

// startCollector runs a collector (an OTLP/HTTP receiver on loopback,
// the sink as its exporter, for logs and traces) until the test ends, and
// returns its endpoint (http://127.0.0.1:PORT) and its sink.
func startCollector(t *testing.T) (string, *sink) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	s := &sink{}
	cfg := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
exporters:
  sink: {}
service:
  pipelines:
    logs: {receivers: [otlp], exporters: [sink]}
    traces: {receivers: [otlp], exporters: [sink]}
`, addr)
	col, err := otelcol.NewCollector(otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "collectortest", Version: "test"},
		Factories: func() (otelcol.Factories, error) {
			rec, err := otelcol.MakeFactoryMap(otlpreceiver.NewFactory())
			if err != nil {
				return otelcol.Factories{}, err
			}
			exp, err := otelcol.MakeFactoryMap(sinkFactory(s))
			return otelcol.Factories{Receivers: rec, Exporters: exp, Telemetry: quiet}, err
		},
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: confmap.ResolverSettings{
			URIs: []string{"yaml:" + cfg}, ProviderFactories: []confmap.ProviderFactory{yamlprovider.NewFactory()},
		}},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- col.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		col.Shutdown()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Error("the collector did not stop")
		}
	})
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil && col.GetState() == otelcol.StateRunning
	}, 20*time.Second, 10*time.Millisecond, "the collector's OTLP receiver never listened")
	return "http://" + addr, s
}
