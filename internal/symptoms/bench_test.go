// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"strings"
	"testing"
	"time"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
)

// typicalConfig has every check on, with thresholds a healthy agent stays
// under.
func typicalConfig() Config {
	return Config{Checks: config.Checks{
		StartupTimeout: time.Minute, HeartbeatTimeout: 30 * time.Second,
		HeartbeatTimeoutMin: 100 * time.Millisecond, HeartbeatTimeoutMax: 30 * time.Second,
		ProgressTimeout: 5 * time.Minute, MaxRuntime: 1000 * time.Hour,
		Memory:      &config.Sustained{Warn: 1 << 30, Kill: 2 << 30, For: 10 * time.Second},
		CPUSpin:     &config.CPUSpin{Percent: 95, For: 2 * time.Minute, OnlyWithoutProgress: true},
		Procs:       &config.Sustained{Warn: 128, Kill: 256},
		FDs:         &config.Sustained{Warn: 2048, Kill: 4096},
		Tokens:      &config.Limit{Warn: 1 << 50, Kill: 1 << 51},
		Cost:        &config.CostLimit{Warn: 1e9, Kill: 2e9},
		ToolLoop:    &config.ToolLoop{Repeats: 5},
		ErrorStreak: &config.Limit{Warn: 5, Kill: 10},
		Steps:       &config.Limit{Warn: 1 << 50, Kill: 1 << 51},

		CostRate:     &config.CostRate{Warn: 1e9, Kill: 2e9, Per: time.Minute},
		RequestsRate: &config.Rate{Warn: 1 << 50, Kill: 1 << 51, Per: time.Minute},
		TokensRate:   &config.Rate{Warn: 1 << 50, Kill: 1 << 51, Per: time.Minute},
	}, StopTimeout: 5 * time.Second}
}

// typicalBeat is what a client sends every few seconds:
// WATCHDOG=1, PROGRESS, TOKENS, COST_USD and STATUS.
func typicalBeat() *heartbeat.Message {
	return msg(watchdog, progress(0), tokens(0), cost(0), status("step: planning"))
}

func benchObserve(b *testing.B, m *heartbeat.Message, next func(m *heartbeat.Message, i int)) {
	start := time.Now()
	e := New(typicalConfig(), start)
	e.Observe(msg(ready), start)
	now := start
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now = now.Add(time.Millisecond)
		next(m, i)
		e.Observe(m, now)
	}
	if s, ok := e.Terminal(); ok {
		b.Fatalf("a healthy agent was killed: %+v", s)
	}
}

func BenchmarkObserve(b *testing.B) {
	b.Run("typical", func(b *testing.B) {
		benchObserve(b, typicalBeat(), func(m *heartbeat.Message, i int) {
			m.Progress, m.Tokens, m.CostUSD = uint64(i), uint64(i)*100, float64(i)/1e6
		})
	})
	b.Run("watchdog+progress", func(b *testing.B) {
		benchObserve(b, msg(watchdog, progress(0)), func(m *heartbeat.Message, i int) { m.Progress = uint64(i) })
	})
	b.Run("tool", func(b *testing.B) {
		names := []string{"search", "fetch", "write", "read"}
		hash := strings.Repeat("ab", 32)
		benchObserve(b, msg(watchdog, progress(0), tool("search", hash)), func(m *heartbeat.Message, i int) {
			m.Progress = uint64(i)
			m.Tool = names[i%len(names)] // no loop: a cycle of 4
		})
	})
}

func BenchmarkObserveSample(b *testing.B) {
	start := time.Now()
	e := New(typicalConfig(), start)
	e.Observe(msg(ready), start)
	s := Sample{RSSBytes: 300 << 20, CPUPercent: 40, Procs: 12, FDs: 80, HaveFDs: true}
	now := start
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		e.ObserveSample(s, now)
	}
}

// BenchmarkTimer is the timer's path: Tick when it fires, NextDeadline to
// re-arm it.
func BenchmarkTimer(b *testing.B) {
	start := time.Now()
	e := New(typicalConfig(), start)
	e.Observe(msg(ready), start)
	now := start
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		e.Tick(now)
		e.NextDeadline()
	}
}

// BenchmarkObserveMetered is one request through the gateway: its
// arrival, its end and its spend (budgets and the rates' windows).
func BenchmarkObserveMetered(b *testing.B) {
	start := time.Now()
	cfg := typicalConfig()
	cfg.Metered = true
	e := New(cfg, start)
	now := start
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		e.RequestSent(now)
		e.ResponseEnded(true, now)
		e.ObserveMetered(1200, 0.002, true, "gpt-4.1-mini", nil, now)
	}
	if s, ok := e.Terminal(); ok {
		b.Fatalf("a healthy agent was killed: %+v", s)
	}
}
