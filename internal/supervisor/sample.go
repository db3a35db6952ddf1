// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"time"

	"github.com/hermeskill/hermeskilld/internal/procfs"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// sampler turns successive measurements of the tree into samples (CPU is
// a rate, so it needs the previous reading) and keeps the peak RSS.
type sampler struct {
	have    bool
	lastCPU time.Duration
	lastAt  time.Time
	peakRSS int64
	last    symptoms.Sample
}

// take measures the tree. withCPU reads the cgroup's cpu.stat (exact,
// counting processes that exited) for cpu_spin; without it the CPU rate
// comes from the processes' own counters, which the sample reads anyway
// (cpu.stat makes the kernel flush its statistics: costly a thousand times
// a second).
func (s *sampler) take(t *procsup.Tree, withFDs, withCPU bool, now time.Time) (symptoms.Sample, bool) {
	u, err := t.Usage(withFDs)
	if err != nil {
		return symptoms.Sample{}, false
	}
	cpu := time.Duration(u.CPUTicks) * time.Second / procfs.ClockTicks
	if withCPU {
		if user, sys, ok := t.CPUTime(); ok {
			cpu = user + sys
		}
	}
	rss := u.RSSBytes
	if cur, ok := t.MemoryCurrent(); ok {
		rss = cur
	}
	pct := 0.0
	if s.have && now.After(s.lastAt) && cpu >= s.lastCPU {
		pct = float64(cpu-s.lastCPU) / float64(now.Sub(s.lastAt)) * 100
	}
	s.have, s.lastCPU, s.lastAt = true, cpu, now
	s.peakRSS = max(s.peakRSS, rss)
	s.last = symptoms.Sample{RSSBytes: rss, CPUPercent: pct, Procs: u.Threads, FDs: u.FDs, HaveFDs: withFDs}
	return s.last, true
}
