// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/fdreserve"
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
//
// ok is false with nil errors when there was nothing to measure: the
// tree's cgroup is empty, its processes are gone. Any other failure to
// read the tree (hermeskilld out of descriptors, a stat it may not read)
// is err, and no sample: a sum over the processes that could be read
// would understate the tree, and a kill threshold must not be judged on
// it. A descriptor count that fails alone (the fd directory of a
// set-user-ID or non-dumpable process, or another user's, when
// hermeskilld is not root: proc(5)) is fdsErr, with a sample whose
// HaveFDs is false: the other figures do not depend on it, and their
// checks go on judging.
func (s *sampler) take(t *procsup.Tree, withFDs, withCPU bool, now time.Time) (_ symptoms.Sample, ok bool, err, fdsErr error) {
	u, err := t.Usage(withFDs)
	if errors.Is(err, io.EOF) {
		return symptoms.Sample{}, false, nil, nil // an empty cgroup.procs: the tree is gone
	}
	if err != nil {
		return symptoms.Sample{}, false, err, nil
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
	s.last = symptoms.Sample{RSSBytes: rss, CPUPercent: pct, Procs: u.Threads, FDs: u.FDs, HaveFDs: withFDs && u.FDsErr == nil}
	return s.last, true, nil, u.FDsErr
}

// Why a sample failed: hermeskill_sampler_failures_total's reason label.
const (
	SamplerDescriptors = "descriptors" // EMFILE, ENFILE: hermeskilld (or the host) is out of descriptors
	SamplerPermission  = "permission"  // EACCES, EPERM: a /proc file hermeskilld may not read
	SamplerOther       = "other"
)

// SamplerReasons lists every reason, in the metric's order.
var SamplerReasons = []string{SamplerDescriptors, SamplerPermission, SamplerOther}

var samplerFailures [3]atomic.Uint64 // by index in SamplerReasons

// SamplerFailures is how many samples of any agent's tree failed for
// reason in this process.
func SamplerFailures(reason string) uint64 {
	for i, r := range SamplerReasons {
		if r == reason {
			return samplerFailures[i].Load()
		}
	}
	return 0
}

// samplerReason is the reason label of a failed sample's error.
func samplerReason(err error) string {
	switch {
	case fdreserve.Exhausted(err):
		return SamplerDescriptors
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return SamplerPermission
	}
	return SamplerOther
}

func countSamplerFailure(err error) {
	for i, r := range SamplerReasons {
		if r == samplerReason(err) {
			samplerFailures[i].Add(1)
		}
	}
}

// SamplerError is the kernel sampler's last failure in a run, as Status
// shows it.
type SamplerError struct {
	Err      string    // the last failure, its first error (see firstError)
	At       time.Time // when it failed last
	Failures uint64    // failed samples in this run
	// BlindSince is the first failure since the last good sample: the
	// kernel checks have seen nothing since. Zero once a sample succeeded
	// again.
	BlindSince time.Time
	// FDsBlindSince is the first failure since the tree's descriptors
	// were last counted: the fds check has seen nothing since (the other
	// kernel checks see, unless BlindSince is set too). Zero once they
	// are counted again.
	FDsBlindSince time.Time
}

// samplerLogEvery is how often a run whose samples keep failing logs it:
// once a second for a thousand agents would drown the log it must be
// read in.
const samplerLogEvery = time.Minute

// minBlind is the shortest a run's kernel checks may stay blind before it
// fails closed (blindBound).
const minBlind = 30 * time.Second

// blindBound is how long the kernel checks of c may go without a sample
// before the run is killed for internal_error: 30s, or three sample
// intervals when that is longer. A descriptor shortage of hermeskilld's
// own is not the agent's fault, and a brief one only warns; a long one
// would let a runaway the checks are there to stop live on unseen.
func blindBound(c config.Checks) time.Duration { return max(minBlind, 3*c.SampleInterval) }

// killsOnSample reports whether a check that needs the sampler has a
// kill threshold in c: only then can blindness let a runaway live.
func killsOnSample(c config.Checks) bool {
	return c.Memory != nil && c.Memory.Kill > 0 || c.Procs != nil && c.Procs.Kill > 0 ||
		killsOnFDs(c) || c.CPUSpin != nil && c.CPUSpin.Percent > 0
}

// killsOnFDs reports whether the fds check has a kill threshold in c:
// only then can a tree whose descriptors cannot be counted let a runaway
// live.
func killsOnFDs(c config.Checks) bool { return c.FDs != nil && c.FDs.Kill > 0 }

// firstError is err as one line: a sample joins one error per process
// that could not be read, and a thousand would not fit a log line or a
// certificate's message.
func firstError(err error) string {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return err.Error()
	}
	errs := j.Unwrap()
	switch len(errs) {
	case 0:
		return err.Error()
	case 1:
		return errs[0].Error()
	}
	return fmt.Sprintf("%v (and %d more)", errs[0], len(errs)-1)
}
