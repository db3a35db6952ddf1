// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/config"
)

func TestReconfigureDeadlines(t *testing.T) {
	hb := func(d time.Duration) Config { return Config{Checks: config.Checks{HeartbeatTimeout: d}} }
	for _, tc := range []struct {
		name     string
		next     Config
		fires    Check
		deadline time.Duration // when nothing fires: the next deadline from the start, 0 = none
	}{
		{name: "a shorter timeout whose deadline passed fires at once", next: hb(5 * time.Second), fires: HeartbeatTimeout},
		{name: "a shorter timeout whose deadline is ahead moves it", next: hb(8 * time.Second), deadline: 8 * time.Second},
		{name: "a longer timeout", next: hb(time.Minute), deadline: time.Minute},
		{name: "turned off", next: Config{}},
		{name: "a runtime limit already passed",
			next: Config{Checks: config.Checks{HeartbeatTimeout: 10 * time.Second, MaxRuntime: 5 * time.Second}}, fires: MaxRuntime},
		{name: "a progress timeout counts from the last progress",
			next:  Config{Checks: config.Checks{HeartbeatTimeout: 10 * time.Second, ProgressTimeout: 5 * time.Second}},
			fires: ProgressTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				e := New(hb(10*time.Second), start)
				require.Empty(t, e.Observe(msg(ready), start))
				time.Sleep(6 * time.Second)
				syms := e.Reconfigure(tc.next, time.Now())
				if tc.fires != "" {
					s := one(t, syms)
					require.Equal(t, tc.fires, s.Check)
					requireTime(t, time.Now(), s.At)
					require.Equal(t, "6.00s", s.Observed)
					requireNoDeadline(t, e)
					return
				}
				require.Empty(t, syms)
				if tc.deadline == 0 {
					requireNoDeadline(t, e)
					time.Sleep(24 * time.Hour)
					require.Empty(t, e.Tick(time.Now()))
					return
				}
				requireDeadline(t, e, start.Add(tc.deadline))
			})
		})
	}
}

func TestReconfigureStartup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := New(Config{Checks: config.Checks{StartupTimeout: time.Minute}}, start)
		time.Sleep(30 * time.Second)
		s := one(t, e.Reconfigure(Config{Checks: config.Checks{StartupTimeout: 10 * time.Second}}, time.Now()))
		require.Equal(t, StartupTimeout, s.Check)
		require.Equal(t, "no READY or heartbeat 30.00s after start (startup timeout 10s)", s.Message)
	})
}

// TestReconfigureKeepsWatchdogUSec: the agent's own WATCHDOG_USEC survives
// a live edit, clamped to the new bounds.
func TestReconfigureKeepsWatchdogUSec(t *testing.T) {
	e := New(Config{Checks: config.Checks{HeartbeatTimeout: 10 * time.Second}}, t0)
	require.Empty(t, e.Observe(msg(ready, watchdogUSec(4e6)), t0))
	require.Equal(t, 4*time.Second, e.State().HeartbeatTimeout)

	for _, tc := range []struct {
		checks config.Checks
		want   time.Duration
	}{
		{config.Checks{HeartbeatTimeout: 20 * time.Second}, 4 * time.Second},
		{config.Checks{HeartbeatTimeout: 3 * time.Second}, 3 * time.Second},
		{config.Checks{HeartbeatTimeout: 10 * time.Second, HeartbeatTimeoutMin: 5 * time.Second}, 5 * time.Second},
		{config.Checks{}, 0},
		{config.Checks{HeartbeatTimeout: 10 * time.Second}, 4 * time.Second},
	} {
		require.Empty(t, e.Reconfigure(Config{Checks: tc.checks}, at(1)))
		require.Equal(t, tc.want, e.State().HeartbeatTimeout, "%+v", tc.checks)
	}
}

// TestReconfigureThresholds: thresholds apply at once; a check turned off
// stops, and turned on again starts afresh.
func TestReconfigureThresholds(t *testing.T) {
	memory := Config{Checks: config.Checks{Memory: &config.Sustained{Kill: gib, For: 3 * time.Second}}}
	t.Run("memory off forgets its clock", func(t *testing.T) {
		e := New(memory, t0)
		for i := range 3 {
			require.Empty(t, e.ObserveSample(Sample{RSSBytes: 2 * gib}, at(i)))
		}
		require.Empty(t, e.Reconfigure(Config{}, at(3)))
		for i := 3; i < 10; i++ {
			require.Empty(t, e.ObserveSample(Sample{RSSBytes: 2 * gib}, at(i)))
		}
		require.Empty(t, e.Reconfigure(memory, at(10)))
		for i := 10; i < 13; i++ {
			require.Empty(t, e.ObserveSample(Sample{RSSBytes: 2 * gib}, at(i)), "sample %d", i)
		}
		require.Equal(t, Memory, one(t, e.ObserveSample(Sample{RSSBytes: 2 * gib}, at(13))).Check)
	})
	t.Run("a lower threshold keeps the clock", func(t *testing.T) {
		e := New(memory, t0)
		for i := range 3 {
			require.Empty(t, e.ObserveSample(Sample{RSSBytes: 2 * gib}, at(i)))
		}
		lower := Config{Checks: config.Checks{Memory: &config.Sustained{Kill: gib, For: 2 * time.Second}}}
		require.Empty(t, e.Reconfigure(lower, at(2)), "kernel checks wait for the next sample")
		require.Equal(t, Memory, one(t, e.ObserveSample(Sample{RSSBytes: 2 * gib}, at(3))).Check)
	})
	t.Run("tokens off", func(t *testing.T) {
		e := New(Config{Checks: config.Checks{Tokens: &config.Limit{Kill: 100}}}, t0)
		require.Empty(t, e.Reconfigure(Config{}, at(1)))
		require.Empty(t, e.Observe(msg(tokens(1000)), at(2)))
		_, ok := e.Terminal()
		require.False(t, ok)
	})
	t.Run("a check turned off and on again warns again", func(t *testing.T) {
		on := Config{Checks: config.Checks{Tokens: &config.Limit{Warn: 100}}}
		e := New(on, t0)
		require.Equal(t, Warning, one(t, e.Observe(msg(tokens(150)), at(1))).Severity)
		require.Empty(t, e.Observe(msg(tokens(160)), at(2)))
		require.Empty(t, e.Reconfigure(Config{}, at(3)))
		require.Equal(t, "tokens 160 over warning threshold 100", one(t, e.Reconfigure(on, at(4))).Message)
		require.Empty(t, e.Observe(msg(tokens(170)), at(5)))
	})
	t.Run("budgets already over the new thresholds fire at once", func(t *testing.T) {
		e := New(Config{Checks: config.Checks{Cost: &config.CostLimit{Kill: 10}}}, t0)
		require.Empty(t, e.Observe(msg(tokens(500), cost(5), progress(40)), at(1)))
		for range 3 {
			require.Empty(t, e.Observe(msg(errorText("429")), at(1)))
		}
		syms := e.Reconfigure(Config{Checks: config.Checks{
			Tokens: &config.Limit{Warn: 400}, Cost: &config.CostLimit{Kill: 2},
			Steps: &config.Limit{Warn: 30}, ErrorStreak: &config.Limit{Warn: 3},
		}}, at(2))
		require.Equal(t, []Symptom{
			{At: at(2), Check: Tokens, Severity: Warning, Observed: "500", Threshold: "400",
				Message: "tokens 500 over warning threshold 400"},
			{At: at(2), Check: Cost, Severity: Terminal, Observed: "$5.00", Threshold: "$2.00",
				Message: "cost $5.00 over kill threshold $2.00"},
			{At: at(2), Check: Steps, Severity: Warning, Observed: "40", Threshold: "30",
				Message: "steps 40 over warning threshold 30"},
			{At: at(2), Check: ErrorStreak, Severity: Warning, Observed: "3", Threshold: "3",
				Message: "3 errors in a row without progress (warning threshold 3; last: 429)"},
		}, syms)
		require.Empty(t, e.Reconfigure(e.cfg, at(3)), "nothing twice")
	})
	t.Run("an unchanged config says nothing new", func(t *testing.T) {
		cfg := Config{Checks: config.Checks{Tokens: &config.Limit{Warn: 100, Kill: 1000}}}
		e := New(cfg, t0)
		require.Len(t, e.Observe(msg(tokens(500)), at(1)), 1)
		require.Empty(t, e.Reconfigure(cfg, at(2)))
	})
}
