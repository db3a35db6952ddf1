// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

// ingestRows: row group 5. A daemon (heartbeat_rate raised out of the way,
// metrics on loopback) with one, then -agents, agents that send WATCHDOG=1
// as fast as their socket takes them (benchagent blast). Over each window
// the rate is read from hermeskill_heartbeats_total (accepted heartbeats)
// every second, and the daemon's CPU (utime+stime) per accepted heartbeat
// from /proc. The floor: the harness's own blocking recvmsg loop with
// SO_PASSCRED on one socket, fed by one blast agent, its CPU from
// getrusage(RUSAGE_THREAD).
func (b *bench) ingestRows() ([]Row, []string) {
	const g = "5 ingest"
	var rows []Row
	var notes []string
	win := b.cfg.ingest
	b.logf("5 ingest: windows of %s", win)

	floorRate, floorRow := b.ingestFloor(win)
	rows = append(rows, floorRow...)

	addr, err := freePort()
	if err != nil {
		return append(rows, failed(g, "daemon ingest", err)), nil
	}
	d, err := b.startDaemon("ingest", fmt.Sprintf("heartbeat_rate: 1000000000\nmetrics: {listen: %q}\n", addr))
	if err != nil {
		return append(rows, failed(g, "daemon ingest", err)), nil
	}
	d.metrics = addr
	defer func() {
		if d.running() {
			_, _ = d.stop(30 * time.Second)
		}
	}()
	body := func(id string) string {
		return fmt.Sprintf("id: %s\ncommand: [%s, blast]\nescalation: {coop_grace: 500ms, term_grace: 500ms}\n", id, b.agent)
	}
	for _, phase := range []int{1, b.cfg.agents} {
		agents := fmt.Sprintf("%d agents", phase)
		if phase == 1 {
			agents = "1 agent"
		}
		name := "daemon, " + agents + " blasting: accepted heartbeats"
		for i := range phase {
			id := fmt.Sprintf("b%d", i)
			if _, err := os.Stat(filepath.Join(d.agents, id+".yaml")); err == nil {
				continue
			}
			if err := d.writeAgent(id, body(id)); err != nil {
				return append(rows, failed(g, name, err)), notes
			}
		}
		if _, err := d.waitBeating(phase, 60*time.Second); err != nil {
			rows = append(rows, failed(g, name, err))
			break
		}
		if !b.sleepCtx(500 * time.Millisecond) {
			return rows, notes
		}
		rates, cpuPerBeat, dropped, err := b.ingestWindow(d, win)
		if err != nil {
			rows = append(rows, failed(g, name, err))
			break
		}
		s := Summarize(rates)
		rows = append(rows, Row{Group: g, Name: name + " per second", N: s.N,
			P50: fmtRate(s.P50), Spread: spread(fmtRate, s.P10, s.P90), Max: fmtRate(s.Max),
			Versus: fmtRatio(Ratio(s.P50, floorRate)) + " of the floor"})
		rows = append(rows, Row{Group: g, Name: "daemon CPU per accepted heartbeat, " + agents,
			P50: fmt.Sprintf("%.1f µs", cpuPerBeat), Versus: fmt.Sprintf("%.0f dropped/s", dropped)})
	}
	notes = append(notes, "ingest: the blasting agents share the 2 cores with the daemon; rates are of accepted heartbeats (hermeskill_heartbeats_total), drops (hermeskill_datagrams_dropped_total, mostly overflow) beside.")
	return rows, notes
}

// ingestWindow samples the heartbeat counter and the daemon's CPU every
// second for win: per-second rates, µs of CPU per accepted heartbeat over
// the whole window, and drops per second.
func (b *bench) ingestWindow(d *daemon, win time.Duration) (rates []float64, cpuPerBeat, dropsPerSec float64, err error) {
	const hb, drop = "hermeskill_heartbeats_total", "hermeskill_datagrams_dropped_total"
	var ts, counts []float64
	var cpu0, cpu1 int64
	var drop0, drop1 float64
	t0 := time.Now()
	steps := int(math.Max(1, win.Seconds()))
	for i := 0; i <= steps; i++ {
		m, err := d.scrape(hb, drop)
		if err != nil {
			return nil, 0, 0, err
		}
		c, err := cpuTicks(d.pid)
		if err != nil {
			return nil, 0, 0, err
		}
		ts = append(ts, time.Since(t0).Seconds())
		counts = append(counts, m[hb])
		if i == 0 {
			cpu0, drop0 = c, m[drop]
		}
		cpu1, drop1 = c, m[drop]
		if i < steps && !b.sleepCtx(t0.Add(time.Duration(i+1)*win/time.Duration(steps)).Sub(time.Now())) {
			return nil, 0, 0, b.ctx.Err()
		}
	}
	beats := counts[len(counts)-1] - counts[0]
	if beats <= 0 {
		return nil, 0, 0, errors.New("no heartbeat accepted in the window")
	}
	cpuPerBeat = float64(cpu1-cpu0) / clockTick * 1e6 / beats
	return Rates(ts, counts), cpuPerBeat, (drop1 - drop0) / ts[len(ts)-1], nil
}

// ingestFloor is the harness's own receive loop.
func (b *bench) ingestFloor(win time.Duration) (float64, []Row) {
	const g = "5 ingest"
	const name = "floor: harness recvmsg+SO_PASSCRED loop, 1 blasting agent"
	path := filepath.Join(b.tmp, "floor.sock")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return math.NaN(), []Row{failed(g, name, err)}
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		return math.NaN(), []Row{failed(g, name, err)}
	}
	_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_PASSCRED, 1)
	_ = syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &syscall.Timeval{Usec: 100000})
	cmd := b.command([]string{b.agent, "blast"}, "HERMESKILL_SOCKET="+path)
	if err := b.start(cmd, false); err != nil {
		return math.NaN(), []Row{failed(g, name, err)}
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = b.wait(cmd)
	}()

	type result struct {
		rates []float64
		cpuUs float64
		err   error
	}
	res := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		buf := make([]byte, 8192)
		oob := make([]byte, syscall.CmsgSpace(syscall.SizeofUcred))
		// Wait for the first datagram, then count for win.
		for {
			_, _, _, _, err := syscall.Recvmsg(fd, buf, oob, 0)
			if err == nil {
				break
			}
			if err != syscall.EAGAIN && err != syscall.EINTR {
				res <- result{err: err}
				return
			}
			if b.interrupted() {
				res <- result{err: b.ctx.Err()}
				return
			}
		}
		var ru0, ru1 syscall.Rusage
		_ = syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru0)
		t0 := time.Now()
		var ts, counts []float64
		var n, bad float64
		next := t0.Add(time.Second)
		ts, counts = append(ts, 0), append(counts, 0)
		for {
			_, oobn, _, _, err := syscall.Recvmsg(fd, buf, oob, 0)
			if err == nil {
				if msgs, perr := syscall.ParseSocketControlMessage(oob[:oobn]); perr == nil && len(msgs) == 1 {
					if _, perr := syscall.ParseUnixCredentials(&msgs[0]); perr == nil {
						n++
					} else {
						bad++
					}
				} else {
					bad++
				}
			}
			if now := time.Now(); now.After(next) {
				ts, counts = append(ts, now.Sub(t0).Seconds()), append(counts, n)
				next = next.Add(time.Second)
				if now.Sub(t0) >= win {
					break
				}
			}
		}
		_ = syscall.Getrusage(1, &ru1)
		cpu := float64(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) / 1e3
		if n == 0 || bad > 0 {
			res <- result{err: fmt.Errorf("%v datagrams with credentials, %v without", n, bad)}
			return
		}
		res <- result{rates: Rates(ts, counts), cpuUs: cpu / n}
	}()
	r := <-res
	if r.err != nil {
		return math.NaN(), []Row{failed(g, name, r.err)}
	}
	s := Summarize(r.rates)
	return s.P50, []Row{
		{Group: g, Name: name + " per second", N: s.N, P50: fmtRate(s.P50),
			Spread: spread(fmtRate, s.P10, s.P90), Max: fmtRate(s.Max), Versus: "floor"},
		{Group: g, Name: "floor: harness CPU per datagram (its reading thread)", P50: fmt.Sprintf("%.1f µs", r.cpuUs), Versus: "floor"},
	}
}
