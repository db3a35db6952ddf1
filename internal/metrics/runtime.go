// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hermeskill/hermeskilld/internal/procfs"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// writeRuntime writes the Go runtime's and the process's own series, the
// subset of client_golang's go_* and process_* that answers "is the
// daemon itself healthy": goroutines, heap, CPU, memory, descriptors.
func writeRuntime(e *expo) {
	e.family("go_goroutines", "gauge", "Number of goroutines that currently exist.")
	e.sample("go_goroutines", float64(runtime.NumGoroutine()))
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	e.family("go_memstats_heap_alloc_bytes", "gauge", "Number of heap bytes allocated and still in use.")
	e.sample("go_memstats_heap_alloc_bytes", float64(ms.HeapAlloc))
	e.family("go_memstats_sys_bytes", "gauge", "Number of bytes obtained from system.")
	e.sample("go_memstats_sys_bytes", float64(ms.Sys))
	e.family("go_gc_cycles_total", "counter", "Completed GC cycles.")
	e.sample("go_gc_cycles_total", float64(ms.NumGC))

	fs := procfs.Default()
	pid := os.Getpid()
	if st, err := fs.Stat(pid); err == nil {
		e.family("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.")
		e.sample("process_cpu_seconds_total", float64(st.CPUTicks())/clockTicks)
		e.family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.")
		e.sample("process_resident_memory_bytes", float64(st.RSSPages)*float64(os.Getpagesize()))
		if boot, ok := bootTime(); ok {
			e.family("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.")
			e.sample("process_start_time_seconds", float64(boot.Unix())+float64(st.StartTimeTicks)/clockTicks)
		}
	}
	if n, err := fs.NumFDs(pid); err == nil {
		e.family("process_open_fds", "gauge", "Number of open file descriptors.")
		e.sample("process_open_fds", float64(n))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		e.family("process_max_fds", "gauge", "Maximum number of open file descriptors.")
		e.sample("process_max_fds", float64(lim.Cur))
	}
}

// bootTime is when the system booted: /proc/stat's btime, read once.
var bootTime = sync.OnceValues(func() (time.Time, bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, false
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Unix(sec, 0), err == nil
		}
	}
	return time.Time{}, false
})
