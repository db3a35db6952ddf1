// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"os"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Defaults are the daemon file's `defaults:` section: agent settings every
// agent file inherits unless it sets them itself. The zero value (or a nil
// *Defaults) means no defaults beyond the built-in ones.
type Defaults struct {
	agent *Agent         // DefaultAgent with the section decoded onto it; nil: no section
	keys  map[string]int // the keys the section sets ("checks.memory"), with their lines
}

// Agent returns what an agent file that sets nothing would get: the
// built-in defaults overlaid with these (not normalized).
func (df *Defaults) Agent() *Agent {
	if df == nil || df.agent == nil {
		return DefaultAgent()
	}
	return df.agent.Clone()
}

// sets says whether the section sets key.
func (df *Defaults) sets(key string) bool {
	if df == nil {
		return false
	}
	_, ok := df.keys[key]
	return ok
}

// decode decodes the section at path, an agent mapping without the keys
// that name one agent (id, command, cwd).
func (df *Defaults) decode(d *decoder, n *yaml.Node, path string) {
	a := DefaultAgent()
	d.mapping(n, path, reflect.ValueOf(a).Elem(), scope{defaults: true})
	a.Checks.dropInactive()
	df.agent, df.keys = a, map[string]int{}
	for k, line := range d.lines {
		if rest, ok := strings.CutPrefix(k, path+"."); ok {
			df.keys[rest] = line
		}
	}
}

// LoadAgent reads and parses an agent file; see ParseAgent.
func LoadAgent(path string, defaults *Defaults) (*Agent, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("agent file: %w", err)
	}
	return ParseAgent(data, path, defaults)
}

// ParseAgent parses an agent file named source over defaults (nil: none),
// key by key: a key set in the file wins, a key it does not set is
// inherited; labels and env are merged (the file's names win); a check set
// in the file (memory: …) replaces that check of the defaults as a whole,
// and memory: {} turns it off. An empty document is valid (all defaults).
// id and command are not required here (see Validate).
//
// defaults is nil for supervise (and check-config) and never nil for the
// daemon, which passes its defaults section even when the daemon file has
// none: a key only supervise reads, control_plane, is refused when
// defaults is not nil (the daemon file's own control_plane serves every
// agent).
//
// The result is not normalized: apply overrides (flags, see Set), then
// call Normalize and Validate. Every error is an *Error that names
// source:line; several are joined.
func ParseAgent(data []byte, source string, defaults *Defaults) (*Agent, error) {
	d := newDecoder(source)
	a := defaults.Agent()
	a.Source = source
	if root, ok := d.document(data); ok && root != nil {
		d.mapping(root, "", reflect.ValueOf(a).Elem(), scope{})
	}
	if defaults != nil && d.sets("control_plane") {
		d.report([]problem{{key: "control_plane", kind: ErrUnknownKey,
			msg: `"control_plane" is for supervise only: under the daemon an agent file cannot set its own; the daemon file's control_plane serves every agent`}}, "")
	}
	if len(d.errs) > 0 {
		return nil, d.err()
	}
	a.Checks.dropInactive()
	d.report(semanticProblems(a, func(key string) bool { return d.sets(key) || defaults.sets(key) }), "")
	if len(d.errs) > 0 {
		return nil, d.err()
	}
	return a, nil
}

// semanticProblems validates a merged agent as it will run (normalized),
// plus what only the layers know: whether heartbeat_timeout_min was set
// (Normalize lowers the default one silently, but not one that was asked
// for).
func semanticProblems(a *Agent, set func(key string) bool) []problem {
	n := a.Clone()
	n.Normalize()
	var ps []problem
	if set("checks.heartbeat_timeout_min") {
		lo, hi := a.Checks.HeartbeatTimeoutMin, n.Checks.HeartbeatTimeoutMax
		if hi > 0 && lo > hi {
			what := "heartbeat_timeout_max"
			if !set("checks.heartbeat_timeout_max") {
				what = "heartbeat_timeout"
			}
			ps = append(ps, problem{key: "checks.heartbeat_timeout_min", kind: ErrConflict, msg: fmt.Sprintf("%s is above %s %s", FormatDuration(lo), what, FormatDuration(hi))})
		}
	}
	return append(ps, n.problems(false)...)
}

// Set sets one key from the text of a command-line flag, as the key is
// written in an agent file: a.Set("checks.memory.kill", "2GiB"). It is how
// flags win over the file key by key: a check the agent does not have yet
// is created, and its other keys are kept (--max-rss sets memory.kill and
// keeps memory.warn). Only a key that holds one value can be set (not
// labels, env, command or a section), and a rate check: its kill and its
// window in one text, AMOUNT/DURATION (a.Set("checks.cost_rate",
// "0.50/1m") sets cost_rate.kill and cost_rate.per). An error is an *Error
// with Key set and no file.
func (a *Agent) Set(key, value string) error {
	v := reflect.ValueOf(a).Elem()
	var o options
	var sc scope
	path := ""
	for name := range strings.SplitSeq(key, ".") {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				p := reflect.New(v.Type().Elem())
				if w, ok := p.Interface().(withDefaults); ok {
					w.setDefaults() // control_plane: its keys' defaults, as in a file
				}
				v.Set(p)
			}
			v = v.Elem()
		}
		f, ok := field{}, false
		if v.Kind() == reflect.Struct {
			f, ok = lookup(fieldsOf(v.Type()), name)
		}
		path = join(path, name)
		if !ok {
			return &Error{Key: path, Kind: ErrUnknownKey, Err: fmt.Errorf("unknown key %q", name)}
		}
		v, o = v.Field(f.index), f.opt
		sc.size = sc.size || o.size
	}
	switch {
	case v.Type() == reflect.TypeFor[*Rate]() || v.Type() == reflect.TypeFor[*CostRate]():
		return a.setRate(key, value)
	case v.Kind() == reflect.Struct || v.Kind() == reflect.Pointer || v.Kind() == reflect.Map || v.Kind() == reflect.Slice:
		return &Error{Key: key, Kind: ErrBadValue, Err: fmt.Errorf("holds more than one value: set its keys one by one")}
	}
	n := &yaml.Node{Kind: yaml.ScalarNode, Value: value}
	if v.Kind() == reflect.String {
		n.Style = yaml.DoubleQuotedStyle // a flag's text is a string, even 42
	}
	d := newDecoder("")
	d.value(n, key, v, o, sc)
	return d.err()
}

// setRate sets the rate check at key from AMOUNT/DURATION: its kill and
// its per, each read as in a file.
func (a *Agent) setRate(key, value string) error {
	amount, per, ok := strings.Cut(value, "/")
	if !ok {
		return &Error{Key: key, Kind: ErrBadValue, Err: fmt.Errorf("want AMOUNT/DURATION such as 0.50/1m (the kill threshold per window), got %q", value)}
	}
	if err := a.Set(key+".kill", amount); err != nil {
		return err
	}
	return a.Set(key+".per", per)
}
