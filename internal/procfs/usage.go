// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"errors"
	"fmt"
	"os"
)

// ClockTicks is the unit of the CPU times in /proc/PID/stat, per second.
//
// proc(5) says to divide by sysconf(_SC_CLK_TCK). That is USER_HZ, the
// kernel's user-space tick, fixed whatever its internal HZ because times(2)
// and /proc report in it; the kernel also passes it to every process as the
// AT_CLKTCK auxv entry, which is what glibc's sysconf returns. USER_HZ is
// 100 on every architecture Go supports (include/asm-generic/param.h; only
// alpha, which Go does not support, uses 1024). Go cannot call sysconf
// without cgo, so a constant is both right and free.
const ClockTicks = 100

// PageSize returns the size in bytes of the pages RSSPages counts.
func PageSize() int { return os.Getpagesize() }

// Usage is what a set of processes uses, summed over those still alive.
// A pid listed twice is counted twice.
type Usage struct {
	Procs    int    // processes found (zombies included)
	Threads  int    // their threads
	RSSBytes int64  // their resident set sizes
	CPUTicks uint64 // their user plus system CPU time, in ClockTicks
	FDs      int    // their open file descriptors, when asked for
	// FDsErr is why FDs is short although asked for: the fd directories
	// that could not be counted, joined (a process the caller may not
	// ptrace, see NumFDs). The other figures come from the stat files
	// alone and stay whole.
	FDsErr error
}

// Usage sums the usage of pids, reading /proc/PID/stat of each and, when
// withFDs is set, counting /proc/PID/fd (see NumFDs). A process costs an
// open, a read and a close of its stat; a Sampler, which keeps the stat
// files open between samples, brings that down to one pread(2).
//
// Processes that no longer exist are skipped. A stat that cannot be read
// for another reason is returned in the error, joined with the others,
// together with the usage of everything that could be read. An fd
// directory that cannot be counted (proc(5): it needs
// PTRACE_MODE_READ_FSCREDS, which a set-user-ID or non-dumpable process,
// or another user's, denies) is not an error of the whole: it is in
// Usage.FDsErr, and only FDs is short.
//
// The sums are of the pids as they are now: a caller that tracks a tree
// over time should check StartTimeTicks (Stat) to notice a recycled pid.
func (fs FS) Usage(pids []int, withFDs bool) (Usage, error) {
	return sumUsage(pids, withFDs, func(pid int) (Stat, error) { return fs.stat(pid, false) }, fs.NumFDs)
}

// sumUsage adds up the usage of pids as stat and numFDs read them (FS
// and Sampler differ only in how they read).
func sumUsage(pids []int, withFDs bool, stat func(int) (Stat, error), numFDs func(int) (int, error)) (Usage, error) {
	var (
		u             Usage
		errs, fdsErrs []error
	)
	page := int64(PageSize())
	for _, pid := range pids {
		st, err := stat(pid)
		if errors.Is(err, ErrNoProcess) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		u.Procs++
		u.Threads += st.NumThreads
		u.RSSBytes += st.RSSPages * page
		u.CPUTicks += st.CPUTicks()
		if withFDs {
			n, err := numFDs(pid)
			if err != nil && !errors.Is(err, ErrNoProcess) {
				fdsErrs = append(fdsErrs, err)
			}
			u.FDs += n
		}
	}
	u.FDsErr = errors.Join(fdsErrs...)
	return u, errors.Join(errs...)
}

// Proc is one process as a death certificate lists it ("process_tree").
type Proc struct {
	PID, PPID      int
	Cmdline        string  // see Cmdline
	State          string  // one letter, see Stat.State
	RSSBytes       int64   // resident set size
	CPUSeconds     float64 // user plus system CPU time
	Threads        int
	FDs            int
	StartTimeTicks uint64 // with PID, the identity of the process
}

// Proc reads the record of one process for a certificate: its stat, its
// command line cut to cmdlineMax bytes (see Cmdline), and its number of
// open fds.
//
// The error wraps ErrNoProcess when the process does not exist. A process
// that exits after its stat was read keeps the record of that stat, with
// Cmdline "[comm]" and FDs 0, and no error. When the cmdline or the fds
// cannot be read for another reason (permission), Proc returns the record
// with those fields so, and an error wrapping ErrPartial and the cause: an
// autopsy should keep such a record.
func (fs FS) Proc(pid, cmdlineMax int) (Proc, error) {
	st, err := fs.stat(pid, true)
	if err != nil {
		return Proc{}, err
	}
	p := Proc{
		PID:            st.PID,
		PPID:           st.PPID,
		State:          string(st.State),
		RSSBytes:       st.RSSPages * int64(PageSize()),
		CPUSeconds:     float64(st.CPUTicks()) / ClockTicks,
		Threads:        st.NumThreads,
		StartTimeTicks: st.StartTimeTicks,
	}
	var errs []error
	if p.Cmdline, err = fs.cmdline(pid, cmdlineMax, st.Comm); err != nil {
		p.Cmdline = truncate("["+st.Comm+"]", cmdlineMax)
		if !errors.Is(err, ErrNoProcess) {
			errs = append(errs, err)
		}
	}
	if p.FDs, err = fs.NumFDs(pid); err != nil && !errors.Is(err, ErrNoProcess) {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return p, fmt.Errorf("proc %d: %w: %w", pid, ErrPartial, errors.Join(errs...))
	}
	return p, nil
}
