// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Sampling an agent reads the stat of each process of its tree once a
// second; the target is well under 50µs for a tree of a few processes.
//
// Besides ns/op (wall time) the benchmarks that make system calls report
// cpu-ns/op, the user plus system CPU time of the process per op
// (getrusage(2)): on a loaded machine wall time also counts the time spent
// waiting for a CPU, CPU time much less so.

// reportCPU reports cpu-ns/op when the benchmark ends; call it first.
func reportCPU(b *testing.B) {
	b.Helper()
	var start unix.Rusage
	require.NoError(b, unix.Getrusage(unix.RUSAGE_SELF, &start))
	b.Cleanup(func() {
		var end unix.Rusage
		require.NoError(b, unix.Getrusage(unix.RUSAGE_SELF, &end))
		cpu := time.Duration(end.Utime.Nano() + end.Stime.Nano() - start.Utime.Nano() - start.Stime.Nano())
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
}

// BenchmarkSyscall is the price of the cheapest system call, getppid(2),
// to read the others against: this package's costs are mostly system calls.
func BenchmarkSyscall(b *testing.B) {
	reportCPU(b)
	for b.Loop() {
		unix.Getppid()
	}
}

func BenchmarkParseStat(b *testing.B) {
	data, err := os.ReadFile("testdata/proc/4242/stat")
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseStat(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStat(b *testing.B) {
	pid := os.Getpid()
	reportCPU(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := host.Stat(pid); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStatus(b *testing.B) {
	pid := os.Getpid()
	reportCPU(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := host.Status(pid); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNumFDs(b *testing.B) {
	pid := os.Getpid()
	b.Run("stat", func(b *testing.B) {
		reportCPU(b)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := host.NumFDs(pid); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("getdents", func(b *testing.B) {
		path := host.path(pid, "fd")
		reportCPU(b)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := countDirents(path); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchTree starts a tree of 5 processes (the test binary and 4 helpers).
func benchTree(b *testing.B) []int {
	pids := []int{os.Getpid()}
	for range 2 {
		c := startChild(b, nil, nil, "fork-grandchild")
		gc, err := strconv.Atoi(c.said)
		require.NoError(b, err)
		pids = append(pids, c.pid, gc)
	}
	return pids
}

func BenchmarkUsage(b *testing.B) {
	pids := benchTree(b)
	for _, withFDs := range []bool{false, true} {
		b.Run("fds="+strconv.FormatBool(withFDs), func(b *testing.B) {
			reportCPU(b)
			b.ReportAllocs()
			for b.Loop() {
				u, err := host.Usage(pids, withFDs)
				if err != nil || u.Procs != len(pids) {
					b.Fatal(u, err)
				}
			}
		})
	}
}

func BenchmarkProc(b *testing.B) {
	pid := os.Getpid()
	reportCPU(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := host.Proc(pid, 4096); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkScan(b *testing.B) {
	pids, err := host.PIDs()
	require.NoError(b, err)
	b.ReportMetric(float64(len(pids)), "procs")
	reportCPU(b)
	b.ReportAllocs()
	for b.Loop() {
		snap, err := host.Scan()
		if err != nil {
			b.Fatal(err)
		}
		_ = snap.Descendants(os.Getpid())
	}
}

func BenchmarkSamplerUsage(b *testing.B) {
	pids := benchTree(b)
	s := host.NewSampler(0)
	b.Cleanup(func() { s.Close() })
	for _, withFDs := range []bool{false, true} {
		b.Run("fds="+strconv.FormatBool(withFDs), func(b *testing.B) {
			reportCPU(b)
			b.ReportAllocs()
			for b.Loop() {
				u, err := s.Usage(pids, withFDs)
				if err != nil || u.Procs != len(pids) {
					b.Fatal(u, err)
				}
			}
		})
	}
}
