// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/config"
)

const gib = int64(1) << 30

func rss(vs ...float64) []Sample {
	out := make([]Sample, len(vs))
	for i, v := range vs {
		out[i] = Sample{RSSBytes: int64(v * float64(gib))}
	}
	return out
}

func procs(vs ...int) []Sample {
	out := make([]Sample, len(vs))
	for i, v := range vs {
		out[i] = Sample{Procs: v}
	}
	return out
}

func cpuPct(vs ...float64) []Sample {
	out := make([]Sample, len(vs))
	for i, v := range vs {
		out[i] = Sample{CPUPercent: v}
	}
	return out
}

// TestKernelChecks feeds one sample a second; a check fires once its
// condition held for `for`, and a sample below restarts its clock.
func TestKernelChecks(t *testing.T) {
	memory := config.Checks{Memory: &config.Sustained{Warn: gib, Kill: 2 * gib, For: 3 * time.Second}}
	memWarn := want{Memory, Warning, "1.5GiB", "1GiB", "RSS 1.5GiB over warning threshold 1GiB for 3s"}
	memKill := want{Memory, Terminal, "3GiB", "2GiB", "RSS 3GiB over kill threshold 2GiB for 3s"}
	procsCfg := config.Checks{Procs: &config.Sustained{Warn: 100, Kill: 200, For: 2 * time.Second}}
	fds := config.Checks{FDs: &config.Sustained{Kill: 1000}}
	spin := config.Checks{CPUSpin: &config.CPUSpin{Percent: 90, For: 3 * time.Second}}
	for _, tc := range []struct {
		name    string
		cfg     config.Checks
		samples []Sample
		want    map[int]want // by sample (= second); every other one produces nothing
	}{
		{name: "memory under both", cfg: memory, samples: rss(0.5, 1, 0.9, 1, 1, 1, 1)},
		{name: "memory warns after for", cfg: memory, samples: rss(1.5, 1.5, 1.5, 1.5, 1.5, 1.5),
			want: map[int]want{3: memWarn}},
		{name: "memory kills after for, without a warning first", cfg: memory, samples: rss(3, 3, 3, 3, 3),
			want: map[int]want{3: memKill}},
		{name: "memory warns then kills", cfg: memory, samples: rss(1.5, 1.5, 1.5, 1.5, 3, 3, 3, 3, 3),
			want: map[int]want{3: memWarn, 7: memKill}},
		{name: "a dip below resets the clock", cfg: memory, samples: rss(3, 3, 3, 0.5, 3, 3, 3, 3),
			want: map[int]want{7: memKill}},
		{name: "a dip below kill keeps the warning clock", cfg: memory, samples: rss(3, 3, 3, 1.5, 3, 3, 3, 3),
			want: map[int]want{3: memWarn, 7: memKill}},
		{name: "a warning is given again after a dip", cfg: memory,
			samples: rss(1.5, 1.5, 1.5, 1.5, 0.5, 1.5, 1.5, 1.5, 1.5),
			want:    map[int]want{3: memWarn, 8: memWarn}},
		{name: "at the threshold is not over",
			cfg:     config.Checks{Memory: &config.Sustained{Kill: 2 * gib}},
			samples: append(rss(2, 2, 2), Sample{RSSBytes: 2*gib + 1}),
			want: map[int]want{3: {Memory, Terminal, "2147483649B", "2GiB", // not "2GiB over 2GiB"
				"RSS 2147483649B over kill threshold 2GiB"}}},
		{name: "for 0: the first sample over",
			cfg:     config.Checks{Memory: &config.Sustained{Kill: 2 * gib}},
			samples: rss(3),
			want:    map[int]want{0: {Memory, Terminal, "3GiB", "2GiB", "RSS 3GiB over kill threshold 2GiB"}}},
		{name: "procs", cfg: procsCfg, samples: procs(50, 150, 150, 150, 250, 90, 250, 250, 250),
			want: map[int]want{
				3: {Procs, Warning, "150", "100", "processes+threads 150 over warning threshold 100 for 2s"},
				8: {Procs, Terminal, "250", "200", "processes+threads 250 over kill threshold 200 for 2s"},
			}},
		{name: "fds", cfg: fds, samples: []Sample{{FDs: 1000, HaveFDs: true}, {FDs: 1001, HaveFDs: true}},
			want: map[int]want{1: {FDs, Terminal, "1001", "1000", "open file descriptors 1001 over kill threshold 1000"}}},
		{name: "fds only when measured", cfg: fds, samples: []Sample{{FDs: 5000}, {FDs: 5000}}},
		{name: "denials warn once, then kill at the threshold", cfg: config.Checks{Denials: &config.Limit{Warn: 2, Kill: 5}},
			samples: []Sample{{Denials: 1, HaveDenials: true}, {Denials: 2, HaveDenials: true}, {Denials: 4, HaveDenials: true},
				{Denials: 5, HaveDenials: true}},
			want: map[int]want{
				1: {Denials, Warning, "2", "2", "2 accesses refused by its confinement (warning threshold 2)"},
				3: {Denials, Terminal, "5", "5", "5 accesses refused by its confinement (kill threshold 5)"},
			}},
		{name: "denials only when counted", cfg: config.Checks{Denials: &config.Limit{Kill: 1}},
			samples: []Sample{{Denials: 9}, {Denials: 9}}},
		{name: "cpu_spin", cfg: spin, samples: cpuPct(50, 95, 95, 95, 95),
			want: map[int]want{4: {CPUSpin, Terminal, "95%", "90% for 3s", "CPU 95% of a core for 3s (threshold 90%)"}}},
		{name: "cpu_spin: a dip resets the clock", cfg: spin, samples: cpuPct(95, 95, 95, 10, 150, 150, 150, 150),
			want: map[int]want{7: {CPUSpin, Terminal, "150%", "90% for 3s", "CPU 150% of a core for 3s (threshold 90%)"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := New(Config{Checks: tc.cfg}, t0)
			var log []Symptom
			for i, s := range tc.samples {
				got := e.ObserveSample(s, at(i))
				w, ok := tc.want[i]
				if !ok {
					require.Empty(t, got, "sample %d", i)
					continue
				}
				require.Equal(t, []Symptom{w.symptom(at(i))}, got, "sample %d", i)
				log = append(log, got...)
			}
			require.Equal(t, log, e.Log())
		})
	}
}

// TestKernelAllAtOnce: every check over at once; the first wins, the
// others are logged.
func TestKernelAllAtOnce(t *testing.T) {
	e := New(Config{Checks: config.Checks{Memory: &config.Sustained{Kill: gib}, Procs: &config.Sustained{Kill: 10},
		FDs: &config.Sustained{Kill: 10}, CPUSpin: &config.CPUSpin{Percent: 90}}}, t0)
	syms := e.ObserveSample(Sample{RSSBytes: 2 * gib, Procs: 20, FDs: 20, HaveFDs: true, CPUPercent: 100}, t0)
	var checks []Check
	for _, s := range syms {
		require.Equal(t, Terminal, s.Severity)
		checks = append(checks, s.Check)
	}
	require.Equal(t, []Check{Memory, Procs, FDs, CPUSpin}, checks)
	term, _ := e.Terminal()
	require.Equal(t, syms[0], term)
	require.Equal(t, syms, e.Log())
	require.Empty(t, e.ObserveSample(Sample{RSSBytes: 2 * gib, Procs: 20, FDs: 20, HaveFDs: true, CPUPercent: 100}, at(1)),
		"each fires once")
}

// TestCPUSpinProgress: with only_without_progress, progress during the
// window restarts the spin clock; without it, progress does not matter.
func TestCPUSpinProgress(t *testing.T) {
	for _, tc := range []struct {
		name    string
		only    bool
		fireAt  int
		message string
	}{
		{"only without progress", true, 5, "CPU 95% of a core for 3s without progress (threshold 90%)"},
		{"regardless of progress", false, 3, "CPU 95% of a core for 3s (threshold 90%)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := New(Config{Checks: config.Checks{CPUSpin: &config.CPUSpin{Percent: 90, For: 3 * time.Second,
				OnlyWithoutProgress: tc.only}}}, t0)
			for i := range 8 {
				if i == 1 {
					require.Empty(t, e.Observe(msg(progress(1)), at(1).Add(500*time.Millisecond)))
				}
				got := e.ObserveSample(Sample{CPUPercent: 95}, at(i))
				if i != tc.fireAt {
					require.Empty(t, got, "sample %d", i)
					continue
				}
				require.Equal(t, tc.message, one(t, got).Message)
			}
		})
	}
}

// TestObserveSampleTicksFirst: a sample evaluates the deadlines at its
// time before the thresholds.
func TestObserveSampleTicksFirst(t *testing.T) {
	e := New(Config{Checks: config.Checks{HeartbeatTimeout: 3 * time.Second,
		Memory: &config.Sustained{Kill: gib}}}, t0)
	require.Empty(t, e.Observe(msg(ready), t0))
	syms := e.ObserveSample(Sample{RSSBytes: 2 * gib}, at(5))
	require.Len(t, syms, 2)
	require.Equal(t, HeartbeatTimeout, syms[0].Check)
	require.Equal(t, Memory, syms[1].Check)
	term, _ := e.Terminal()
	require.Equal(t, HeartbeatTimeout, term.Check)
}
