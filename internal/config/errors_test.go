// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

func TestErrorFormat(t *testing.T) {
	m := errors.New("m")
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{File: "a.yaml", Line: 3, Column: 5, Kind: ErrBadValue, Err: m}, "a.yaml:3: m"},
		{Error{File: "a.yaml", Kind: ErrMissing, Key: "id", Err: m}, "a.yaml: id: m"},
		{Error{Line: 3, Kind: ErrBadValue, Key: "checks.memory.kill", Err: m}, "line 3: checks.memory.kill: m"},
		{Error{Kind: ErrUnknownKey, Key: "checks.memroy", Err: m}, "checks: m"},
		{Error{Kind: ErrUnknownKey, Key: "chekcs", Err: m}, "m"},
		{Error{Err: m}, "m"},
	} {
		require.Equal(t, tc.want, tc.e.Error())
		require.ErrorIs(t, &tc.e, ErrInvalid)
		require.ErrorIs(t, &tc.e, m)
		if tc.e.Kind != 0 {
			require.ErrorIs(t, &tc.e, tc.e.Kind)
		}
	}
	require.NotErrorIs(t, &Error{Kind: ErrBadValue, Err: m}, ErrUnknownKey)
	require.Equal(t, "unknown key", ErrUnknownKey.Error())
}

// TestErrorKinds: each error says what is wrong, where and with which
// key, in fields a caller can match, never in text it must search.
func TestErrorKinds(t *testing.T) {
	type want struct {
		line int
		key  string
		kind ErrorKind
	}
	for _, tc := range []struct {
		name, yaml string
		daemon     bool
		want       want
	}{
		{"unknown key", "id: a\nchekcs: {}\n", false, want{2, "chekcs", ErrUnknownKey}},
		{"unknown nested key", "checks:\n  memroy: {}\n", false, want{2, "checks.memroy", ErrUnknownKey}},
		{"key the defaults cannot set", "defaults:\n  id: x\n", true, want{2, "defaults.id", ErrUnknownKey}},
		{"agent key in a daemon file", "command: [x]\n", true, want{1, "command", ErrUnknownKey}},
		{"bad size", "checks:\n  memory: {kill: 2Gb}\n", false, want{2, "checks.memory.kill", ErrBadValue}},
		{"wrong type", "checks: [a]\n", false, want{1, "checks", ErrBadValue}},
		{"bad enum", "mode: x\n", false, want{1, "mode", ErrBadValue}},
		{"bad id", "id: .x\n", false, want{1, "id", ErrBadValue}},
		{"warn above kill", "checks:\n  tokens:\n    warn: 2\n    kill: 1\n", false, want{3, "checks.tokens", ErrConflict}},
		{"backoff above max", "restart:\n  backoff: 10m\n", false, want{2, "restart.backoff", ErrConflict}},
		{"heartbeat min above max", "checks:\n  heartbeat_timeout: 1s\n  heartbeat_timeout_min: 2s\n", false, want{3, "checks.heartbeat_timeout_min", ErrConflict}},
		{"syntax", "id: [a\n", false, want{2, "", ErrSyntax}},
		{"syntax at the end, no final newline", "id: [a", false, want{1, "", ErrSyntax}},
		{"syntax at the end, CR line breaks", "id: a\rcommand: [b", false, want{2, "", ErrSyntax}},
		{"duplicate key", "id: a\nid: b\n", false, want{2, "", ErrSyntax}},
		{"merge key", "<<: {id: a}\n", false, want{1, "", ErrSyntax}},
		{"two documents", "id: a\n---\nid: b\n", false, want{2, "", ErrSyntax}},
		{"not UTF-8", "id: \xff\n", false, want{0, "", ErrSyntax}},
		{"empty daemon file", "", true, want{0, "", ErrMissing}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.daemon {
				_, err = ParseDaemon([]byte(tc.yaml), "f.yaml")
			} else {
				_, err = ParseAgent([]byte(tc.yaml), "f.yaml", nil)
			}
			var e *Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, tc.want, want{e.Line, e.Key, e.Kind}, "%v", err)
			require.Equal(t, "f.yaml", e.File)
			require.ErrorIs(t, err, tc.want.kind)
			require.ErrorIs(t, err, ErrInvalid)
		})
	}
}

func TestValidateErrorKinds(t *testing.T) {
	a := DefaultAgent()
	a.Source = "bot.yaml"
	a.Checks.Memory = &Sustained{Warn: 2, Kill: 1}
	err := a.Validate(true)
	var kinds []ErrorKind
	var keys []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ce *Error
		require.ErrorAs(t, e, &ce)
		require.Equal(t, "bot.yaml", ce.File)
		require.Zero(t, ce.Line, "Validate knows no lines")
		kinds, keys = append(kinds, ce.Kind), append(keys, ce.Key)
	}
	require.Equal(t, []ErrorKind{ErrMissing, ErrMissing, ErrConflict}, kinds)
	require.Equal(t, []string{"id", "command", "checks.memory"}, keys)
}

// TestYAMLSyntaxErrorFormat pins the text of yaml's syntax errors that
// syntaxError reads: if a new version of the library changes it, this
// fails rather than errors landing on the wrong line.
func TestYAMLSyntaxErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, raw string
		line            int
	}{
		// a scanner error: yaml's line is 1-based
		{"scanner", "id: a\ncommand: [x]\n\tchecks: {}\n", "yaml: line 3: found character that cannot start any token", 3},
		// a parser error: yaml's line is 0-based (the flow sequence opens on line 2)
		{"parser", "id: a\ncommand: [x\nchecks: {}\n", "yaml: line 1: did not find expected ',' or ']'", 2},
		{"parser, block", "id: x\nchecks:\n  - 1\n  memory: 2\n", "yaml: line 2: did not find expected '-' indicator", 3},
		// a problem on the first line: yaml leaves the line out
		{"first line", "id: a: b\n", "yaml: mapping values are not allowed in this context", 1},
		// an unknown alias: yaml does not say where
		{"unknown anchor", "id: a\ncommand: *cmd\n", "yaml: unknown anchor 'cmd' referenced", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n yaml.Node
			err := yaml.Unmarshal([]byte(tc.yaml), &n)
			require.EqualError(t, err, tc.raw, "the library's text changed: update syntaxError")
			e := syntaxError("f.yaml", []byte(tc.yaml), err)
			require.Equal(t, tc.line, e.Line)
			require.Equal(t, ErrSyntax, e.Kind)
		})
	}
}
