// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"bytes"
	"fmt"
)

// Stat is the part of /proc/PID/stat that hermeskilld uses. Field numbers
// in the comments are those of proc(5).
type Stat struct {
	PID  int // (1)
	PPID int // (4)
	PGID int // (5) process group
	SID  int // (6) session

	// Comm is the command name (2): at most 15 bytes of the executable's
	// name, or whatever the process set with prctl(PR_SET_NAME), so it may
	// hold spaces, parentheses and invalid UTF-8.
	Comm string

	// State (3) is one of "RSDZTtXxKWPI", see proc(5). 'Z' is a zombie that
	// has exited but not been reaped.
	State byte

	UTimeTicks uint64 // (14) user CPU time, in ClockTicks per second
	STimeTicks uint64 // (15) system CPU time, in ClockTicks per second
	NumThreads int    // (20)

	// StartTimeTicks (22) is when the process started, in clock ticks
	// since boot. Together with PID it identifies a process: a recycled
	// pid has a different start time.
	StartTimeTicks uint64

	// RSSPages (24) is the resident set size in pages (PageSize bytes).
	// The kernel counts it per CPU and folds it in lazily, so it can lag
	// by a few pages; it is the same number as VmRSS in status.
	RSSPages int64
}

// CPUTicks returns user plus system CPU time in clock ticks.
func (s Stat) CPUTicks() uint64 { return s.UTimeTicks + s.STimeTicks }

// ParseStat parses the contents of /proc/PID/stat. It returns an error
// wrapping ErrMalformed when a field it needs is missing or not a number.
// Fields after rss (24) are ignored, so older and newer kernels both parse.
func ParseStat(data []byte) (Stat, error) {
	return parseStat(data, true)
}

// parseStat parses data, copying the comm only when withComm is set: the
// samplers that only add up usage do not need it, and it is the one
// allocation of a parse.
func parseStat(data []byte, withComm bool) (Stat, error) {
	var s Stat

	// "%d (%s) %c …": comm is set by the process and may contain spaces and
	// ')', but nothing after it can contain ')', so it ends at the last one.
	open := bytes.IndexByte(data, '(')
	closing := bytes.LastIndexByte(data, ')')
	if open < 2 || closing < open || data[open-1] != ' ' {
		return Stat{}, malformed("stat", "no (comm)")
	}
	pid, ok := parseIntField(data[:open-1])
	if !ok {
		return Stat{}, malformed("stat", fmt.Sprintf("pid %q", data[:open-1]))
	}
	s.PID = pid
	if withComm {
		s.Comm = string(data[open+1 : closing])
	}

	f := fieldScanner{b: data[closing+1:]}
	state, ok := f.next()
	if !ok || len(state) != 1 {
		return Stat{}, malformed("stat", "state")
	}
	s.State = state[0]

	// Fields 4 to 24; each is read into its destination, or skipped.
	var skipI int64  // signed fields hermeskilld does not use
	var skipU uint64 // unsigned ones
	ints := [...]struct {
		name string
		dst  any
	}{
		{"ppid", &s.PPID},                // 4
		{"pgrp", &s.PGID},                // 5
		{"session", &s.SID},              // 6
		{"tty_nr", &skipI},               // 7
		{"tpgid", &skipI},                // 8
		{"flags", &skipU},                // 9
		{"minflt", &skipU},               // 10
		{"cminflt", &skipU},              // 11
		{"majflt", &skipU},               // 12
		{"cmajflt", &skipU},              // 13
		{"utime", &s.UTimeTicks},         // 14
		{"stime", &s.STimeTicks},         // 15
		{"cutime", &skipI},               // 16
		{"cstime", &skipI},               // 17
		{"priority", &skipI},             // 18
		{"nice", &skipI},                 // 19
		{"num_threads", &s.NumThreads},   // 20
		{"itrealvalue", &skipI},          // 21
		{"starttime", &s.StartTimeTicks}, // 22
		{"vsize", &skipU},                // 23
		{"rss", &s.RSSPages},             // 24
	}
	for _, field := range ints {
		tok, ok := f.next()
		if !ok {
			return Stat{}, malformed("stat", "missing "+field.name)
		}
		switch dst := field.dst.(type) {
		case *int:
			*dst, ok = parseIntField(tok)
		case *int64:
			*dst, ok = parseInt(tok)
		case *uint64:
			*dst, ok = parseUint(tok)
		}
		if !ok {
			return Stat{}, malformed("stat", field.name+" is not a number")
		}
	}
	return s, nil
}

// Stat reads /proc/PID/stat. The error wraps ErrNoProcess when the process
// does not exist or was reaped while being read; a zombie has a Stat, with
// State 'Z'. Stat is one open, one read and one close, into a pooled buffer.
func (fs FS) Stat(pid int) (Stat, error) {
	return fs.stat(pid, true)
}

func (fs FS) stat(pid int, withComm bool) (Stat, error) {
	buf := getBuf()
	defer putBuf(buf)
	data, err := readFile(fs.path(pid, "stat"), buf, 0)
	if err != nil {
		return Stat{}, wrapErr("stat", pid, err)
	}
	s, err := parseStat(data, withComm)
	if err != nil {
		return Stat{}, fmt.Errorf("stat %d: %w", pid, err)
	}
	return s, nil
}
