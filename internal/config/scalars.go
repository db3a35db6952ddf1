// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"
)

// scalar returns n as a scalar with a value, recording an error otherwise.
func (d *decoder) scalar(n *yaml.Node, path, want string) (*yaml.Node, bool) {
	n = deref(n)
	if isNull(n) {
		d.errorf(n, path, "missing value (want %s)", want)
		return nil, false
	}
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, path, "must be %s, got %s", want, describe(n))
		return nil, false
	}
	return n, true
}

// str decodes a YAML string. Numbers, booleans and dates are not strings:
// the error says to quote them, as YAML would otherwise change their meaning
// for other tools (yes/no, 1.10 vs 1.1).
func (d *decoder) str(n *yaml.Node, path string) (string, bool) {
	n, ok := d.scalar(n, path, "a string")
	if !ok {
		return "", false
	}
	if n.ShortTag() != "!!str" {
		d.errorf(n, path, "must be a string, got %s (quote it: %q)", describe(n), n.Value)
		return "", false
	}
	if strings.ContainsRune(n.Value, 0) {
		d.errorf(n, path, "must not contain a NUL byte")
		return "", false
	}
	return n.Value, true
}

// nonEmpty decodes a string that must not be empty.
func (d *decoder) nonEmpty(n *yaml.Node, path string) (string, bool) {
	s, ok := d.str(n, path)
	if ok && s == "" {
		d.errorf(deref(n), path, "must not be empty (remove the key for the default)")
		return "", false
	}
	return s, ok
}

// nameOrID decodes a user or group: a name, or a numeric id written as a
// plain integer.
func (d *decoder) nameOrID(n *yaml.Node, path string) (string, bool) {
	if m := deref(n); m != nil && m.Kind == yaml.ScalarNode && m.ShortTag() == "!!int" {
		if _, err := strconv.ParseUint(m.Value, 10, 32); err != nil {
			d.errorf(m, path, "bad numeric id %s", m.Value)
			return "", false
		}
		return m.Value, true
	}
	return d.nonEmpty(n, path)
}

// integer decodes a non-negative YAML integer (1000, 1_000, 0x3e8).
func (d *decoder) integer(n *yaml.Node, path string) (int64, bool) {
	n, ok := d.scalar(n, path, "an integer")
	if !ok {
		return 0, false
	}
	if n.ShortTag() != "!!int" {
		d.errorf(n, path, "must be an integer, got %s", describe(n))
		return 0, false
	}
	var v int64
	if err := n.Decode(&v); err != nil {
		d.errorf(n, path, "integer %s out of range", n.Value)
		return 0, false
	}
	if v < 0 {
		d.errorf(n, path, "must not be negative, got %d", v)
		return 0, false
	}
	return v, true
}

// smallInt decodes a non-negative integer that fits an int32 (counts).
func (d *decoder) smallInt(n *yaml.Node, path string) (int, bool) {
	v, ok := d.integer(n, path)
	if ok && v > math.MaxInt32 {
		d.errorf(deref(n), path, "integer %d out of range", v)
		return 0, false
	}
	return int(v), ok
}

// number decodes a non-negative finite number (integer or decimal).
func (d *decoder) number(n *yaml.Node, path string) (float64, bool) {
	n, ok := d.scalar(n, path, "a number")
	if !ok {
		return 0, false
	}
	if tag := n.ShortTag(); tag != "!!int" && tag != "!!float" {
		d.errorf(n, path, "must be a number, got %s", describe(n))
		return 0, false
	}
	var v float64
	if err := n.Decode(&v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		d.errorf(n, path, "must be a finite number, got %s", n.Value)
		return 0, false
	}
	if v < 0 {
		d.errorf(n, path, "must not be negative, got %s", n.Value)
		return 0, false
	}
	return v, true
}

func (d *decoder) boolean(n *yaml.Node, path string) (bool, bool) {
	n, ok := d.scalar(n, path, "true or false")
	if !ok {
		return false, false
	}
	if n.ShortTag() != "!!bool" {
		d.errorf(n, path, "must be true or false, got %s", describe(n))
		return false, false
	}
	var v bool
	if err := n.Decode(&v); err != nil {
		d.errorf(n, path, "must be true or false, got %s", describe(n))
		return false, false
	}
	return v, true
}

// duration decodes a duration with ParseDuration ("30s", "1.5s", "0").
func (d *decoder) duration(n *yaml.Node, path string) (time.Duration, bool) {
	n, ok := d.scalar(n, path, "a duration such as 30s")
	if !ok {
		return 0, false
	}
	if tag := n.ShortTag(); tag != "!!str" && tag != "!!int" && tag != "!!float" {
		d.errorf(n, path, "must be a duration such as 30s, got %s", describe(n))
		return 0, false
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		d.errorf(n, path, "%v", err)
		return 0, false
	}
	return v, true
}

// size decodes a byte size with ParseSize ("2GiB", "512MiB", 4096).
func (d *decoder) size(n *yaml.Node, path string) (int64, bool) {
	m := deref(n)
	if m != nil && m.Kind == yaml.ScalarNode && m.ShortTag() == "!!int" {
		return d.integer(m, path)
	}
	n, ok := d.scalar(n, path, "a size such as 512MiB")
	if !ok {
		return 0, false
	}
	if tag := n.ShortTag(); tag != "!!str" && tag != "!!float" {
		d.errorf(n, path, "must be a size such as 512MiB, got %s", describe(n))
		return 0, false
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		d.errorf(n, path, "%v", err)
		return 0, false
	}
	return v, true
}

// enum decodes a string that must be one of allowed.
func (d *decoder) enum(n *yaml.Node, path string, allowed ...string) (string, bool) {
	s, ok := d.str(n, path)
	if !ok {
		return "", false
	}
	for _, a := range allowed {
		if s == a {
			return s, true
		}
	}
	d.errorf(deref(n), path, "must be one of %s, got %q", strings.Join(allowed, ", "), s)
	return "", false
}

// stringList decodes an argv list: a non-empty list of strings. A single
// string is refused with a hint at the list form.
func (d *decoder) stringList(n *yaml.Node, path string) ([]string, bool) {
	n = deref(n)
	if path == "writable" {
		// A list of paths, not an argv.
		if isNull(n) || n.Kind != yaml.SequenceNode {
			d.errorf(n, path, "must be a list of absolute paths such as [/srv/bot, /tmp], got %s", describe(n))
			return nil, false
		}
		if len(n.Content) == 0 {
			d.errorf(n, path, "must not be empty: name the paths the agent may write beneath, or leave writable out for files unconfined")
			return nil, false
		}
	}
	if path == "allow" && (isNull(n) || n.Kind != yaml.SequenceNode) {
		d.errorf(n, path, "must be a list of HOST:PORT destinations such as [api.github.com:443, \"*.pypi.org:443\"], got %s", describe(n))
		return nil, false
	}
	if path == "allow" && len(n.Content) == 0 {
		d.errorf(n, path, "must not be empty: name the destinations the agent may reach (network: gateway-only reaches none)")
		return nil, false
	}
	if n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		d.errorf(n, path, "must be a list of strings such as [%s], got a single string (no shell is involved: split the arguments yourself)", strings.Join(strings.Fields(n.Value), ", "))
		return nil, false
	}
	if isNull(n) || n.Kind != yaml.SequenceNode {
		d.errorf(n, path, "must be a list of strings such as [python3, agent.py], got %s", describe(n))
		return nil, false
	}
	if len(n.Content) == 0 {
		d.errorf(n, path, "must not be empty: the argv list such as [python3, agent.py]")
		return nil, false
	}
	out := make([]string, 0, len(n.Content))
	ok := true
	for i, e := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		d.lines[p] = e.Line
		s, good := d.str(e, p)
		ok = ok && good
		out = append(out, s)
	}
	return out, ok
}

// stringMap decodes a mapping of free-form names to strings (env, labels)
// into the map v, over the names it has.
func (d *decoder) stringMap(n *yaml.Node, path string, v reflect.Value) {
	n = deref(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "must be a mapping of names to strings, got %s", describe(n))
		return
	}
	if v.IsNil() {
		v.Set(reflect.ValueOf(map[string]string{}))
	}
	m := v.Interface().(map[string]string)
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := deref(n.Content[i])
		name, ok := d.key(k, path, seen)
		if !ok {
			continue
		}
		d.lines[join(path, name)] = k.Line
		if s, ok := d.str(n.Content[i+1], join(path, name)); ok {
			m[name] = s
		}
	}
}

// signal decodes a signal with ParseSignal (SIGINT, INT, 2, none).
func (d *decoder) signal(n *yaml.Node, path string) (syscall.Signal, bool) {
	n, ok := d.scalar(n, path, "a signal such as SIGINT, or none")
	if !ok {
		return 0, false
	}
	if tag := n.ShortTag(); tag != "!!str" && tag != "!!int" {
		d.errorf(n, path, "must be a signal such as SIGINT, or none, got %s", describe(n))
		return 0, false
	}
	sig, err := ParseSignal(n.Value)
	if err != nil {
		d.errorf(n, path, "%v", err)
		return 0, false
	}
	return sig, true
}
