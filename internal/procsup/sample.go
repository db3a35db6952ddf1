// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup

import (
	"time"

	"github.com/hermeskill/hermeskilld/internal/cgroup"
	"github.com/hermeskill/hermeskilld/internal/procfs"
)

// sampling is what the tree keeps open between samples: the kernel checks
// read the same few files once a second for every agent, so procfs's and
// cgroup's samplers hold them open and re-read them. Owned by the
// goroutine that samples (the agent's supervisor loop).
type sampling struct {
	procs *procfs.Sampler
	cg    *cgroup.Sampler // the tree's cgroup, when it has one
	pids  []int
}

func (s *sampling) close() {
	if s.procs != nil {
		s.procs.Close()
	}
	if s.cg != nil {
		s.cg.Close()
	}
}

// cgroupSampler returns the sampler of the tree's cgroup, made on first use.
func (t *Tree) cgroupSampler() *cgroup.Sampler {
	if t.sample.cg == nil {
		t.sample.cg = t.cg.NewSampler()
	}
	return t.sample.cg
}

// Usage measures the tree for the kernel checks: processes+threads, RSS,
// CPU ticks and, when asked, open descriptors. Call it from one goroutine.
func (t *Tree) Usage(withFDs bool) (procfs.Usage, error) {
	s := &t.sample
	if s.procs == nil {
		s.procs = t.fs.NewSampler(t.rt.samplerFiles)
	}
	var pids []int
	var err error
	if t.cg != nil {
		// The cgroup's own member list: agents cannot create cgroups
		// below theirs (not delegated), so there is nothing to walk.
		if s.pids, err = t.cgroupSampler().PIDs(s.pids); err != nil {
			return procfs.Usage{}, err
		}
		pids = s.pids
	} else if pids, err = t.PIDs(); err != nil {
		return procfs.Usage{}, err
	}
	return s.procs.Usage(pids, withFDs)
}

// CPUTime is the tree's CPU time from its cgroup (see
// cgroup.Sampler.CPUTime): it counts processes that already exited,
// unlike a sum over /proc. ok is false without a cgroup. Call it from the
// goroutine that samples.
func (t *Tree) CPUTime() (user, sys time.Duration, ok bool) {
	if t.cg == nil {
		return 0, 0, false
	}
	return t.cgroupSampler().CPUTime()
}

// MemoryCurrent is the cgroup's memory.current, when the memory controller
// is enabled for it (probed once: not on a hybrid host).
func (t *Tree) MemoryCurrent() (int64, bool) {
	if t.cg == nil || t.noMemory {
		return 0, false
	}
	st, _ := t.cg.Stats()
	if !st.MemoryCurrent.Known {
		t.noMemory = true
		return 0, false
	}
	return int64(st.MemoryCurrent.Value), true
}

// OOMKills is how many processes of the tree the kernel's OOM killer
// killed, when the memory controller reports it.
func (t *Tree) OOMKills() (uint64, bool) {
	if t.cg == nil {
		return 0, false
	}
	st, _ := t.cg.Stats()
	return st.OOMKills.Value, st.OOMKills.Known
}
