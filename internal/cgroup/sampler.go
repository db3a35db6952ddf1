// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"os"
	"path/filepath"
	"time"
)

// Sampler reads what a group's processes use, as often as a kernel check
// samples: its cgroup.procs and cpu.stat. A host of a thousand agents
// samples each once a second, and an open/read/close per file would be
// most of the daemon's CPU, so the files stay open and are re-read with
// pread(2) at offset 0 (cgroupfs regenerates a file's content on every
// read from its start). A Sampler belongs to one goroutine; Close releases
// its files.
type Sampler struct {
	dir        string
	procs, cpu *os.File // opened on first use
	buf        []byte
}

// NewSampler returns a Sampler of g. It opens nothing yet.
func (g *Group) NewSampler() *Sampler { return &Sampler{dir: g.dir} }

// PIDs returns the processes of the group's own cgroup.procs, in the
// kernel's order, appended to dst[:0]. Unlike Group.PIDs it does not walk
// sub-cgroups: an agent cannot create any below its cgroup (it is not
// delegated to it). Errors: the file's, or a malformed pid.
func (s *Sampler) PIDs(dst []int) ([]int, error) {
	data, err := s.read(&s.procs, "cgroup.procs")
	if err != nil {
		return dst[:0], err
	}
	return appendPIDs(dst[:0], data)
}

// CPUTime is the user and system CPU time the group's processes used,
// from cpu.stat, which cgroup v2 keeps even without the cpu controller.
// It counts processes that already exited, unlike a sum over /proc. ok is
// false when the file cannot be read or lacks the two keys.
func (s *Sampler) CPUTime() (user, sys time.Duration, ok bool) {
	data, err := s.read(&s.cpu, "cpu.stat")
	if err != nil {
		return 0, 0, false
	}
	u, y, ok := parseCPUStat(data)
	return time.Duration(u) * time.Microsecond, time.Duration(y) * time.Microsecond, ok
}

// Close closes the files the Sampler holds; it may be used again after.
func (s *Sampler) Close() {
	for _, f := range []**os.File{&s.procs, &s.cpu} {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}

// read re-reads a held file (opened on first use) into the buffer, which
// doubles until the whole file fits. An empty file gives io.EOF.
func (s *Sampler) read(f **os.File, name string) ([]byte, error) {
	if *f == nil {
		h, err := os.Open(filepath.Join(s.dir, name))
		if err != nil {
			return nil, err
		}
		*f = h
	}
	if s.buf == nil {
		s.buf = make([]byte, 1<<10)
	}
	for {
		n, err := (*f).ReadAt(s.buf, 0)
		switch {
		case n == len(s.buf):
			s.buf = make([]byte, 2*len(s.buf)) // a bigger tree: read it whole
		case n > 0:
			return s.buf[:n], nil
		default:
			return nil, err
		}
	}
}
