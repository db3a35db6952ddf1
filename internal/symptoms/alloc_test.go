// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !race

package symptoms

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHotPathDoesNotAllocate: a healthy agent's heartbeats, tool calls,
// declared waits and samples, its requests through the gateway, and the
// timer's Tick and NextDeadline, cost no allocation.
// (Not under -race, which changes what escapes.)
func TestHotPathDoesNotAllocate(t *testing.T) {
	start := time.Now()
	e := New(typicalConfig(), start)
	e.Observe(msg(ready), start)
	beat := typicalBeat()
	call := msg(watchdog, tool("search", strings.Repeat("ab", 32)))
	wait := msg(extend(time.Minute)) // a long wait declared, within the cap
	names := []string{"search", "fetch", "write", "read"}
	sample := Sample{RSSBytes: 300 << 20, CPUPercent: 40, Procs: 12, FDs: 80, HaveFDs: true}
	now := start
	i := 0
	for name, f := range map[string]func(){
		"Observe": func() {
			beat.Progress, beat.Tokens = uint64(i), uint64(i)*100
			e.Observe(beat, now)
		},
		"Observe with a tool call": func() {
			call.Tool = names[i%len(names)]
			e.Observe(call, now)
		},
		"Observe EXTEND_TIMEOUT_USEC": func() {
			e.Observe(wait, now)
			e.Observe(beat, now)
		},
		"ObserveSample": func() { e.ObserveSample(sample, now) },
		"Tick and NextDeadline": func() {
			e.Tick(now)
			e.NextDeadline()
		},
	} {
		allocs := testing.AllocsPerRun(1000, func() {
			i++
			now = now.Add(time.Millisecond)
			f()
		})
		require.Zero(t, allocs, name)
	}
	_, ok := e.Terminal()
	require.False(t, ok)

	// With the gateway: a request's arrival, its end and its spend, which
	// the budgets and the rates' windows count.
	cfg := typicalConfig()
	cfg.Metered = true
	m := New(cfg, start)
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Millisecond)
		m.RequestSent(now)
		m.ResponseEnded(true, now)
		m.ObserveMetered(1200, 0.002, true, "gpt-4.1-mini", nil, now)
	})
	require.Zero(t, allocs, "a metered request")
	_, ok = m.Terminal()
	require.False(t, ok)
}
