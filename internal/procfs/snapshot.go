// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"errors"
	"fmt"
	"slices"
)

// PIDs returns the pid of every process, the numeric entries of Root, in
// directory order. Threads other than main threads are not listed (they
// are only reachable as /proc/TID).
func (fs FS) PIDs() ([]int, error) {
	pids := make([]int, 0, 512)
	err := readDirNames(fs.Root, func(name []byte) {
		if pid, ok := parseUint(name); ok && pid > 0 && pid <= 1<<31-1 {
			pids = append(pids, int(pid))
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", fs.Root, err)
	}
	return pids, nil
}

// Snapshot is the Stat of every process at one time, by pid.
type Snapshot map[int]Stat

// Scan reads the Stat of every process. Processes that exit while it runs
// are left out; any other error ends the scan. A scan is not atomic: a
// process forked during it may be missing, so callers that must not miss
// one (a kill loop) repeat until a pass finds nothing new.
func (fs FS) Scan() (Snapshot, error) {
	pids, err := fs.PIDs()
	if err != nil {
		return nil, err
	}
	snap := make(Snapshot, len(pids))
	for _, pid := range pids {
		st, err := fs.stat(pid, true)
		if errors.Is(err, ErrNoProcess) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		snap[pid] = st
	}
	return snap, nil
}

// Children returns the pids whose parent is pid, sorted.
func (s Snapshot) Children(pid int) []int {
	var kids []int
	for p, st := range s {
		if st.PPID == pid && p != pid {
			kids = append(kids, p)
		}
	}
	slices.Sort(kids)
	return kids
}

// Descendants returns, sorted, every pid whose chain of parents reaches one
// of roots, and each root that is in the snapshot. A root that is not in the
// snapshot (it exited) still has its remaining children found, as long as
// they have not been reparented. Each pid is visited once, so a corrupt
// snapshot with a cycle of parents cannot loop.
func (s Snapshot) Descendants(roots ...int) []int {
	children := make(map[int][]int, len(s))
	for p, st := range s {
		if st.PPID != p {
			children[st.PPID] = append(children[st.PPID], p)
		}
	}
	seen := make(map[int]bool)
	var out, queue []int
	for _, r := range roots {
		if seen[r] {
			continue
		}
		seen[r] = true
		if _, ok := s[r]; ok {
			out = append(out, r)
		}
		queue = append(queue, r)
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	slices.Sort(out)
	return out
}
