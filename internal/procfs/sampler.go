// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// statBufSize holds any stat file: 52 numbers of at most 20 digits and a
// comm of at most 64 bytes. A Sampler lives as long as its agent, and a
// daemon has a thousand: its buffer is sized for stat alone.
const statBufSize = 1536

// DefaultSamplerFiles is how many stat files a Sampler keeps open unless
// told otherwise: a few agents' trees, well below any RLIMIT_NOFILE.
const DefaultSamplerFiles = 256

// A Sampler measures the Usage of the same processes again and again, as
// the kernel checks do once a second. It keeps each /proc/PID/stat open
// between samples, so that a sample costs one pread(2) per process instead
// of open, read and close: on a VM where a system call costs microseconds
// that is most of the price of a sample.
//
// A held stat file refers to the process, not to its number: once the
// process is reaped, reads fail with ESRCH even if the pid was reused (the
// Sampler then reopens the number, to find the new process if it is still
// asked for). So a sample never counts a stranger through a held file.
//
// A Sampler is not safe for concurrent use: one goroutine owns it, and
// calls Close when it stops sampling.
type Sampler struct {
	fs       FS
	maxFiles int
	procfs   bool // Root is a real procfs, where fd dirs report a count
	files    map[int]*heldStat
	gen      uint64 // number of the current sample
	buf      []byte
}

type heldStat struct {
	fd  int
	gen uint64 // the last sample that asked for this pid
}

// NewSampler returns a Sampler that keeps at most maxFiles stat files open
// (DefaultSamplerFiles when maxFiles <= 0); processes beyond that are read
// with open, read and close, as FS.Usage does.
func (fs FS) NewSampler(maxFiles int) *Sampler {
	if maxFiles <= 0 {
		maxFiles = DefaultSamplerFiles
	}
	return &Sampler{
		fs:       fs,
		maxFiles: maxFiles,
		procfs:   fs.isProcfs(),
		files:    make(map[int]*heldStat),
		buf:      make([]byte, statBufSize),
	}
}

// Usage is FS.Usage, reading through held files. Files of processes that
// are gone, or that this sample did not ask for, are closed.
func (s *Sampler) Usage(pids []int, withFDs bool) (Usage, error) {
	s.gen++
	u, err := sumUsage(pids, withFDs, s.stat, s.numFDs)
	for pid, h := range s.files {
		if h.gen != s.gen {
			s.drop(pid)
		}
	}
	return u, err
}

// Close closes every held file. The Sampler must not be used afterwards.
func (s *Sampler) Close() error {
	for pid := range s.files {
		s.drop(pid)
	}
	return nil
}

// stat reads the stat of pid through its held file, opening one if there
// is room.
func (s *Sampler) stat(pid int) (Stat, error) {
	if h, ok := s.files[pid]; ok {
		h.gen = s.gen
		n, err := pread(h.fd, s.buf)
		if err == nil {
			return s.parse(pid, n)
		}
		// ESRCH: that process was reaped; the number may be another's now.
		s.drop(pid)
		if !errors.Is(err, unix.ESRCH) {
			return Stat{}, wrapErr("stat", pid, err)
		}
	}
	if len(s.files) >= s.maxFiles {
		return s.fs.stat(pid, false)
	}
	fd, err := unix.Open(s.fs.path(pid, "stat"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Stat{}, wrapErr("stat", pid, os.NewSyscallError("open", err))
	}
	s.files[pid] = &heldStat{fd: fd, gen: s.gen}
	n, err := pread(fd, s.buf)
	if err != nil {
		s.drop(pid)
		return Stat{}, wrapErr("stat", pid, err)
	}
	return s.parse(pid, n)
}

func (s *Sampler) parse(pid, n int) (Stat, error) {
	if n == len(s.buf) { // a stat file is never this long
		return Stat{}, fmt.Errorf("stat %d: %w", pid, malformed("stat", "longer than the buffer"))
	}
	st, err := parseStat(s.buf[:n], false)
	if err != nil {
		return Stat{}, fmt.Errorf("stat %d: %w", pid, err)
	}
	return st, nil
}

// numFDs is FS.NumFDs without its check that Root is a procfs, which the
// Sampler made once.
func (s *Sampler) numFDs(pid int) (int, error) {
	path := s.fs.path(pid, "fd")
	if s.procfs {
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err == nil && st.Size > 0 {
			return int(st.Size), nil
		}
	}
	n, err := countDirents(path)
	if err != nil {
		return 0, wrapErr("fd", pid, err)
	}
	return n, nil
}

func (s *Sampler) drop(pid int) {
	if h, ok := s.files[pid]; ok {
		unix.Close(h.fd)
		delete(s.files, pid)
	}
}

// pread reads a proc file from its start into buf, in one pread(2).
func pread(fd int, buf []byte) (int, error) {
	for {
		n, err := unix.Pread(fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, os.NewSyscallError("pread", err)
		}
		return n, nil
	}
}
