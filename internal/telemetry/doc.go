// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package telemetry exports what hermeskilld records over OpenTelemetry
// (OTLP/HTTP with protobuf bodies, https://opentelemetry.io/docs/specs/otlp/):
// every supervisor event — agent started and exited, symptoms, ladder
// steps, certificates and any record shaped like one (a pause record) —
// as a log record with typed hermeskill.* attributes, and each request
// through the LLM gateway as a span of the OpenTelemetry GenAI semantic
// conventions (gen_ai.*), a child of a span for the agent's run. The
// records and spans are the official Go SDK's (sdk/log, sdk/trace) with its
// batch processors; the exporter that sends them is this package's own
// (otlp.go says why).
//
// It records nothing a certificate would not hold: no prompt, completion,
// key, handle, tool argument or environment variable.
//
// It never delays a kill: Exporter.Event only queues (a bounded queue; an
// event that finds it full is dropped and counted), one goroutine turns
// events into records and spans and waits for room in the SDK's bounded
// queues (so those never drop), and Shutdown waits at most its bound for
// what is still queued. Every record or span not exported — dropped, its
// export failed or rejected, or still queued at exit — is counted
// (Exporter.Stats).
package telemetry
