// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"crypto/ed25519"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hermeskill/hermeskilld/internal/certs"
)

// A typical line: a symptom with a few fields, about 250 bytes.
var benchEvent = Event{Type: "symptom", AgentID: "research-bot", Data: map[string]any{
	"check": "memory", "severity": "warning", "observed": "1.2GiB", "threshold": "1GiB",
	"message": "rss 1.2GiB over 1GiB for 10s",
}}

// benchmarkAppend reports wall-clock µs/op and, less disturbed by a busy machine, the CPU
// time (user+system, all threads) an append costs: the line, and the anchor after it.
func benchmarkAppend(b *testing.B, sync bool, opts Options) {
	l, err := Open(filepath.Join(b.TempDir(), "audit.jsonl"), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ev := benchEvent
	ev.Sync = sync
	before := cpuTime(b)
	for b.Loop() {
		if err := l.Append(ev); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/op")
	b.ReportMetric(float64((cpuTime(b)-before).Microseconds())/float64(b.N), "cpu-µs/op")
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAppend is an append that leaves the line and the anchor in the page cache.
func BenchmarkAppend(b *testing.B) { benchmarkAppend(b, false, Options{}) }

// BenchmarkAppendSync is an append fsynced before it returns, as certificate events are: the
// line, then the anchor.
func BenchmarkAppendSync(b *testing.B) { benchmarkAppend(b, true, Options{}) }

// BenchmarkAppendSigned is BenchmarkAppend with a signing key: an Ed25519 signature of the
// anchor per append.
func BenchmarkAppendSigned(b *testing.B) {
	s, err := certs.NewSigner(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
	if err != nil {
		b.Fatal(err)
	}
	benchmarkAppend(b, false, Options{Signer: s})
}

// BenchmarkAppendSyncSigned is BenchmarkAppendSync with a signing key.
func BenchmarkAppendSyncSigned(b *testing.B) {
	s, err := certs.NewSigner(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
	if err != nil {
		b.Fatal(err)
	}
	benchmarkAppend(b, true, Options{Signer: s})
}
