// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/supervisor"
)

// Options configures an Exporter.
type Options struct {
	Config Config
	// Version is hermeskilld's (service.version); Host the host's name
	// (host.name).
	Version, Host string
	// QueueSize bounds the events waiting to be turned into records and
	// the records and spans waiting to be exported, each (default 2048).
	QueueSize int
	Log       *zap.Logger
}

// DefaultQueueSize is Options.QueueSize's default.
const DefaultQueueSize = 2048

// Exporter exports a host's events. Event never blocks; Shutdown ends
// the export within its bound.
type Exporter struct {
	cfg      Config
	log      *zap.Logger
	in       chan supervisor.Event
	stop     chan struct{} // closed by Shutdown
	abort    chan struct{} // closed when Shutdown's bound has passed
	done     chan struct{} // closed when the worker returned
	stopOnce sync.Once
	stopped  atomic.Bool
	shut     atomic.Bool // Shutdown returned: every queue is empty or given up

	lp     *sdklog.LoggerProvider
	tp     *sdktrace.TracerProvider
	logger log.Logger
	tracer trace.Tracer
	logs   *exporter
	spans  *exporter

	dropped atomic.Uint64 // events refused: the queue was full, or after Shutdown
	runs    map[string]*runSpan
}

// New starts an exporter of the signals cfg turns on. It does not
// connect: the first batch does.
func New(o Options) (*Exporter, error) {
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	res, err := resource.New(context.Background(),
		resource.WithAttributes(
			attribute.String("service.name", "hermeskilld"),
			attribute.String("service.version", o.Version),
			attribute.String("host.name", o.Host),
		),
		resource.WithFromEnv(), // OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME: theirs win
	)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = o.Config.TLS
	tr.MaxIdleConnsPerHost = 2
	client := &http.Client{Transport: tr, Timeout: o.Config.Timeout}
	e := &Exporter{
		cfg: o.Config, log: o.Log, in: make(chan supervisor.Event, o.QueueSize),
		stop: make(chan struct{}), abort: make(chan struct{}), done: make(chan struct{}),
		runs: map[string]*runSpan{},
	}
	newExporter := func(signal, url string, h map[string]string) *exporter {
		return &exporter{signal: signal, url: url, headers: h, gzip: o.Config.Gzip, client: client,
			credits: make(chan struct{}, o.QueueSize)}
	}
	if o.Config.LogsURL != "" {
		e.logs = newExporter("logs", o.Config.LogsURL, o.Config.LogsHeaders)
		e.lp = sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(
			sdklog.NewBatchProcessor(e.logs, sdklog.WithMaxQueueSize(o.QueueSize),
				sdklog.WithExportTimeout(o.Config.Timeout), sdklog.WithExportInterval(time.Second))))
		e.logger = e.lp.Logger(scope)
	}
	if o.Config.TracesURL != "" {
		e.spans = newExporter("traces", o.Config.TracesURL, o.Config.TracesHeaders)
		e.tp = sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSampler(sdktrace.AlwaysSample()),
			sdktrace.WithBatcher(e.spans, sdktrace.WithMaxQueueSize(o.QueueSize),
				sdktrace.WithExportTimeout(o.Config.Timeout), sdktrace.WithBatchTimeout(time.Second)))
		e.tracer = e.tp.Tracer(scope)
	}
	go e.run()
	return e, nil
}

// scope is the instrumentation scope of every record and span.
const scope = "github.com/hermeskill/hermeskilld"

// Event queues ev for export. It never blocks: an event that finds the
// queue full is dropped and counted (Stats.Dropped).
func (e *Exporter) Event(ev supervisor.Event) {
	if e.stopped.Load() {
		e.dropped.Add(1)
		return
	}
	select {
	case e.in <- ev:
	default:
		e.dropped.Add(1)
	}
}

// run turns the events into records and spans, one at a time, until
// Shutdown; it waits for the export to take each (a credit), so that the
// SDK's bounded queues never drop: what cannot wait is dropped at Event,
// and counted.
func (e *Exporter) run() {
	defer close(e.done)
	for {
		select {
		case ev := <-e.in:
			e.handle(ev)
		case <-e.stop:
			for {
				select {
				case ev := <-e.in:
					e.handle(ev)
				default:
					e.endRuns()
					return
				}
			}
		}
	}
}

// take waits for room in x's queue, until Shutdown's bound passes.
func (e *Exporter) take(x *exporter) bool {
	select {
	case x.credits <- struct{}{}:
		x.taken.Add(1)
		return true
	case <-e.abort:
		x.unsent.Add(1)
		return false
	}
}

// Shutdown exports what is queued and stops, within ctx's deadline: what
// is not exported by then is counted (Stats.Unsent). Events after it are
// dropped. It may be called more than once.
func (e *Exporter) Shutdown(ctx context.Context) {
	e.stopOnce.Do(func() {
		e.stopped.Store(true)
		for _, x := range []*exporter{e.logs, e.spans} {
			if x != nil {
				x.final.Store(true)
			}
		}
		close(e.stop)
		select {
		case <-e.done:
		case <-ctx.Done():
			close(e.abort)
			<-e.done
		}
		if e.lp != nil {
			if err := e.lp.Shutdown(ctx); err != nil {
				e.log.Debug("telemetry: logs not all exported at exit", zap.Error(err))
			}
		}
		if e.tp != nil {
			if err := e.tp.Shutdown(ctx); err != nil {
				e.log.Debug("telemetry: spans not all exported at exit", zap.Error(err))
			}
		}
		e.shut.Store(true)
		if s := e.Stats(); s.Lost() > 0 {
			e.log.Warn("telemetry: records and spans not exported", zap.Uint64("dropped", s.Dropped),
				zap.Uint64("failed", s.Failed), zap.Uint64("unsent", s.Unsent), zap.String("last_error", s.LastError))
		}
	})
}

// Close is Shutdown within the configured shutdown timeout.
func (e *Exporter) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.ShutdownTimeout)
	defer cancel()
	e.Shutdown(ctx)
}

// Stats are what was exported and what was lost.
type Stats struct {
	// Exported counts the log records and spans the collector took.
	Exported uint64 `json:"exported"`
	// Dropped counts the events not exported because the export's queue
	// was full (a collector slower than the events, or away).
	Dropped uint64 `json:"dropped"`
	// Failed counts the records and spans whose export failed (after its
	// retries) or that the collector rejected.
	Failed uint64 `json:"failed"`
	// Unsent counts the records and spans still queued when hermeskilld
	// exited and the shutdown's bound ran out.
	Unsent    uint64 `json:"unsent"`
	LastError string `json:"last_error,omitempty"`
}

// Lost is everything not exported.
func (s Stats) Lost() uint64 { return s.Dropped + s.Failed + s.Unsent }

// Stats returns the counts so far. Unsent is known once Shutdown returned.
func (e *Exporter) Stats() Stats {
	s := Stats{Dropped: e.dropped.Load()}
	for _, x := range []*exporter{e.logs, e.spans} {
		if x == nil {
			continue
		}
		exp, fail := x.exported.Load(), x.failed.Load()
		s.Exported += exp
		s.Failed += fail
		s.Unsent += x.unsent.Load()
		if t := x.taken.Load(); e.shut.Load() && t > exp+fail {
			s.Unsent += t - exp - fail
		}
		if m := x.lastErr.Load(); m != nil {
			s.LastError = *m
		}
	}
	return s
}
