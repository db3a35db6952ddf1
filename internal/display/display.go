// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package display prepares text for an operator's terminal: what agents
// choose (ids, STATUS, error messages, their output) and what certificates
// and logs carry is input, and printing it must not let it drive the
// terminal (escape sequences), forge lines or table rows (newlines, tabs),
// or reorder what is shown (Unicode bidirectional controls).
//
// Every command that prints such text, and the certificate renderer, goes
// through Clean, so that the same text always shows the same way. For the
// same reason the figures of a run's LLM use are worded here once (Usage).
package display

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Clean returns s as one inert line: every control character (C0, DEL,
// C1: unicode.IsControl) and every bidirectional control is replaced by
// its escape as Go's %+q writes it (\n, \t, \a, \x1b, \u0085, \u202e, …).
// Other text, invalid UTF-8 included, is left as it is; s itself is
// returned when nothing needs escaping.
func Clean(s string) string { return escape(s, false) }

// CleanKeepTabs is Clean for a line of output shown as it was written,
// where tabs are kept.
func CleanKeepTabs(s string) string { return escape(s, true) }

func escape(s string, keepTabs bool) string {
	if strings.IndexFunc(s, func(r rune) bool { return needsEscape(r, keepTabs) }) < 0 {
		return s
	}
	b := make([]byte, 0, len(s)+16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if needsEscape(r, keepTabs) {
			q := strconv.QuoteRuneToASCII(r) // '\x1b', quotes included
			b = append(b, q[1:len(q)-1]...)
		} else {
			b = append(b, s[i:i+size]...) // as it was, invalid bytes too
		}
		i += size
	}
	return string(b)
}

func needsEscape(r rune, keepTabs bool) bool {
	if r == '\t' {
		return !keepTabs
	}
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}

// Cut shortens s to at most n runes (n >= 1), marking the cut with "…".
func Cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// OrDash is s, or "-" when s is empty: an empty table cell.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
