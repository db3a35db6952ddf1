// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"iter"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The schema of both files is declared once, as the Go types of this
// package: each key is a struct field with a `yaml:"key"` tag, in the
// order the documentation lists it, and the field's Go type says how its
// value is read (time.Duration: a duration, syscall.Signal: a signal, int:
// a count, …). A `config:"…"` tag adds what the type cannot say:
//
//	nonempty     a string that must not be empty (id, cwd)
//	id           a user or group: a name, or a numeric id
//	path         an absolute path, cleaned (the daemon's files)
//	listen, url  a host:port, an http(s) URL (the daemon's endpoints)
//	oneof=a|b    a string that must be one of these
//	size         integers, of this key or of the check it names, are
//	             byte sizes (512MiB), not counts
//	short        the check this key belongs to may be written as this
//	             value alone (tool_loop: 5 for tool_loop: {repeats: 5})
//	perfile      an agent key the daemon's defaults section cannot set
//
// A file (the daemon's defaults section, then an agent file) is decoded
// onto the agent the layers below made, so how it merges follows from the
// Go kind of each field:
//
//	struct         a section (restart, escalation, checks): key by key
//	pointer        a check (memory, cpu_spin, …): one value, replaced as a
//	               whole; nil is off
//	map            labels, env: merged, the upper layer's names win
//	anything else  replaced
//
// A flag sets one key (Agent.Set), inside a check too.
//
// Decoding (decode.go), cloning, the rules every key obeys (not negative,
// one of its values), the description for status and the test of the
// reference (docs/configuration.md, checked by doc_test.go) all walk these types: nothing else lists the keys.

// field is one key of the schema.
type field struct {
	key   string // as written in a file
	index int    // of the struct field
	opt   options
}

// options are a field's `config:"…"` tag.
type options struct {
	kind    string   // for a string: a key of stringKinds; "" = any string
	oneOf   []string // the values allowed; nil = any
	size    bool
	short   bool
	perFile bool
}

// fieldCache holds fieldsOf's answer for each type: a type's tags never
// change, and reading them is most of a parse's own work.
var fieldCache sync.Map // reflect.Type -> []field

// fieldsOf lists the keys of the struct type t in their order. The slice is
// shared: do not modify it. A tag it does not know is a mistake in this
// package: it panics, and every test that decodes a file finds it.
func fieldsOf(t reflect.Type) []field {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.([]field)
	}
	fs := parseTags(t)
	fieldCache.Store(t, fs)
	return fs
}

func parseTags(t reflect.Type) []field {
	var fs []field
	for i := range t.NumField() {
		sf := t.Field(i)
		key := sf.Tag.Get("yaml")
		if key == "" {
			continue
		}
		f := field{key: key, index: i}
		for o := range strings.SplitSeq(sf.Tag.Get("config"), ",") {
			switch name, arg, _ := strings.Cut(o, "="); name {
			case "":
			case "size":
				f.opt.size = true
			case "short":
				f.opt.short = true
			case "perfile":
				f.opt.perFile = true
			case "oneof":
				f.opt.oneOf = strings.Split(arg, "|")
			default:
				if _, ok := stringKinds[name]; !ok {
					panic(fmt.Sprintf("config: %s.%s: unknown option %q", t.Name(), sf.Name, o))
				}
				f.opt.kind = name
			}
		}
		fs = append(fs, f)
	}
	return fs
}

// fields yields the keys of the struct v with their values.
func fields(v reflect.Value) iter.Seq2[field, reflect.Value] {
	return func(yield func(field, reflect.Value) bool) {
		for _, f := range fieldsOf(v.Type()) {
			if !yield(f, v.Field(f.index)) {
				return
			}
		}
	}
}

// lookup finds the key named key among fs.
func lookup(fs []field, key string) (field, bool) {
	i := slices.IndexFunc(fs, func(f field) bool { return f.key == key })
	if i < 0 {
		return field{}, false
	}
	return fs[i], true
}

// check is a check of Checks with thresholds (memory, cpu_spin, …),
// implemented by the types its pointer fields point to. count formats an
// integer threshold: a size for memory, a plain number elsewhere.
type check interface {
	// active says that a threshold is set: a check without one (memory:
	// {}) is off, and dropped.
	active() bool
	// problems are what is wrong with it beyond the rules every key obeys
	// (not negative): warn above kill, tool_loop of 1.
	problems(key string, count func(int64) string) []problem
	// describe is the check as status shows it: "warn 1GiB, kill 2GiB for 10s".
	describe(count func(int64) string) string
}

// countFormat formats integer thresholds: sizes, or plain numbers.
func countFormat(size bool) func(int64) string {
	if size {
		return FormatSize
	}
	return func(n int64) string { return fmt.Sprint(n) }
}

// schemaProblems applies the rules every key obeys to the struct v at
// path: numbers are not negative, a oneof string is one of its values, and
// each check that is set has none of its own problems. These matter for
// values that came from flags or code: a file's parse refuses them first.
func schemaProblems(v reflect.Value, path string) []problem {
	var ps []problem
	for f, fv := range fields(v) {
		p := join(path, f.key)
		switch fv.Kind() {
		case reflect.Struct:
			ps = append(ps, schemaProblems(fv, p)...)
		case reflect.Pointer:
			if fv.IsNil() {
				continue
			}
			ps = append(ps, schemaProblems(fv.Elem(), p)...)
			if c, ok := fv.Interface().(check); ok {
				ps = append(ps, c.problems(p, countFormat(f.opt.size))...)
			}
		case reflect.Int, reflect.Int64:
			if fv.Int() < 0 {
				ps = append(ps, problem{key: p, kind: ErrBadValue, msg: "must not be negative"})
			}
		case reflect.Float64:
			if fv.Float() < 0 {
				ps = append(ps, problem{key: p, kind: ErrBadValue, msg: "must not be negative"})
			}
		case reflect.String:
			if f.opt.oneOf != nil && !slices.Contains(f.opt.oneOf, fv.String()) {
				ps = append(ps, problem{key: p, kind: ErrBadValue, msg: fmt.Sprintf("must be one of %s, got %q", strings.Join(f.opt.oneOf, ", "), fv.String())})
			}
		}
	}
	return ps
}

// deepCopy gives the struct v maps, slices and pointed-to values of its
// own, so that a copy shares no memory with its original.
func deepCopy(v reflect.Value) {
	for i := range v.NumField() {
		switch fv := v.Field(i); fv.Kind() {
		case reflect.Map:
			if !fv.IsNil() {
				fv.Set(reflect.ValueOf(maps.Clone(fv.Interface().(map[string]string))))
			}
		case reflect.Slice:
			if !fv.IsNil() {
				fv.Set(reflect.ValueOf(slices.Clone(fv.Interface().([]string))))
			}
		case reflect.Pointer:
			if !fv.IsNil() {
				p := reflect.New(fv.Type().Elem())
				p.Elem().Set(fv.Elem())
				deepCopy(p.Elem())
				fv.Set(p)
			}
		case reflect.Struct:
			deepCopy(fv)
		}
	}
}

// KV is one key of a configuration and its value as status shows it.
type KV struct {
	Key, Value string
}

// describeKeys lists the keys of the struct v as status shows them, in the
// order of the schema; without zero, the keys whose value is 0 or nil
// (off) are left out.
func describeKeys(v reflect.Value, zero bool) []KV {
	var kvs []KV
	for f, fv := range fields(v) {
		if fv.IsZero() && !zero {
			continue
		}
		var s string
		switch x := fv.Interface().(type) {
		case time.Duration:
			s = FormatDuration(x)
		case syscall.Signal:
			s = SignalName(x)
		case check:
			s = x.describe(countFormat(f.opt.size))
		default:
			s = fmt.Sprint(x)
		}
		kvs = append(kvs, KV{Key: f.key, Value: s})
	}
	return kvs
}
