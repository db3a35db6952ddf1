// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// checks lists the checks of symptoms.
func checks(syms []Symptom) []Check {
	var out []Check
	for _, s := range syms {
		out = append(out, s.Check)
	}
	return out
}

// TestShadowReportsEveryCheckOnce: in shadow mode a terminal symptom does
// not stop evaluation: a later max_runtime after a tool_loop is reported
// too; each check fires at most once; Terminal keeps the first.
func TestShadowReportsEveryCheckOnce(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	cfg := config.Checks{HeartbeatTimeout: 3 * time.Second, MaxRuntime: time.Minute,
		ToolLoop: &config.ToolLoop{Repeats: 3}}
	var evs []event
	evs = append(evs, event{0, msg(ready)})
	for i := 1; i <= 20; i++ { // the same call every second: a loop at 3s, and again and again
		evs = append(evs, event{time.Duration(i) * time.Second, msg(watchdog, tool("search", hash))})
	}
	evs = append(evs, beats(21*time.Second, 90*time.Second, time.Second)...)

	for _, tc := range []struct {
		shadow bool
		want   []Check
		at     []time.Duration
	}{
		{false, []Check{ToolLoop}, []time.Duration{3 * time.Second}},
		{true, []Check{ToolLoop, MaxRuntime, HeartbeatTimeout},
			[]time.Duration{3 * time.Second, time.Minute, 93 * time.Second}},
	} {
		name := "enforce stops at the first"
		if tc.shadow {
			name = "shadow goes on"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				e := New(Config{Checks: cfg, Shadow: tc.shadow}, start)
				ts := terminals(drive(t, e, start, evs, 10*time.Minute))
				require.Equal(t, tc.want, checks(ts))
				for i, s := range ts {
					requireTime(t, start.Add(tc.at[i]), s.At, s.Message)
				}
				term, ok := e.Terminal()
				require.True(t, ok)
				require.Equal(t, ts[0], term, "Terminal is the first")
				require.Equal(t, ts, terminals(e.Log()))
				requireNoDeadline(t, e)
			})
		})
	}
}

// TestShadowLateTick: a Tick that finds several deadlines passed reports
// each, earliest first, all detected now; nothing stays armed in the past.
func TestShadowLateTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := New(Config{Checks: config.Checks{HeartbeatTimeout: 3 * time.Second, ProgressTimeout: 5 * time.Second,
			MaxRuntime: 20 * time.Second}, Shadow: true}, start)
		require.Empty(t, e.Observe(msg(ready, progress(1)), start))
		time.Sleep(30 * time.Second)
		syms := e.Tick(time.Now())
		require.Equal(t, []Check{HeartbeatTimeout, ProgressTimeout, MaxRuntime}, checks(syms))
		for _, s := range syms {
			requireTime(t, time.Now(), s.At)
		}
		requireNoDeadline(t, e)
		require.Empty(t, e.Tick(time.Now().Add(time.Hour)))
	})
}

// TestShadowKeepsObserving: after a terminal symptom a shadow engine still
// applies messages and samples: a check that has not fired warns and
// fires; one that fired does neither again; the deadlines of fired checks
// stay disarmed whatever the agent sends.
func TestShadowKeepsObserving(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := New(Config{Checks: config.Checks{HeartbeatTimeout: 3 * time.Second,
			Memory: &config.Sustained{Warn: 100, Kill: 200},
			Tokens: &config.Limit{Warn: 10, Kill: 20}}, Shadow: true}, start)
		require.Empty(t, e.Observe(msg(ready), start))

		time.Sleep(time.Second)
		require.Equal(t, []Check{Tokens}, checks(e.Observe(msg(watchdog, tokens(50)), time.Now())))
		require.Empty(t, e.Observe(msg(watchdog, tokens(60)), time.Now()), "tokens fired: not again")

		require.Equal(t, []Severity{Warning}, severities(e.ObserveSample(Sample{RSSBytes: 150}, time.Now())))
		require.Equal(t, []Check{Memory}, checks(e.ObserveSample(Sample{RSSBytes: 250}, time.Now())))

		requireDeadline(t, e, time.Now().Add(3*time.Second))
		time.Sleep(5 * time.Second)
		require.Equal(t, []Check{HeartbeatTimeout}, checks(e.Tick(time.Now())))
		require.Empty(t, e.Observe(msg(watchdog), time.Now()))
		requireNoDeadline(t, e) // a beat does not re-arm a check that fired

		term, _ := e.Terminal()
		require.Equal(t, Tokens, term.Check)
		require.Equal(t, []Check{Tokens, Memory, Memory, HeartbeatTimeout}, checks(e.Log()))
	})
}

// TestShadowOff: reconfigured to enforce after a terminal symptom in
// shadow mode, nothing stays armed.
func TestShadowOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		cfg := Config{Checks: config.Checks{HeartbeatTimeout: 3 * time.Second, MaxRuntime: time.Minute,
			Tokens: &config.Limit{Kill: 1}}, Shadow: true}
		e := New(cfg, start)
		require.Equal(t, []Check{Tokens}, checks(e.Observe(msg(ready, tokens(5)), start)))
		requireDeadline(t, e, start.Add(3*time.Second))
		cfg.Shadow = false
		require.Empty(t, e.Reconfigure(cfg, start))
		requireNoDeadline(t, e)
	})
}

func severities(syms []Symptom) []Severity {
	var out []Severity
	for _, s := range syms {
		out = append(out, s.Severity)
	}
	return out
}
