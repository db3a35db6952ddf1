// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// killRows: row group 4. A tree of N processes (benchagent tree N: the Go
// main process and N-1 `sleep`s, all ignoring SIGINT and SIGTERM) killed
// by supervise's ladder — it says WATCHDOG=trigger once the tree is up —
// and, as the floor, by the harness itself: kill(-pgid, SIGKILL) and wait4
// until every process of the group is reaped (the harness is the
// subreaper of the orphans). hermeskilld's figure is its certificate's
// shutdown_log: sigkill_sent (the kill began) → reaped (the tree found
// empty and the main process reaped).
func (b *bench) killRows() ([]Row, []string) {
	const g = "4 kill-to-empty"
	type variant struct {
		name string
		ms   []float64
		err  error
	}
	sizes := []int{1, 10, 100}
	var rows []Row
	b.logf("4 kill-to-empty: trees of %v, %d runs each", sizes, b.cfg.killRuns)
	for _, n := range sizes {
		vs := []*variant{
			{name: fmt.Sprintf("tree of %d: supervise (containment auto) SIGKILL sent → tree empty", n)},
			{name: fmt.Sprintf("tree of %d: supervise `--containment pgroup` SIGKILL sent → tree empty", n)},
			{name: fmt.Sprintf("tree of %d: harness `kill -9 -PGID` → all reaped (floor)", n)},
		}
		for r := 0; r < b.cfg.killRuns && !b.interrupted(); r++ {
			for i, v := range vs {
				if v.err != nil {
					continue
				}
				var ms float64
				var err error
				switch i {
				case 0:
					ms, err = b.superviseKill(n, "auto", r)
				case 1:
					ms, err = b.superviseKill(n, "pgroup", r)
				case 2:
					ms, err = b.floorKill(n)
				}
				if err != nil {
					v.err = err
					continue
				}
				v.ms = append(v.ms, ms)
			}
		}
		if b.autoMode != "" {
			vs[0].name = fmt.Sprintf("tree of %d: supervise (containment auto: %s) SIGKILL sent → tree empty", n, b.autoMode)
		}
		floor := Median(vs[2].ms)
		for i, v := range vs {
			if v.err != nil {
				rows = append(rows, failed(g, v.name, v.err))
				continue
			}
			row, s := durRow(g, v.name, v.ms, false)
			if i < 2 && vs[2].err == nil {
				part := s.P50 - floor
				row.Versus = fmtSignedMs(part) + " vs floor (p50)"
				if i == 0 && n == 100 {
					row.Target = "hermeskilld part (p50 − floor) ≤ 20 ms"
					row.OK = checkLE(part, 20)
				}
			}
			if i == 2 {
				row.Versus = "floor"
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// superviseKill runs one tree under supervise and returns sigkill_sent →
// reaped from its certificate, in ms.
func (b *bench) superviseKill(n int, containment string, run int) (float64, error) {
	dir := filepath.Join(b.tmp, "kill", fmt.Sprintf("%s-%d-%d", containment, n, run))
	cmd := b.command([]string{b.cfg.hk, "supervise", "--certs-dir", dir, "--log-level", "error",
		"--containment", containment, "--coop-grace", "10ms", "--term-grace", "10ms", "--",
		b.agent, "tree", fmt.Sprint(n)})
	if err := b.start(cmd, false); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- b.wait(cmd) }()
	select {
	case <-done: // killed: 137
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return 0, errors.New("supervise did not end within 30s")
	}
	certs, err := readCerts(dir)
	if err != nil {
		return 0, err
	}
	if len(certs) != 1 {
		return 0, fmt.Errorf("%d certificates in %s", len(certs), dir)
	}
	c := certs[0]
	k, ok1 := c.step("sigkill_sent")
	r, ok2 := c.step("reaped")
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("certificate without sigkill_sent and reaped (trigger %s, reached %s)", c.TriggerCheck, c.Escalation.Reached)
	}
	if containment == "auto" {
		b.autoMode = c.Containment
	}
	_ = os.RemoveAll(dir)
	return float64(r.Sub(k).Nanoseconds()) / 1e6, nil
}

// floorKill starts the same tree straight from the harness, in a process
// group of its own, waits for its "ready", then kills the group and
// reaps every process of it.
func (b *bench) floorKill(n int) (float64, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer null.Close()
	argv := []string{b.agent, "tree", fmt.Sprint(n)}
	env := []string{"PATH=" + os.Getenv("PATH")}
	pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{Env: env,
		Files: []uintptr{null.Fd(), pw.Fd(), null.Fd()}, Sys: &syscall.SysProcAttr{Setpgid: true}})
	pw.Close()
	if err != nil {
		pr.Close()
		return 0, err
	}
	b.reg.add(pid, false)
	defer b.reg.remove(pid)
	line, err := bufio.NewReader(pr).ReadString('\n')
	pr.Close()
	if err != nil || line != "ready\n" {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return 0, fmt.Errorf("the tree did not start: %q %v", line, err)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return 0, err
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	t0 := time.Now()
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		return 0, err
	}
	reaped := 0
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(-pid, &ws, syscall.WALL, nil)
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.ECHILD {
			break
		}
		if err != nil {
			return 0, err
		}
		reaped++
	}
	d := time.Since(t0)
	if reaped != n {
		return 0, fmt.Errorf("reaped %d processes of a tree of %d", reaped, n)
	}
	return float64(d.Nanoseconds()) / 1e6, nil
}
