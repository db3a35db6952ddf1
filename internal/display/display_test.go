// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package display_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hermeskill/hermeskilld/internal/display"
)

func TestClean(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"plain ünïcode, 日本語", "plain ünïcode, 日本語"},
		{"a\nb\tc\x1b[31m\u202e", `a\nb\tc\x1b[31m\u202e`},
		{"\a\b\f\r\v", `\a\b\f\r\v`},
		{"nul\x00 del\x7f", `nul\x00 del\x7f`},
		{"c1 \u0085 \u009b[2J", `c1 \u0085 \u009b[2J`},
		{"bidi \u2066x\u2069 \u200f \u061c", `bidi \u2066x\u2069 \u200f \u061c`},
		{"bad utf-8 \xff", "bad utf-8 \xff"},
		{"bad utf-8 \xff\n", "bad utf-8 \xff\\n"},
		{`a literal \n stays`, `a literal \n stays`},
	} {
		assert.Equal(t, tc.want, display.Clean(tc.in), "%q", tc.in)
	}
}

func TestCleanKeepTabs(t *testing.T) {
	assert.Equal(t, "ok\tcolumn", display.CleanKeepTabs("ok\tcolumn"))
	assert.Equal(t, `\x1b]0;pwned\atitle\n`, display.CleanKeepTabs("\x1b]0;pwned\atitle\n"))
}

// Nothing to escape: s itself, no copy.
func TestCleanDoesNotAllocate(t *testing.T) {
	s := "research-bot: indexing 3/10"
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = display.Clean(s) }))
}

func TestCut(t *testing.T) {
	assert.Equal(t, "short", display.Cut("short", 5))
	assert.Equal(t, "shor…", display.Cut("shorter", 5))
	assert.Equal(t, "ünï…", display.Cut("ünïcode", 4), "runes, not bytes")
	assert.Equal(t, "…", display.Cut("ab", 1))
}

func TestOrDash(t *testing.T) {
	assert.Equal(t, "-", display.OrDash(""))
	assert.Equal(t, "x", display.OrDash("x"))
}
