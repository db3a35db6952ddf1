// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Reading is one statistic; Known is false when the kernel does not
// provide it for this group (controller not enabled, as on a hybrid host,
// or a kernel too old for the file).
type Reading struct {
	Value uint64
	Known bool
}

// Stats are the group's cheap kernel statistics, each read from one small
// cgroupfs file (cgroup-v2.rst "Memory", "PID").
type Stats struct {
	// MemoryCurrent is memory.current: bytes used by the group and its
	// descendants.
	MemoryCurrent Reading
	// MemoryPeak is memory.peak: the highest MemoryCurrent since the
	// group was created (Linux 5.19).
	MemoryPeak Reading
	// PidsCurrent is pids.current. It counts tasks, i.e. threads: "PIDs
	// used in this controller refer to TIDs".
	PidsCurrent Reading
	// OOMKills is the oom_kill key of memory.events: processes of the
	// group the OOM killer killed.
	OOMKills Reading
}

// Stats reads what the enabled controllers offer. A missing file is not
// an error, only an unknown Reading.
func (g *Group) Stats() (Stats, error) {
	var s Stats
	var errs []error
	single := func(name string, r *Reading) {
		data, err := os.ReadFile(filepath.Join(g.dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return
		}
		if err == nil {
			r.Value, err = parseSingleValue(data)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			return
		}
		r.Known = true
	}
	single("memory.current", &s.MemoryCurrent)
	single("memory.peak", &s.MemoryPeak)
	single("pids.current", &s.PidsCurrent)

	data, err := os.ReadFile(filepath.Join(g.dir, "memory.events"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		errs = append(errs, err)
	default:
		kv, err := parseFlatKeyed(data)
		if err != nil {
			errs = append(errs, fmt.Errorf("memory.events: %w", err))
			break
		}
		if v, ok := kv["oom_kill"]; ok {
			s.OOMKills = Reading{Value: v, Known: true}
		}
	}
	return s, errors.Join(errs...)
}
