// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"syscall"
	"testing"
	"time"
)

// The wall-clock figures (µs/op) include fsync of the file and of the
// directory, so they are those of the filesystem under the temporary
// directory as much as ours; cpu-µs/op is the CPU time of the process (all
// threads, GC included) per operation, which a loaded machine changes less.

// report adds µs/op and cpu-µs/op; call it with the CPU time at the start.
func report(b *testing.B, cpu0 time.Duration) {
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/op")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkWrite(b *testing.B) {
	dir := b.TempDir()
	c := fullCert()
	cpu0 := cpuTime()
	for b.Loop() {
		if _, err := Write(dir, c, nil); err != nil {
			b.Fatal(err)
		}
	}
	report(b, cpu0)
}

func BenchmarkSignAndWrite(b *testing.B) {
	dir := b.TempDir()
	s := testSigner(b)
	c := fullCert()
	cpu0 := cpuTime()
	for b.Loop() {
		if _, err := Write(dir, c, s); err != nil {
			b.Fatal(err)
		}
	}
	report(b, cpu0)
}

func BenchmarkSign(b *testing.B) {
	s := testSigner(b)
	c := fullCert()
	cpu0 := cpuTime()
	for b.Loop() {
		if err := s.Sign(c); err != nil {
			b.Fatal(err)
		}
	}
	report(b, cpu0)
}

func BenchmarkVerify(b *testing.B) {
	s := testSigner(b)
	c := fullCert()
	if err := s.Sign(c); err != nil {
		b.Fatal(err)
	}
	raw, err := Marshal(c)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	cpu0 := cpuTime()
	for b.Loop() {
		if err := Verify(raw, s.Public()); err != nil {
			b.Fatal(err)
		}
	}
	report(b, cpu0)
}
