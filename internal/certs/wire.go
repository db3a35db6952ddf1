// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sync"
	"time"
)

// The certificate's structs are its schema: their fields, in order, with
// their JSON tags, are the file's. Where encoding/json would write them
// otherwise, a struct is written through its wire form, a type derived
// from it (reflect.StructOf) with the same fields, order and tags and one
// difference, time.Time fields as jsonTime, so that
//
//   - a time is RFC 3339 with nanoseconds in UTC, and null when zero;
//   - a nil slice is [] (a reader can always iterate);
//   - strings are not HTML-escaped ("<" stays "<", for people reading the
//     file).
//
// The derived type has no methods, so writing it does not come back to the
// struct's own MarshalJSON; the structs it holds are written by theirs.
// Each is derived when first used: a run that writes no certificate
// (most do not) never pays for the reflection, a fifth of a millisecond
// of every start.
var (
	certificateWire = sync.OnceValue(wireOf[Certificate])
	meteredWire     = sync.OnceValue(wireOf[Metered])
	egressWire      = sync.OnceValue(wireOf[Egress])
	symptomWire     = sync.OnceValue(wireOf[Symptom])
	stepWire        = sync.OnceValue(wireOf[Step])
	finalStateWire  = sync.OnceValue(wireOf[FinalState])
)

// MarshalJSON writes the certificate in its schema (see Certificate).
func (c Certificate) MarshalJSON() ([]byte, error) { return certificateWire().marshal(&c) }

// UnmarshalJSON reads a certificate; unknown fields are ignored.
func (c *Certificate) UnmarshalJSON(b []byte) error { return certificateWire().unmarshal(b, c) }

// MarshalJSON writes the times as RFC 3339 UTC (null when zero) and Models
// as [] when there are none.
func (m Metered) MarshalJSON() ([]byte, error) { return meteredWire().marshal(&m) }

// UnmarshalJSON is the inverse of MarshalJSON.
func (m *Metered) UnmarshalJSON(b []byte) error { return meteredWire().unmarshal(b, m) }

// MarshalJSON writes LastByteAt as RFC 3339 UTC (null when zero), and
// empty lists as [].
func (e Egress) MarshalJSON() ([]byte, error) { return egressWire().marshal(&e) }

// UnmarshalJSON is the inverse of MarshalJSON.
func (e *Egress) UnmarshalJSON(b []byte) error { return egressWire().unmarshal(b, e) }

// MarshalJSON writes At as RFC 3339 UTC (null when zero).
func (s Symptom) MarshalJSON() ([]byte, error) { return symptomWire().marshal(&s) }

// UnmarshalJSON is the inverse of MarshalJSON.
func (s *Symptom) UnmarshalJSON(b []byte) error { return symptomWire().unmarshal(b, s) }

// MarshalJSON writes At as RFC 3339 UTC (null when zero).
func (s Step) MarshalJSON() ([]byte, error) { return stepWire().marshal(&s) }

// UnmarshalJSON is the inverse of MarshalJSON (numbers in Detail become float64).
func (s *Step) UnmarshalJSON(b []byte) error { return stepWire().unmarshal(b, s) }

// MarshalJSON writes LastHeartbeatAt as RFC 3339 UTC, or null when there was
// no heartbeat.
func (f FinalState) MarshalJSON() ([]byte, error) { return finalStateWire().marshal(&f) }

// UnmarshalJSON is the inverse of MarshalJSON.
func (f *FinalState) UnmarshalJSON(b []byte) error { return finalStateWire().unmarshal(b, f) }

var (
	timeType     = reflect.TypeFor[time.Time]()
	jsonTimeType = reflect.TypeFor[jsonTime]()
)

// wire is the wire form of one struct type.
type wire struct {
	typ reflect.Type // the struct's wire form
}

// wireOf derives the wire form of struct type T. It panics on a field
// reflect.StructOf cannot copy (unexported or embedded): a schema type is
// plain exported fields.
func wireOf[T any]() wire {
	t := reflect.TypeFor[T]()
	fields := make([]reflect.StructField, t.NumField())
	for i := range fields {
		f := t.Field(i)
		if f.Anonymous {
			panic("certs: wire form of " + t.String() + ": embedded field " + f.Name)
		}
		if f.Type == timeType {
			f.Type = jsonTimeType
		}
		fields[i] = reflect.StructField{Name: f.Name, Type: f.Type, Tag: f.Tag}
	}
	return wire{typ: reflect.StructOf(fields)}
}

// marshal writes *v (a pointer to the struct w was derived from) in its
// wire form.
func (w wire) marshal(v any) ([]byte, error) {
	src := reflect.ValueOf(v).Elem()
	dst := reflect.New(w.typ).Elem()
	for i := range src.NumField() {
		f := src.Field(i)
		switch {
		case f.Type() == timeType:
			f = f.Convert(jsonTimeType)
		case f.Kind() == reflect.Slice && f.IsNil():
			f = reflect.MakeSlice(f.Type(), 0, 0)
		}
		dst.Field(i).Set(f)
	}
	return marshalNoEscape(dst.Interface())
}

// unmarshal reads b in the wire form into *v, replacing all of it: a field
// b does not have is zero.
func (w wire) unmarshal(b []byte, v any) error {
	src := reflect.New(w.typ)
	if err := json.Unmarshal(b, src.Interface()); err != nil {
		return err
	}
	src = src.Elem()
	dst := reflect.ValueOf(v).Elem()
	for i := range src.NumField() {
		f := src.Field(i)
		if f.Type() == jsonTimeType {
			f = f.Convert(timeType)
		}
		dst.Field(i).Set(f)
	}
	return nil
}

// jsonTime is a time.Time written as RFC 3339 with nanoseconds in UTC, and
// null when zero.
type jsonTime time.Time

func (t jsonTime) MarshalJSON() ([]byte, error) {
	if time.Time(t).IsZero() {
		return []byte("null"), nil
	}
	return time.Time(t).UTC().MarshalJSON() // RFC3339Nano; errors for years outside 0-9999
}

func (t *jsonTime) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = jsonTime{}
		return nil
	}
	var tt time.Time
	if err := tt.UnmarshalJSON(b); err != nil {
		return err
	}
	*t = jsonTime(tt.UTC())
	return nil
}

// marshalNoEscape is json.Marshal without HTML escaping; an encoder that
// wants escaping re-escapes the result of a MarshalJSON method itself.
func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
