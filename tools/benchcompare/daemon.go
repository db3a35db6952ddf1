// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hermeskill/hermeskilld/internal/fdbudget"
)

// daemonRows: row group 6. One daemon and -n agents (benchagent beat 1s:
// READY, then WATCHDOG=1 every second; heartbeat_timeout 10s, the default
// ladder). Agent files written → all N running with a heartbeat (GET
// /v1/agents); then, after 5s to settle, the daemon's CPU over -window in
// 5-second slices and its RSS; then SIGTERM → the daemon's exit, every
// agent stopped through its ladder, and the certificates counted. The
// floor: the harness forks and execs N of the same agent itself, until
// each has said READY=1 on the harness's socket.
func (b *bench) daemonRows() ([]Row, []string) {
	const g = "6 daemon"
	n := b.cfg.n
	var notes []string
	target := n == 1000
	tgt := func(s string) string {
		if target {
			return s
		}
		return s + " (at N=1000)"
	}
	var rows []Row
	if raised, restore, err := raiseLimits(n); err != nil {
		return []Row{skipped(g, fmt.Sprintf("daemon with %d agents", n), err.Error())}, nil
	} else {
		defer restore()
		if raised != "" {
			notes = append(notes, "daemon: raised for N="+strconv.Itoa(n)+": "+raised)
		}
	}
	b.logf("6 daemon: %d agents", n)

	floorMs, floorErr := b.floorStart(n)
	if b.interrupted() {
		return nil, nil
	}

	d, err := b.startDaemon("daemon", "")
	if err != nil {
		return []Row{failed(g, fmt.Sprintf("daemon with %d agents", n), err)}, nil
	}
	defer func() {
		if d.running() {
			_, _ = d.stop(2 * time.Minute)
		}
	}()
	t0 := time.Now()
	for i := range n {
		body := fmt.Sprintf("id: a%d\ncommand: [%s, beat, 1s]\nchecks: {heartbeat_timeout: 10s}\n", i, b.agent)
		if err := d.writeAgent(fmt.Sprintf("a%d", i), body); err != nil {
			return []Row{failed(g, "writing agent files", err)}, nil
		}
	}
	written := time.Since(t0)
	upName := fmt.Sprintf("%d agent files written → all running with a heartbeat", n)
	if _, err := d.waitBeating(n, time.Duration(max(120, n/20))*time.Second); err != nil {
		rows = append(rows, failed(g, upName, err))
		return rows, notes
	}
	up := time.Since(t0)
	r := Row{Group: g, Name: upName, P50: fmtMs(ms(up)), Target: tgt("≤ 8 s")}
	if target {
		r.OK = checkLE(up.Seconds(), 8)
	}
	if floorErr == nil {
		r.Versus = fmt.Sprintf("floor %s (×%.1f)", fmtMs(floorMs), ms(up)/floorMs)
	}
	rows = append(rows, r)
	if floorErr != nil {
		rows = append(rows, failed(g, fmt.Sprintf("floor: harness fork/exec of %d agents → each said READY", n), floorErr))
	} else {
		rows = append(rows, Row{Group: g, Name: fmt.Sprintf("floor: harness fork/exec of %d agents → each said READY", n), P50: fmtMs(floorMs), Versus: "floor"})
	}
	notes = append(notes, fmt.Sprintf("daemon: the %d files took %s to write (in the files → running figure).", n, fmtMs(ms(written))))

	// Steady state.
	if !b.sleepCtx(5 * time.Second) {
		return nil, nil
	}
	slice := 5 * time.Second
	if b.cfg.window < 2*slice {
		slice = b.cfg.window / 2
	}
	var pcts []float64
	c0, err := cpuTicks(d.pid)
	if err != nil {
		return append(rows, failed(g, "daemon CPU", err)), notes
	}
	first, tStart := c0, time.Now()
	for t := time.Now(); time.Since(tStart) < b.cfg.window-slice/2; t = time.Now() {
		if !b.sleepCtx(slice) {
			return nil, nil
		}
		c1, err := cpuTicks(d.pid)
		if err != nil {
			return append(rows, failed(g, "daemon CPU", err)), notes
		}
		pcts = append(pcts, float64(c1-c0)/clockTick/time.Since(t).Seconds()*100)
		c0 = c1
	}
	whole := float64(c0-first) / clockTick / time.Since(tStart).Seconds() * 100
	s := Summarize(pcts)
	pct := func(v float64) string { return fmt.Sprintf("%.2f %%", v) }
	cpuRow := Row{Group: g, Name: fmt.Sprintf("daemon CPU, %d idle agents beating at 1 Hz (%% of one core, %s slices)", n, slice),
		N: s.N, P50: pct(s.P50), Spread: spread(pct, s.P10, s.P90), Max: pct(s.Max),
		Versus: fmt.Sprintf("whole window %s: %.0f µs per heartbeat", pct(whole), whole/100*1e6/float64(n)),
		Target: tgt("≤ 3 %")}
	if target {
		cpuRow.OK = checkLE(s.P50, 3)
	}
	rows = append(rows, cpuRow)
	rss, threads, err := procStatus(d.pid)
	if err != nil {
		rows = append(rows, failed(g, "daemon RSS", err))
	} else {
		mib := float64(rss) / (1 << 20)
		rr := Row{Group: g, Name: fmt.Sprintf("daemon RSS, %d idle agents", n), P50: fmt.Sprintf("%.1f MiB", mib),
			Versus: fmt.Sprintf("%d threads; %.0f KiB per agent", threads, float64(rss)/1024/float64(n)), Target: tgt("≤ 100 MiB")}
		if target {
			rr.OK = checkLE(mib, 100)
		}
		rows = append(rows, rr)
	}

	// Shutdown, the daemon's threads and RSS sampled every 50 ms through
	// it (every ladder at once: a thread per agent would show here).
	stopName := fmt.Sprintf("SIGTERM → every ladder done, daemon exited (%d agents)", n)
	peakThreads, peakRSS := 0, int64(0)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for d.running() {
			if rss, th, err := procStatus(d.pid); err == nil {
				peakThreads, peakRSS = max(peakThreads, th), max(peakRSS, rss)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	took, err := d.stop(time.Duration(max(120, n/10)) * time.Second)
	<-sampled
	nc := countCerts(d.certs)
	if err != nil {
		rows = append(rows, failed(g, stopName, fmt.Errorf("%v (%d certificates written)", err, nc)))
		return rows, notes
	}
	notes = append(notes, fmt.Sprintf("daemon: through the shutdown of %d agents at most %d threads and %.1f MiB RSS.", n, peakThreads, float64(peakRSS)/(1<<20)))
	// An agent killed by a check before the SIGTERM (a heartbeat that
	// did not come: a starved host) makes the window not idle.
	if cs, err := readCerts(d.certs); err == nil {
		byCheck := map[string]int{}
		for _, c := range cs {
			if c.TriggerCheck != "manual" {
				byCheck[c.TriggerCheck]++
			}
		}
		for check, k := range byCheck {
			notes = append(notes, fmt.Sprintf("daemon: %d of %d agents were killed by %s before the SIGTERM: the figures above are not of idle agents.", k, n, check))
		}
	}
	sr := Row{Group: g, Name: stopName, P50: fmtMs(ms(took)), Versus: fmt.Sprintf("%d of %d certificates written", nc, n), Target: tgt("≤ 8 s")}
	if target {
		sr.OK = check(took.Seconds() <= 8 && nc == n)
	}
	rows = append(rows, sr)
	return rows, notes
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// floorStart forks and execs n beat agents from the harness, all in one
// process group, and returns the time until each has said READY=1 on the
// harness's socket; then kills and reaps them.
func (b *bench) floorStart(n int) (float64, error) {
	path := b.tmp + "/floor-start.sock"
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		return 0, err
	}
	_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<20)
	_ = syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &syscall.Timeval{Usec: 200000})
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer null.Close()
	env := append(os.Environ(), "HERMESKILL_SOCKET="+path)
	argv := []string{b.agent, "beat", "1s"}
	ready := make(chan error, 1)
	go func() { // count READY=1 while the forks go on
		buf := make([]byte, 256)
		got := 0
		deadline := time.Now().Add(time.Duration(max(60, n/20)) * time.Second)
		for got < n {
			nr, err := syscall.Read(fd, buf)
			if err == nil && string(buf[:nr]) == "READY=1" {
				got++
			}
			if time.Now().After(deadline) || b.interrupted() {
				ready <- fmt.Errorf("%d of %d agents said READY", got, n)
				return
			}
		}
		ready <- nil
	}()
	var pids []int
	pgid := 0
	defer func() {
		if pgid != 0 {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		for _, p := range pids {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(p, &ws, 0, nil)
		}
		if pgid != 0 {
			b.reg.remove(pgid)
		}
	}()
	t0 := time.Now()
	for range n {
		pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{Env: env,
			Files: []uintptr{null.Fd(), null.Fd(), null.Fd()}, Sys: &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}})
		if err != nil {
			return 0, err
		}
		if pgid == 0 {
			pgid = pid
			b.reg.add(pid, false)
		}
		pids = append(pids, pid)
	}
	if err := <-ready; err != nil {
		return 0, err
	}
	return ms(time.Since(t0)), nil
}

// fdsFor is an RLIMIT_NOFILE under which a daemon of n agents fits: its
// descriptor budget (package fdbudget) in cgroup mode, the larger, with
// the control socket's bound at its cap (4096, a quarter of any limit
// above 16,384).
func fdsFor(n int) uint64 {
	return uint64(fdbudget.Reserve(4096, 0, 0, 0) + n*fdbudget.PerAgent(true))
}

// fitFds is how many agents the budget admits under a limit of limit.
func fitFds(limit uint64) int {
	b := fdbudget.Budget{Limit: int(min(limit, 1<<31)), PerAgent: fdbudget.PerAgent(true),
		Reserved: fdbudget.Reserve(int(min(max(limit/4, 8), 4096)), 0, 0, 0)}
	return b.Fits()
}

// raiseLimits makes room for n agents: RLIMIT_NOFILE (the daemon's
// descriptor budget refuses agents past it; the daemon raises its soft
// limit to the hard one, which it inherits from the harness), and as root
// kernel.pid_max and kernel.threads-max (each Go agent has a handful of
// threads). It says what it raised and returns how to put the sysctls
// back; an error when the machine cannot take n agents (a hard limit that
// cannot be raised says how many fit).
func raiseLimits(n int) (string, func(), error) {
	var said []string
	restore := func() {}
	needFds := fdsFor(n)
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && fitFds(rl.Max) < n {
		want := syscall.Rlimit{Cur: needFds, Max: needFds}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return "", restore, fmt.Errorf("RLIMIT_NOFILE's hard limit is %d and cannot be raised (%v: it takes CAP_SYS_RESOURCE); "+
				"%d agents need %d, %d fit", rl.Max, err, n, needFds, fitFds(rl.Max))
		}
		said = append(said, fmt.Sprintf("RLIMIT_NOFILE %d → %d", rl.Max, needFds))
	}
	if avail := memAvailable(); avail > 0 && avail < int64(n)*2<<20 {
		return "", restore, fmt.Errorf("%d MiB available, ~%d MiB needed for %d agents", avail>>20, int64(n)*2, n)
	}
	var undo []func()
	for _, s := range []struct {
		path string
		need int64
	}{{"/proc/sys/kernel/pid_max", int64(n)*8 + 8192}, {"/proc/sys/kernel/threads-max", int64(n)*8 + 8192},
		// Every wait of a ladder on cgroup.events is an inotify instance:
		// past this bound the waits fall back to polling.
		{"/proc/sys/fs/inotify/max_user_instances", int64(n) + 512}} {
		raw, err := os.ReadFile(s.path)
		if err != nil {
			continue
		}
		cur, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		if err != nil || cur >= s.need {
			continue
		}
		want := s.need
		if strings.HasSuffix(s.path, "pid_max") {
			want = min(4194304, max(want, 1<<20))
		}
		if err := os.WriteFile(s.path, []byte(strconv.FormatInt(want, 10)), 0o644); err != nil {
			return "", restore, fmt.Errorf("%s is %d, %d needed, and it cannot be raised: %v", s.path, cur, s.need, err)
		}
		name := strings.ReplaceAll(strings.TrimPrefix(s.path, "/proc/sys/"), "/", ".")
		said = append(said, fmt.Sprintf("%s %d → %d (put back after)", name, cur, want))
		path, old := s.path, raw
		undo = append(undo, func() { _ = os.WriteFile(path, old, 0o644) })
	}
	restore = func() {
		for _, u := range undo {
			u()
		}
	}
	return strings.Join(said, ", "), restore, nil
}

func memAvailable() int64 {
	raw, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, l := range splitLines(string(raw)) {
		var kb int64
		if n, _ := fmt.Sscanf(l, "MemAvailable: %d kB", &kb); n == 1 {
			return kb * 1024
		}
	}
	return 0
}
