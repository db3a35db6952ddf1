// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"errors"
	"strconv"
)

// The package's matchable errors.
var (
	// ErrKeyExposed: a key file may be read (or written) by its group or
	// by others (LoadKey).
	ErrKeyExposed = errors.New("readable or writable by group or others")
	// ErrKeyInvalid: a key file holds no key, or something that cannot be
	// sent in an HTTP header (LoadKey).
	ErrKeyInvalid = errors.New("not a key")
	// ErrNotLoopback: Config.Listen is not a loopback address (New).
	ErrNotLoopback = errors.New("not a loopback address")
)

// PricesError is an invalid price file, at a line (0: the whole file).
type PricesError struct {
	Source string
	Line   int
	Msg    string
}

func (e *PricesError) Error() string {
	if e.Line == 0 {
		return e.Source + ": " + e.Msg
	}
	return e.Source + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
}
