// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// exporter sends one signal's batches to its OTLP/HTTP endpoint as
// protobuf (application/x-protobuf), as the OTLP specification's HTTP
// transport says: a POST per batch, retried on 429, 502, 503 and 504
// (after the Retry-After the collector asks for, else a doubling backoff)
// until the batch processor's export deadline. It counts what it
// exported and what it could not, and gives the pipeline back its credits
// (one per item) once each batch is done with, delivered or not.
type exporter struct {
	signal   string // "logs" or "traces"
	url      string
	headers  map[string]string
	gzip     bool
	client   *http.Client
	credits  chan struct{}
	taken    atomic.Uint64 // items that took a credit: queued for export
	unsent   atomic.Uint64 // items that found no credit before Shutdown's bound
	exported atomic.Uint64
	failed   atomic.Uint64
	lastErr  atomic.Pointer[string]
	// final: hermeskilld is exiting; a failed batch is not retried (a
	// collector that is down must not hold the exit for its bound).
	final atomic.Bool
}

var (
	_ sdklog.Exporter       = (*exporter)(nil)
	_ sdktrace.SpanExporter = (*exporter)(nil)
)

// Export sends log records.
func (e *exporter) Export(ctx context.Context, records []sdklog.Record) error {
	if len(records) == 0 {
		return nil
	}
	return e.send(ctx, logsRequest(records), len(records))
}

// ExportSpans sends spans.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	return e.send(ctx, tracesRequest(spans), len(spans))
}

// ForceFlush has nothing to flush: every batch is sent as it comes.
func (e *exporter) ForceFlush(context.Context) error { return nil }

// Shutdown has nothing to release.
func (e *exporter) Shutdown(context.Context) error { return nil }

// retryBackoff is the first wait before a retry; it doubles each time.
const retryBackoff = 250 * time.Millisecond

func (e *exporter) send(ctx context.Context, body []byte, n int) error {
	defer e.release(n)
	if e.gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(body) //nolint:errcheck // a bytes.Buffer does not fail
		zw.Close()     //nolint:errcheck
		body = buf.Bytes()
	}
	wait := retryBackoff
	for {
		retry, after, err := e.post(ctx, body, n)
		if err == nil {
			return nil
		}
		if !retry || e.final.Load() {
			return e.fail(n, err)
		}
		if after > 0 {
			wait = after
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return e.fail(n, fmt.Errorf("%w (then %w)", err, ctx.Err()))
		case <-t.C:
		}
		wait *= 2
	}
}

// post sends body once. A partial success counts the items the collector
// rejected as failed and the rest as exported.
func (e *exporter) post(ctx context.Context, body []byte, n int) (retry bool, after time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return false, 0, err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if e.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return ctx.Err() == nil, 0, err
	}
	defer resp.Body.Close()
	rb, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch resp.StatusCode {
	case http.StatusOK:
		if rerr == nil {
			if bad, msg, perr := rejected(rb); perr == nil && bad > 0 {
				bad = min(bad, int64(n))
				e.failed.Add(uint64(bad))
				e.exported.Add(uint64(int64(n) - bad))
				e.note(fmt.Sprintf("%s: the collector rejected %d of %d: %s", e.signal, bad, n, msg))
				return false, 0, nil
			}
		}
		e.exported.Add(uint64(n))
		return false, 0, nil
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		s, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return true, time.Duration(min(max(s, 0), 60)) * time.Second, fmt.Errorf("%s: POST %s: %s", e.signal, e.url, resp.Status)
	default:
		return false, 0, fmt.Errorf("%s: POST %s: %s", e.signal, e.url, resp.Status)
	}
}

func (e *exporter) fail(n int, err error) error {
	e.failed.Add(uint64(n))
	e.note(err.Error())
	return err
}

func (e *exporter) note(msg string) { e.lastErr.Store(&msg) }

// release gives back n credits (never more than were taken: a batch the
// SDK exports at shutdown holds only items that took one).
func (e *exporter) release(n int) {
	for range n {
		select {
		case <-e.credits:
		default:
			return
		}
	}
}
