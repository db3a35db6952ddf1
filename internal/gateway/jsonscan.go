// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// A stream's events are mostly deltas of text, whose only figure for the
// meter is their length; decoding each with encoding/json was a quarter
// of a stream's CPU. jsonScan walks an event's JSON without decoding it:
// it checks the syntax as strictly as encoding/json does (RFC 8259), hands
// out the members' raw values, and declines — the caller then decodes the
// event with encoding/json — wherever the two could disagree: a key that
// is not plain ASCII (encoding/json folds keys by Unicode rules), a string
// that needs unescaping, a value of a type the decoding would reject.

// maxScanDepth bounds the nesting the scanner walks; deeper values are
// left to encoding/json.
const maxScanDepth = 64

// jsonScan is a cursor in one JSON text. Any error sets bad, and every
// later call returns at once.
type jsonScan struct {
	b   []byte
	i   int
	bad bool
}

func (s *jsonScan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// end is true when only whitespace is left (one JSON text, as
// json.Unmarshal requires).
func (s *jsonScan) end() bool {
	s.ws()
	return !s.bad && s.i == len(s.b)
}

// peek is the next byte after whitespace, 0 at the end.
func (s *jsonScan) peek() byte {
	s.ws()
	if s.bad || s.i == len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// eat consumes c, the next byte after whitespace.
func (s *jsonScan) eat(c byte) bool {
	if s.peek() != c {
		s.bad = true
		return false
	}
	s.i++
	return true
}

// value skips one value and returns its raw bytes.
func (s *jsonScan) value() []byte {
	s.ws()
	start := s.i
	s.skip(0)
	if s.bad {
		return nil
	}
	return s.b[start:s.i]
}

func (s *jsonScan) skip(depth int) {
	if depth > maxScanDepth {
		s.bad = true
		return
	}
	switch c := s.peek(); {
	case c == '"':
		s.str()
	case c == '{':
		for more := s.open('{'); more; more = s.next('}') {
			if _, ok := s.key(); !ok {
				return
			}
			s.skip(depth + 1)
		}
	case c == '[':
		for more := s.open('['); more; more = s.next(']') {
			s.skip(depth + 1)
		}
	case c == '-' || c >= '0' && c <= '9':
		s.number()
	case c == 't':
		s.literal("true")
	case c == 'f':
		s.literal("false")
	case c == 'n':
		s.literal("null")
	default:
		s.bad = true
	}
}

// open consumes an object's or array's opening; more is false when it is
// empty (its closing consumed too).
func (s *jsonScan) open(c byte) (more bool) {
	if !s.eat(c) {
		return false
	}
	closing := byte('}')
	if c == '[' {
		closing = ']'
	}
	if s.peek() == closing {
		s.i++
		return false
	}
	return !s.bad
}

// next consumes what follows a member or element: a comma (more) or the
// closing byte.
func (s *jsonScan) next(closing byte) (more bool) {
	switch s.peek() {
	case ',':
		s.i++
		return true
	case closing:
		s.i++
	default:
		s.bad = true
	}
	return false
}

// object walks an object's members: member gets each key, with the
// cursor at its value, and reads or skips the value, or returns false to
// give the scan up. object is false when the value is no object, a key
// is not plain, member gave up, or the syntax is bad.
func (s *jsonScan) object(member func(k []byte) bool) bool {
	if s.peek() != '{' {
		return false
	}
	for more := s.open('{'); more; more = s.next('}') {
		k, ok := s.key()
		if !ok || !member(k) || s.bad {
			return false
		}
	}
	return !s.bad
}

// key reads an object member's key and its colon. ok is false for a key
// that is not plain (an escape, a byte past ASCII): the scan is then bad,
// since encoding/json may match it where a plain comparison would not.
func (s *jsonScan) key() (k []byte, ok bool) {
	raw, plain := s.str()
	if s.bad || !plain || !isASCII(raw) {
		s.bad = true
		return nil, false
	}
	return raw[1 : len(raw)-1], s.eat(':')
}

// str skips a string and returns it with its quotes; plain is true when
// it has no escape and is valid UTF-8, so that its bytes are what it
// decodes to.
func (s *jsonScan) str() (raw []byte, plain bool) {
	if !s.eat('"') {
		return nil, false
	}
	start, plain, ascii := s.i-1, true, true
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			raw = s.b[start:s.i]
			return raw, plain && (ascii || utf8.Valid(raw))
		case c < 0x20:
			s.bad = true
			return nil, false
		case c == '\\':
			plain = false
			s.escape()
			if s.bad {
				return nil, false
			}
			continue
		case c >= 0x80:
			ascii = false
		}
		s.i++
	}
	s.bad = true
	return nil, false
}

// escape skips one escape sequence of a string, at its backslash.
func (s *jsonScan) escape() {
	if s.i+1 >= len(s.b) {
		s.bad = true
		return
	}
	switch s.b[s.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i += 2
	case 'u':
		if s.i+6 > len(s.b) {
			s.bad = true
			return
		}
		for _, h := range s.b[s.i+2 : s.i+6] {
			if !isHex(h) {
				s.bad = true
				return
			}
		}
		s.i += 6
	default:
		s.bad = true
	}
}

// number skips a number: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
func (s *jsonScan) number() {
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.i < len(s.b) && s.b[s.i] >= '1' && s.b[s.i] <= '9':
		s.digits()
	default:
		s.bad = true
		return
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if !s.digits() {
			s.bad = true
			return
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			s.bad = true
		}
	}
}

func (s *jsonScan) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

func (s *jsonScan) literal(lit string) {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		s.bad = true
		return
	}
	s.i += len(lit)
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// is compares a plain ASCII key with a field's name as encoding/json
// matches them: case-insensitively.
func is(key []byte, name string) bool { return bytes.EqualFold(key, []byte(name)) }

// plainString is a raw value that is a string decoding to its own bytes
// (no escape, valid UTF-8), without its quotes.
func plainString(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) {
		return nil, false
	}
	return raw[1 : len(raw)-1], true
}

// scanInt is a raw value that decodes into an int (int64): an integer
// literal in range. Anything else (null included) is !ok. Parsed here:
// strconv would allocate the string.
func scanInt(raw []byte) (int, bool) {
	neg := len(raw) > 0 && raw[0] == '-'
	digits := raw
	if neg {
		digits = raw[1:]
	}
	if len(digits) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range digits {
		if c < '0' || c > '9' || n > (1<<63)/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	switch {
	case neg && n <= 1<<63:
		return int(-int64(n-1) - 1), true
	case !neg && n < 1<<63:
		return int(n), true
	}
	return 0, false
}

// scanDeltaTokens is rawDeltaTokens without a decode for a plain string.
func scanDeltaTokens(raw []byte) int64 {
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 && (isASCII(raw) || utf8.Valid(raw)) {
		return lenTokens(len(raw) - 2)
	}
	return rawDeltaTokens(json.RawMessage(raw))
}

// members is the set of an object's members seen, to refuse one named
// twice: encoding/json keeps the last, the scan would count both.
type members uint16

// once marks member bit seen; the scan is bad if it already was.
func (ms *members) once(s *jsonScan, bit members) {
	if *ms&bit != 0 {
		s.bad = true
	}
	*ms |= bit
}
