// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package collectortest checks hermeskilld's OpenTelemetry export against
// a real OpenTelemetry Collector, built here from the collector's own Go
// modules (otelcol, the OTLP receiver) with an exporter of this package
// that keeps what the collector's pipeline delivers. The real
// `hermeskilld supervise` and `hermeskilld daemon`, built from this
// repository, kill agents with OTEL_EXPORTER_OTLP_ENDPOINT (or the daemon
// file's telemetry section) pointing at the collector on loopback; the
// tests read the certificates' log records and the gateway's request
// spans the collector received.
//
// It is a module of its own so that the collector is never a dependency
// of hermeskilld: run its tests from this directory with go test ./...
// (make test does).
package collectortest
