// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"strings"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// maxPeriod is the longest cycle of tool calls recognised (A-B-C).
const maxPeriod = 3

type toolKey struct{ name, args string }

// toolHistory keeps the last maxPeriod*repeats tool calls.
type toolHistory struct {
	repeats int
	calls   []toolKey
}

// maxPrealloc bounds the history allocated up front (a huge repeats grows
// it only as calls arrive).
const maxPrealloc = 64

// resize applies a new config; the check is off unless repeats >= 2.
func (h *toolHistory) resize(l *config.ToolLoop) {
	h.repeats = 0
	if l != nil && l.Repeats >= 2 {
		h.repeats = l.Repeats
	}
	n := maxPeriod * h.repeats
	if len(h.calls) > n {
		h.calls = h.calls[len(h.calls)-n:]
	}
	if c := min(n, maxPrealloc); cap(h.calls) < c {
		h.calls = append(make([]toolKey, 0, c), h.calls...)
	}
}

func (h *toolHistory) add(k toolKey) {
	n := maxPeriod * h.repeats
	if n == 0 {
		return
	}
	if len(h.calls) == n {
		copy(h.calls, h.calls[1:])
		h.calls = h.calls[:n-1]
	}
	h.calls = append(h.calls, k)
}

// loop reports the shortest period p (1..3) such that the last p*repeats
// calls are one cycle of p calls repeated `repeats` times. A cycle may
// repeat a call (A-A-B); one whose calls are all the same is period 1,
// found first.
func (h *toolHistory) loop() (period int, ok bool) {
	if h.repeats < 2 {
		return 0, false // off
	}
	for p := 1; p <= maxPeriod; p++ {
		w := p * h.repeats
		if len(h.calls) < w {
			return 0, false
		}
		tail := h.calls[len(h.calls)-w:]
		repeating := true
		for i := p; i < w; i++ {
			if tail[i] != tail[i-p] {
				repeating = false
				break
			}
		}
		if repeating {
			return p, true
		}
	}
	return 0, false
}

// cycle names the last p calls "a → b".
func (h *toolHistory) cycle(p int) string {
	names := make([]string, 0, p)
	for _, k := range h.calls[len(h.calls)-p:] {
		names = append(names, k.name)
	}
	return strings.Join(names, " → ")
}
