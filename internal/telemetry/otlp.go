// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"encoding/binary"
	"errors"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The OTLP request bodies, in protobuf's wire format, written by hand
// from the messages of opentelemetry-proto (collector/logs/v1,
// collector/trace/v1 and what they hold): the generated Go packages of
// those messages come with gRPC and its dependencies, whose package
// initialisation alone would slow every `hermeskilld supervise`, with or
// without telemetry. Field numbers are opentelemetry-proto's; fields left
// at their default are not written, as protobuf does.

// Wire types (protobuf encoding: varint, 64-bit, length-delimited, 32-bit).
const (
	wireVarint = 0
	wire64     = 1
	wireBytes  = 2
	wire32     = 5
)

type pb []byte

func (b pb) tag(field, wire int) pb { return binary.AppendUvarint(b, uint64(field)<<3|uint64(wire)) }

func (b pb) varint(field int, v uint64) pb {
	if v == 0 {
		return b
	}
	return binary.AppendUvarint(b.tag(field, wireVarint), v)
}

func (b pb) fixed64(field int, v uint64) pb {
	if v == 0 {
		return b
	}
	return binary.LittleEndian.AppendUint64(b.tag(field, wire64), v)
}

func (b pb) fixed32(field int, v uint32) pb {
	if v == 0 {
		return b
	}
	return binary.LittleEndian.AppendUint32(b.tag(field, wire32), v)
}

func (b pb) bytes(field int, v []byte) pb {
	if len(v) == 0 {
		return b
	}
	return append(binary.AppendUvarint(b.tag(field, wireBytes), uint64(len(v))), v...)
}

func (b pb) str(field int, v string) pb {
	if v == "" {
		return b
	}
	return append(binary.AppendUvarint(b.tag(field, wireBytes), uint64(len(v))), v...)
}

// msg writes a nested message (even an empty one: a oneof member or a
// repeated element must be present).
func (b pb) msg(field int, v pb) pb {
	return append(binary.AppendUvarint(b.tag(field, wireBytes), uint64(len(v))), v...)
}

func unixNano(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano())
}

// anyValue is common.v1.AnyValue: string 1, bool 2, int 3, double 4,
// array 5 (ArrayValue: values 1), kvlist 6 (KeyValueList: values 1),
// bytes 7.
func anyValue(v attribute.Value) pb {
	var b pb
	switch v.Type() {
	case attribute.STRING:
		s := v.AsString()
		b = append(binary.AppendUvarint(b.tag(1, wireBytes), uint64(len(s))), s...)
	case attribute.BOOL:
		var x uint64
		if v.AsBool() {
			x = 1
		}
		b = binary.AppendUvarint(b.tag(2, wireVarint), x)
	case attribute.INT64:
		b = binary.AppendUvarint(b.tag(3, wireVarint), uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = binary.LittleEndian.AppendUint64(b.tag(4, wire64), math.Float64bits(v.AsFloat64()))
	case attribute.BYTESLICE:
		bs := v.AsByteSlice()
		b = append(binary.AppendUvarint(b.tag(7, wireBytes), uint64(len(bs))), bs...)
	case attribute.MAP:
		var kvs pb
		for _, kv := range v.AsMap() {
			kvs = kvs.msg(1, keyValue(kv))
		}
		b = b.msg(6, kvs)
	case attribute.BOOLSLICE, attribute.INT64SLICE, attribute.FLOAT64SLICE, attribute.STRINGSLICE, attribute.SLICE:
		var arr pb
		for _, e := range elements(v) {
			arr = arr.msg(1, anyValue(e))
		}
		b = b.msg(5, arr)
	}
	return b
}

// elements are the values of a slice value.
func elements(v attribute.Value) []attribute.Value {
	var out []attribute.Value
	switch v.Type() {
	case attribute.BOOLSLICE:
		for _, x := range v.AsBoolSlice() {
			out = append(out, attribute.BoolValue(x))
		}
	case attribute.INT64SLICE:
		for _, x := range v.AsInt64Slice() {
			out = append(out, attribute.Int64Value(x))
		}
	case attribute.FLOAT64SLICE:
		for _, x := range v.AsFloat64Slice() {
			out = append(out, attribute.Float64Value(x))
		}
	case attribute.STRINGSLICE:
		for _, x := range v.AsStringSlice() {
			out = append(out, attribute.StringValue(x))
		}
	case attribute.SLICE:
		out = v.AsSlice()
	}
	return out
}

// keyValue is common.v1.KeyValue: key 1, value 2.
func keyValue(kv attribute.KeyValue) pb {
	return pb(nil).str(1, string(kv.Key)).msg(2, anyValue(kv.Value))
}

func attributes(b pb, field int, kvs []attribute.KeyValue) pb {
	for _, kv := range kvs {
		b = b.msg(field, keyValue(kv))
	}
	return b
}

// resourceMsg is resource.v1.Resource: attributes 1.
func resourceMsg(r *resource.Resource) pb {
	if r == nil {
		return nil
	}
	return attributes(nil, 1, r.Attributes())
}

// scopeMsg is common.v1.InstrumentationScope: name 1, version 2,
// attributes 3.
func scopeMsg(s instrumentation.Scope) pb {
	return attributes(pb(nil).str(1, s.Name).str(2, s.Version), 3, s.Attributes.ToSlice())
}

// group collects items of one resource and one scope, in order.
type group[T any] struct {
	res   *resource.Resource
	scope instrumentation.Scope
	items []T
}

func groups[T any](items []T, of func(T) (*resource.Resource, instrumentation.Scope)) []*group[T] {
	var gs []*group[T]
	for _, it := range items {
		r, s := of(it)
		var g *group[T]
		for _, x := range gs {
			if x.res.Equal(r) && x.scope.Name == s.Name && x.scope.Version == s.Version {
				g = x
				break
			}
		}
		if g == nil {
			g = &group[T]{res: r, scope: s}
			gs = append(gs, g)
		}
		g.items = append(g.items, it)
	}
	return gs
}

// logsRequest is collector.logs.v1.ExportLogsServiceRequest:
// resource_logs 1 (ResourceLogs: resource 1, scope_logs 2; ScopeLogs:
// scope 1, log_records 2).
func logsRequest(records []sdklog.Record) []byte {
	var req pb
	for _, g := range groups(records, func(r sdklog.Record) (*resource.Resource, instrumentation.Scope) {
		return r.Resource(), r.InstrumentationScope()
	}) {
		sl := pb(nil).msg(1, scopeMsg(g.scope))
		for i := range g.items {
			sl = sl.msg(2, logRecord(&g.items[i]))
		}
		req = req.msg(1, pb(nil).msg(1, resourceMsg(g.res)).msg(2, sl))
	}
	return req
}

// logRecord is logs.v1.LogRecord: time_unix_nano 1, severity_number 2,
// severity_text 3, body 5, attributes 6, dropped_attributes_count 7,
// flags 8, trace_id 9, span_id 10, observed_time_unix_nano 11,
// event_name 12.
func logRecord(r *sdklog.Record) pb {
	b := pb(nil).fixed64(1, unixNano(r.Timestamp())).varint(2, uint64(r.Severity())).str(3, r.SeverityText())
	if body := r.Body(); body.Type() != attribute.EMPTY {
		b = b.msg(5, anyValue(body))
	}
	r.WalkAttributes(func(kv attribute.KeyValue) bool {
		b = b.msg(6, keyValue(kv))
		return true
	})
	b = b.varint(7, uint64(r.DroppedAttributes())).fixed32(8, uint32(r.TraceFlags()))
	if tid := r.TraceID(); tid.IsValid() {
		b = b.bytes(9, tid[:])
	}
	if sid := r.SpanID(); sid.IsValid() {
		b = b.bytes(10, sid[:])
	}
	return b.fixed64(11, unixNano(r.ObservedTimestamp())).str(12, r.EventName())
}

// tracesRequest is collector.trace.v1.ExportTraceServiceRequest:
// resource_spans 1 (ResourceSpans: resource 1, scope_spans 2; ScopeSpans:
// scope 1, spans 2).
func tracesRequest(spans []sdktrace.ReadOnlySpan) []byte {
	var req pb
	for _, g := range groups(spans, func(s sdktrace.ReadOnlySpan) (*resource.Resource, instrumentation.Scope) {
		return s.Resource(), s.InstrumentationScope()
	}) {
		ss := pb(nil).msg(1, scopeMsg(g.scope))
		for _, s := range g.items {
			ss = ss.msg(2, span(s))
		}
		req = req.msg(1, pb(nil).msg(1, resourceMsg(g.res)).msg(2, ss))
	}
	return req
}

// span is trace.v1.Span: trace_id 1, span_id 2, trace_state 3,
// parent_span_id 4, name 5, kind 6, start_time_unix_nano 7,
// end_time_unix_nano 8, attributes 9, dropped_attributes_count 10,
// events 11 (Event: time_unix_nano 1, name 2, attributes 3), status 15
// (Status: message 2, code 3), flags 16.
func span(s sdktrace.ReadOnlySpan) pb {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b := pb(nil).bytes(1, tid[:]).bytes(2, sid[:]).str(3, sc.TraceState().String())
	if p := s.Parent(); p.SpanID().IsValid() {
		psid := p.SpanID()
		b = b.bytes(4, psid[:])
	}
	b = b.str(5, s.Name()).varint(6, uint64(spanKind(s.SpanKind()))).
		fixed64(7, unixNano(s.StartTime())).fixed64(8, unixNano(s.EndTime()))
	b = attributes(b, 9, s.Attributes()).varint(10, uint64(s.DroppedAttributes()))
	for _, e := range s.Events() {
		b = b.msg(11, attributes(pb(nil).fixed64(1, unixNano(e.Time)).str(2, e.Name), 3, e.Attributes))
	}
	if st := s.Status(); st.Code != codes.Unset {
		code := uint64(1) // STATUS_CODE_OK
		if st.Code == codes.Error {
			code = 2
		}
		b = b.msg(15, pb(nil).str(2, st.Description).varint(3, code))
	}
	// SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK (0x100) with the W3C flags.
	flags := uint32(sc.TraceFlags()) | 0x100
	if s.Parent().IsRemote() {
		flags |= 0x200
	}
	return b.fixed32(16, flags)
}

// spanKind is trace.v1.Span.SpanKind: INTERNAL 1, SERVER 2, CLIENT 3,
// PRODUCER 4, CONSUMER 5 (the API's numbering, without its unspecified).
func spanKind(k trace.SpanKind) int {
	if k < trace.SpanKindInternal || k > trace.SpanKindConsumer {
		return 1
	}
	return int(k)
}

// rejected reads the number of items a collector's response says it
// rejected: Export*ServiceResponse.partial_success (1) ->
// rejected_log_records / rejected_spans (1), and its error_message (2).
func rejected(body []byte) (n int64, msg string, err error) {
	ps, err := field(body, 1)
	if err != nil || ps == nil {
		return 0, "", err
	}
	var b []byte
	for len(ps) > 0 {
		num, wire, rest, err := readTag(ps)
		if err != nil {
			return 0, "", err
		}
		switch {
		case num == 1 && wire == wireVarint:
			v, k := binary.Uvarint(rest)
			if k <= 0 {
				return 0, "", errBadProto
			}
			n, ps = int64(v), rest[k:]
		case num == 2 && wire == wireBytes:
			if b, ps, err = readBytes(rest); err != nil {
				return 0, "", err
			}
			msg = string(b)
		default:
			if ps, err = skip(wire, rest); err != nil {
				return 0, "", err
			}
		}
	}
	return n, msg, nil
}

var errBadProto = errors.New("malformed protobuf")

// field is the last length-delimited field num of a message, nil when
// absent.
func field(b []byte, num int) ([]byte, error) {
	var out []byte
	for len(b) > 0 {
		n, wire, rest, err := readTag(b)
		if err != nil {
			return nil, err
		}
		if n == num && wire == wireBytes {
			if out, b, err = readBytes(rest); err != nil {
				return nil, err
			}
			continue
		}
		if b, err = skip(wire, rest); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func readTag(b []byte) (num, wire int, rest []byte, err error) {
	v, k := binary.Uvarint(b)
	if k <= 0 || v>>3 == 0 {
		return 0, 0, nil, errBadProto
	}
	return int(v >> 3), int(v & 7), b[k:], nil
}

func readBytes(b []byte) (v, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, errBadProto
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

func skip(wire int, b []byte) ([]byte, error) {
	switch wire {
	case wireVarint:
		if _, k := binary.Uvarint(b); k > 0 {
			return b[k:], nil
		}
	case wire64:
		if len(b) >= 8 {
			return b[8:], nil
		}
	case wire32:
		if len(b) >= 4 {
			return b[4:], nil
		}
	case wireBytes:
		_, rest, err := readBytes(b)
		return rest, err
	}
	return nil, errBadProto
}
