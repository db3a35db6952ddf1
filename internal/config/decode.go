// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// maxFileSize bounds a configuration file; real ones are a few KiB.
const maxFileSize = 1 << 20

// decoder walks a yaml.Node tree against the schema. It never stops at the
// first error: every problem is collected with the line of its node, and the
// line of every key seen is recorded for errors found later (cross-field
// checks run on the merged, typed configuration).
type decoder struct {
	file    string
	errs    []*Error
	dropped int            // errors beyond maxErrors, counted only
	lines   map[string]int // dotted key path ("checks.memory.kill") -> line of the key
}

func newDecoder(file string) *decoder {
	return &decoder{file: file, lines: map[string]int{}}
}

// full says that maxErrors were recorded: later errors are only counted,
// which also bounds the work a hostile file can cause.
func (d *decoder) full() bool {
	if len(d.errs) < maxErrors {
		return false
	}
	d.dropped++
	return true
}

// errorf records a bad value at node n (nil: no line) for the key path.
func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	d.fail(n, path, ErrBadValue, format, args...)
}

// fail records an error of the given kind at node n (nil: no line).
func (d *decoder) fail(n *yaml.Node, path string, kind ErrorKind, format string, args ...any) {
	if d.full() {
		return
	}
	e := &Error{File: d.file, Key: path, Kind: kind, Err: fmt.Errorf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	d.errs = append(d.errs, e)
}

// sets says whether the file sets the key at path.
func (d *decoder) sets(path string) bool {
	_, ok := d.lines[path]
	return ok
}

// lineOf is the line of the key at path, or of its nearest parent that
// appears in the file, or 0.
func (d *decoder) lineOf(path string) int {
	for ; path != ""; path = parentKey(path) {
		if l, ok := d.lines[path]; ok {
			return l
		}
	}
	return 0
}

// report records problems found on the typed configuration, locating each at
// the line of its key. prefix is prepended to key paths ("defaults.").
func (d *decoder) report(probs []problem, prefix string) {
	for _, p := range probs {
		if d.full() {
			continue
		}
		at := p.at
		if at == "" {
			at = p.key
		}
		d.errs = append(d.errs, &Error{File: d.file, Line: d.lineOf(prefix + at), Key: prefix + p.key, Kind: p.kind, Err: errors.New(p.msg)})
	}
}

// err returns the collected errors sorted by line (stable, so errors on one
// line keep the order they were found in).
func (d *decoder) err() error {
	sort.SliceStable(d.errs, func(i, j int) bool { return d.errs[i].Line < d.errs[j].Line })
	if d.dropped > 0 {
		d.errs = append(d.errs, &Error{File: d.file, Err: fmt.Errorf("%d more errors not shown", d.dropped)})
	}
	return joinErrors(d.errs)
}

// document parses data as exactly one YAML document and returns its root
// node, nil for an empty document (no content, or only comments, or a null).
// Syntax errors are recorded with yaml's own line.
func (d *decoder) document(data []byte) (*yaml.Node, bool) {
	if len(data) > maxFileSize {
		d.fail(nil, "", ErrSyntax, "file is larger than %s", FormatSize(maxFileSize))
		return nil, false
	}
	if !utf8.Valid(data) {
		d.fail(nil, "", ErrSyntax, "file is not valid UTF-8")
		return nil, false
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, true
		}
		if !d.full() {
			d.errs = append(d.errs, syntaxError(d.file, data, err))
		}
		return nil, false
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		if !d.full() {
			d.errs = append(d.errs, syntaxError(d.file, data, err))
		}
		return nil, false
	default:
		d.fail(&next, "", ErrSyntax, "more than one YAML document (---); put one configuration in a file")
		return nil, false
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, true
	}
	root := deref(doc.Content[0])
	if isNull(root) {
		return nil, true
	}
	return root, true
}

// deref follows aliases (*name) to the anchored node.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names what a node is, for "must be X, got Y" messages.
func describe(n *yaml.Node) string {
	n = deref(n)
	switch {
	case n == nil:
		return "nothing"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind != yaml.ScalarNode:
		return "an unsupported YAML node"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "…"
	}
	switch n.ShortTag() {
	case "!!null":
		return "no value"
	case "!!str":
		return fmt.Sprintf("string %q", v)
	case "!!int":
		return "integer " + v
	case "!!float":
		return "number " + v
	case "!!bool":
		return "boolean " + v
	case "!!timestamp":
		return "date " + v
	default:
		return fmt.Sprintf("%s %q", n.ShortTag(), v)
	}
}

// join appends key to a dotted path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// scope is what a mapping passes down to the keys below it.
type scope struct {
	size     bool // integers are byte sizes (the thresholds of memory)
	defaults bool // the daemon's defaults section: per-file agent keys are refused
}

// mapping decodes a mapping node onto the struct v, key by key: a key the
// node does not have keeps v's value. Unknown keys, duplicate keys,
// non-string keys and merge keys are errors. A null node sets nothing.
func (d *decoder) mapping(n *yaml.Node, path string, v reflect.Value, sc scope) {
	n = deref(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		what := "must be"
		if path == "" {
			what = "the file must be"
		}
		d.errorf(n, path, "%s a mapping (key: value), got %s", what, describe(n))
		return
	}
	known := fieldsOf(v.Type())
	if sc.defaults {
		known = slices.DeleteFunc(slices.Clone(known), func(f field) bool { return f.opt.perFile })
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := deref(n.Content[i]), n.Content[i+1]
		name, ok := d.key(k, path, seen)
		if !ok {
			continue
		}
		f, ok := lookup(known, name)
		if !ok {
			d.unknownKey(k, path, name, known, v.Type(), sc)
			continue
		}
		p := join(path, name)
		d.lines[p] = k.Line
		d.value(val, p, v.Field(f.index), f.opt, sc)
	}
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	signalType   = reflect.TypeFor[syscall.Signal]()
)

// value decodes the value n of the key at path into v, a field with the
// options o. On an error v keeps its value.
func (d *decoder) value(n *yaml.Node, path string, v reflect.Value, o options, sc scope) {
	sc.size = sc.size || o.size
	switch {
	case v.Type() == reflect.TypeFor[Defaults](): // an agent's keys, in the daemon file
		v.Addr().Interface().(*Defaults).decode(d, n, path)
		return
	case v.Type() == reflect.TypeFor[[]Budget](): // a list of mappings
		d.budgets(n, path, v)
		return
	case v.Kind() == reflect.Struct: // a section: key by key
		d.mapping(n, path, v, sc)
		return
	case v.Kind() == reflect.Pointer:
		d.check(n, path, v, sc)
		return
	case v.Kind() == reflect.Map:
		d.stringMap(n, path, v)
		return
	}
	var x any
	var ok bool
	switch {
	case v.Type() == durationType:
		x, ok = d.duration(n, path)
	case v.Type() == signalType:
		x, ok = d.signal(n, path)
	case v.Kind() == reflect.Slice:
		x, ok = d.stringList(n, path)
	case v.Kind() == reflect.String && o.oneOf != nil:
		x, ok = d.enum(n, path, o.oneOf...)
	case v.Kind() == reflect.String:
		x, ok = stringKinds[o.kind](d, n, path)
	case v.Kind() == reflect.Int64 && sc.size:
		x, ok = d.size(n, path)
	case v.Kind() == reflect.Int64:
		x, ok = d.integer(n, path)
	case v.Kind() == reflect.Int:
		x, ok = d.smallInt(n, path)
	case v.Kind() == reflect.Float64:
		x, ok = d.number(n, path)
	case v.Kind() == reflect.Bool:
		x, ok = d.boolean(n, path)
	default:
		panic("config: no decoder for " + path + " of type " + v.Type().String())
	}
	if ok {
		v.Set(reflect.ValueOf(x).Convert(v.Type()))
	}
}

// stringKinds decode the strings of the `config:"…"` kinds.
var stringKinds = map[string]func(d *decoder, n *yaml.Node, path string) (string, bool){
	"":         (*decoder).str,
	"nonempty": (*decoder).nonEmpty,
	"id":       (*decoder).nameOrID,
	"path":     (*decoder).absPath,
	"listen":   (*decoder).listen,
	"url":      (*decoder).url,
}

// withDefaults is implemented by a pointed-to type whose keys have
// defaults of their own once the file sets it (control_plane).
type withDefaults interface{ setDefaults() }

// check decodes a pointer field: a check (memory: {warn, kill, for}) or
// the daemon's control_plane. It is one value that replaces the one below
// as a whole; no value (memory:) is nil, which turns an inherited check
// off. A scalar is the short form, when the type has a short key.
func (d *decoder) check(n *yaml.Node, path string, v reflect.Value, sc scope) {
	m := deref(n)
	if isNull(m) {
		v.SetZero()
		return
	}
	p := reflect.New(v.Type().Elem())
	if w, ok := p.Interface().(withDefaults); ok {
		w.setDefaults()
	}
	v.Set(p)
	if m.Kind == yaml.ScalarNode {
		for f, fv := range fields(p.Elem()) {
			if f.opt.short {
				d.value(m, path, fv, f.opt, sc)
				return
			}
		}
	}
	d.mapping(m, path, p.Elem(), sc)
}

// key checks one mapping key: a string, not "<<", not seen before.
func (d *decoder) key(k *yaml.Node, path string, seen map[string]int) (string, bool) {
	if k == nil || k.Kind != yaml.ScalarNode || isNull(k) {
		d.fail(k, path, ErrSyntax, "keys must be strings, got %s", describe(k))
		return "", false
	}
	if k.Value == "<<" && k.Style == 0 {
		d.fail(k, path, ErrSyntax, "merge keys (<<) are not supported; repeat the keys, or use the daemon's defaults")
		return "", false
	}
	if first, dup := seen[k.Value]; dup {
		d.fail(k, path, ErrSyntax, "duplicate key %q (first at line %d)", k.Value, first)
		return "", false
	}
	seen[k.Value] = k.Line
	return k.Value, true
}

// unknownKey reports a key that known (the keys of t allowed here) does
// not have, with the closest known key when it looks like a typo.
func (d *decoder) unknownKey(k *yaml.Node, path, name string, known []field, t reflect.Type, sc scope) {
	keys := make([]string, len(known))
	for i, f := range known {
		keys[i] = f.key
	}
	if _, top := lookup(fieldsOf(reflect.TypeFor[Daemon]()), name); top && sc.defaults && path == "defaults" && name != "defaults" {
		if _, agentKey := lookup(fieldsOf(t), name); agentKey { // gateway, control_plane
			d.fail(k, join(path, name), ErrUnknownKey, "%q is a key of the daemon file itself, not of defaults: move it to the top level (defaults may set %s)", name, strings.Join(keys, ", "))
			return
		}
	}
	if _, exists := lookup(fieldsOf(t), name); exists && sc.defaults {
		d.fail(k, join(path, name), ErrUnknownKey, "%q cannot be defaulted: set it in each agent file (defaults may set %s)", name, strings.Join(keys, ", "))
		return
	}
	msg := fmt.Sprintf("unknown key %q (known: %s)", name, strings.Join(keys, ", "))
	if s := suggest(name, keys); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	d.fail(k, join(path, name), ErrUnknownKey, "%s", msg)
}

// suggest returns the known key closest to name when it is close enough to
// be a typo.
func suggest(name string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if dist := editDistance(strings.ToLower(name), k); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	return best
}

// editDistance is the Damerau-Levenshtein (optimal string alignment)
// distance, so a swap of two letters ("chekcs") counts as one edit.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return math.MaxInt
	}
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
