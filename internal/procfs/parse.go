// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

// Allocation-free helpers for the space separated numbers of proc files.
// strconv would need a string, and its errors keep one, so every call would
// allocate.

// fieldScanner splits b into tokens separated by spaces, tabs and newlines.
type fieldScanner struct{ b []byte }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' }

// next returns the next token, or false when there is none.
func (s *fieldScanner) next() ([]byte, bool) {
	i := 0
	for i < len(s.b) && isSpace(s.b[i]) {
		i++
	}
	j := i
	for j < len(s.b) && !isSpace(s.b[j]) {
		j++
	}
	tok := s.b[i:j]
	s.b = s.b[j:]
	return tok, len(tok) > 0
}

// parseUint parses a decimal uint64; false on an empty token, a non-digit or
// overflow.
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// parseInt parses a decimal int64 with an optional leading '-'.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	u, ok := parseUint(b)
	if !ok {
		return 0, false
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return -int64(u), true
	}
	if u > 1<<63-1 {
		return 0, false
	}
	return int64(u), true
}

// parseIntField parses an int that must fit the platform's int.
func parseIntField(b []byte) (int, bool) {
	v, ok := parseInt(b)
	if !ok || int64(int(v)) != v {
		return 0, false
	}
	return int(v), true
}
