package audit

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A typical line: a symptom with a few fields, about 250 bytes.
var benchEvent = Event{Type: TypeSymptom, AgentID: "research-bot", Data: map[string]any{
	"check": "memory", "severity": "warning", "observed": "1.2GiB", "threshold": "1GiB",
	"message": "rss 1.2GiB over 1GiB for 10s",
}}

// benchmarkAppend reports wall-clock µs/op and, less disturbed by a busy machine, the CPU
// time (user+system, all threads) an append costs.
func benchmarkAppend(b *testing.B, sync bool) {
	l, err := Open(filepath.Join(b.TempDir(), "audit.jsonl"), Options{})
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

// BenchmarkAppend is an append that leaves the line in the page cache.
func BenchmarkAppend(b *testing.B) { benchmarkAppend(b, false) }

// BenchmarkAppendSync is an append fsynced before it returns, as certificate events are.
func BenchmarkAppendSync(b *testing.B) { benchmarkAppend(b, true) }
