package config

import (
	"errors"
	"strconv"
)

// ErrInvalid is wrapped by every error that reports invalid configuration
// (as opposed to a file that cannot be read): errors.Is(err, ErrInvalid).
var ErrInvalid = errors.New("invalid configuration")

// maxErrors bounds how many errors one parse reports; the rest are counted.
const maxErrors = 20

// Error is one problem in a configuration, located in its file. Line and
// Column are 1-based; 0 when unknown (a key that is missing, a value that
// came from a flag). Its text is "FILE:LINE: MSG", for example
//
//	agent.yaml:12: checks.memory.kill: bad size "2Gb": unknown unit "Gb" (…)
//
// A parse that finds several problems returns them joined with
// errors.Join, in file order; errors.As finds the first.
type Error struct {
	File   string // the file as given to Load/Parse; "" for flags only
	Line   int
	Column int
	Msg    string // "KEY.PATH: what is wrong", or just what is wrong at the top level
}

func (e *Error) Error() string {
	switch {
	case e.File != "" && e.Line > 0:
		return e.File + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
	case e.File != "":
		return e.File + ": " + e.Msg
	case e.Line > 0:
		return "line " + strconv.Itoa(e.Line) + ": " + e.Msg
	default:
		return e.Msg
	}
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *Error) Unwrap() error { return ErrInvalid }

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
