// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"strconv"
	"strings"
)

// ErrInvalid is wrapped by every error that reports invalid configuration
// (as opposed to a file that cannot be read): errors.Is(err, ErrInvalid).
var ErrInvalid = errors.New("invalid configuration")

// ErrorKind says what is wrong with a configuration, for callers that act
// on it. Each kind is also an error that *Error wraps, so both
// errors.Is(err, config.ErrUnknownKey) and e.Kind == config.ErrUnknownKey
// work.
type ErrorKind uint8

// The kinds of Error.
const (
	// ErrSyntax: the file is not one YAML document of UTF-8 of at most
	// 1 MiB whose keys are unique strings (YAML syntax, a second document,
	// a duplicate key, a merge key <<).
	ErrSyntax ErrorKind = iota + 1
	// ErrUnknownKey: a key the schema does not have, an agent key that
	// the daemon's defaults section cannot set (id, command, cwd), or one
	// that does not apply where the file is read (control_plane in an
	// agent file under the daemon).
	ErrUnknownKey
	// ErrBadValue: a value of the wrong type, out of range or not one of
	// those allowed ("2Gb", a negative timeout, mode: enforcing).
	ErrBadValue
	// ErrMissing: a required key is absent (the daemon's id and command,
	// control_plane.url), or the daemon file is empty.
	ErrMissing
	// ErrConflict: values that are valid alone but not together (warn
	// above kill, backoff above max_backoff).
	ErrConflict
	// ErrHost: a value valid in itself that this host cannot honour (a
	// user or group that does not exist, a command the agent's user
	// cannot execute, an agents_dir that does not exist); see
	// Daemon.CheckHost and Agent.CheckHost.
	ErrHost
)

var kindText = [...]string{
	ErrSyntax:     "YAML syntax",
	ErrUnknownKey: "unknown key",
	ErrBadValue:   "bad value",
	ErrMissing:    "missing key",
	ErrConflict:   "conflicting values",
	ErrHost:       "not usable on this host",
}

func (k ErrorKind) Error() string {
	if int(k) < len(kindText) && kindText[k] != "" {
		return kindText[k]
	}
	return "configuration error " + strconv.Itoa(int(k))
}

// maxErrors bounds how many errors one parse reports; the rest are counted.
const maxErrors = 20

// Error is one problem in a configuration, located in its file. Its text is
// "FILE:LINE: KEY: what is wrong", for example
//
//	agent.yaml:12: checks.memory.kill: bad size "2Gb": unknown unit "Gb" (…)
//	agent.yaml:4: unknown key "chekcs" (known: id, labels, …); did you mean "checks"?
//
// A parse that finds several problems returns them joined with
// errors.Join, in file order; errors.As finds the first.
type Error struct {
	File string // the file as given to Load/Parse; "" for flags only
	// Line and Column are 1-based; 0 when unknown (a key that is missing,
	// a value that came from a flag).
	Line, Column int
	// Key is the dotted path of the key concerned ("checks.memory.kill",
	// "env.PATH", "command[1]"); "" for the file as a whole. For
	// ErrUnknownKey it is the unknown key itself ("checks.memroy"), which
	// the text names under the mapping that holds it
	// (`checks: unknown key "memroy"`).
	Key string
	// Kind says what is wrong. It is 0 only for the last error of a
	// capped list, which counts the errors not shown.
	Kind ErrorKind
	Err  error // what is wrong, without file, line or key
}

func (e *Error) Error() string {
	msg := e.Err.Error()
	key := e.Key
	if e.Kind == ErrUnknownKey {
		key = parentKey(key)
	}
	if key != "" {
		msg = key + ": " + msg
	}
	switch {
	case e.File != "" && e.Line > 0:
		return e.File + ":" + strconv.Itoa(e.Line) + ": " + msg
	case e.File != "":
		return e.File + ": " + msg
	case e.Line > 0:
		return "line " + strconv.Itoa(e.Line) + ": " + msg
	default:
		return msg
	}
}

// Unwrap makes errors.Is(err, ErrInvalid) and errors.Is(err, e.Kind) true,
// and reaches the cause (a parse error of ParseSize, …).
func (e *Error) Unwrap() []error {
	if e.Kind == 0 {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid, e.Kind, e.Err}
}

// parentKey is the path of the mapping that holds key: "checks" for
// "checks.memroy", "" for a top-level key.
func parentKey(key string) string {
	i := strings.LastIndexAny(key, ".[")
	if i < 0 {
		return ""
	}
	return key[:i]
}

// problem is one semantic error of a typed configuration. key is the key
// path shown in the message; at is the key path whose line locates it in a
// file (key when empty).
type problem struct {
	key, at string
	kind    ErrorKind
	msg     string
}

// joinErrors turns collected errors into one error, nil when there are none.
func joinErrors(errs []*Error) error {
	if len(errs) == 0 {
		return nil
	}
	if len(errs) == 1 {
		return errs[0]
	}
	list := make([]error, len(errs))
	for i, e := range errs {
		list[i] = e
	}
	return errors.Join(list...)
}
