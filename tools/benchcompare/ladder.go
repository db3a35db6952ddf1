// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A ladder variant: a command around the wedged agent and the steps it
// should take, each due a fixed delay after the previous one (the first
// after the agent's start).
type ladderVariant struct {
	name  string
	argv  func(file string) []string
	steps []ladderStep
	errs  [][]float64 // per step, ms late (negative: early)
	fail  error
	nfail int
}

type ladderStep struct {
	signal string // SIGINT, SIGTERM, or SIGKILL (seen as the death)
	after  time.Duration
}

// ladderRows: row group 2. The agent (benchagent wedged) catches SIGINT
// and SIGTERM and ignores them, recording when each arrived; its death
// (SIGKILL) is seen by the harness through a pidfd. Each step's error is
// its arrival minus when it was due: the first step is due 1s after the
// agent's own first instruction (so both tools are measured from the same
// point, after their own start-up), the others one grace after the
// previous step arrived.
func (b *bench) ladderRows() ([]Row, []string) {
	const g = "2 ladder"
	certs := filepath.Join(b.tmp, "ladder-certs")
	dir := filepath.Join(b.tmp, "ladder")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return []Row{failed(g, "ladder", err)}, nil
	}
	sec := time.Second
	vs := []*ladderVariant{
		{name: "supervise `--max-runtime 1s --coop-signal none --term-grace 1s`",
			argv: func(f string) []string {
				return []string{b.cfg.hk, "supervise", "--certs-dir", certs, "--log-level", "error",
					"--max-runtime", "1s", "--coop-signal", "none", "--term-grace", "1s", "--", b.agent, "wedged", f}
			},
			steps: []ladderStep{{"SIGTERM", sec}, {"SIGKILL", sec}}},
		{name: "`timeout -k 1s 1s`",
			argv: func(f string) []string {
				return []string{"timeout", "-k", "1s", "1s", b.agent, "wedged", f}
			},
			steps: []ladderStep{{"SIGTERM", sec}, {"SIGKILL", sec}}},
		{name: "supervise `--max-runtime 1s --coop-grace 1s --term-grace 1s`",
			argv: func(f string) []string {
				return []string{b.cfg.hk, "supervise", "--certs-dir", certs, "--log-level", "error",
					"--max-runtime", "1s", "--coop-grace", "1s", "--term-grace", "1s", "--", b.agent, "wedged", f}
			},
			steps: []ladderStep{{"SIGINT", sec}, {"SIGTERM", sec}, {"SIGKILL", sec}}},
	}
	if _, err := exec.LookPath("timeout"); err != nil {
		vs[1].fail = errors.New("skipped: coreutils timeout not found")
	}
	for _, v := range vs {
		v.errs = make([][]float64, len(v.steps))
	}
	b.logf("2 ladder: %d rounds of %d runs of each variant at once", b.cfg.ladderRuns, b.cfg.ladderPar)
	var mu sync.Mutex
	seq := 0
	for r := 0; r < b.cfg.ladderRuns && !b.interrupted(); r++ {
		var wg sync.WaitGroup
		for i := 0; i < b.cfg.ladderPar; i++ {
			for _, v := range vs { // interleaved starts: A B C A B C …
				if v.fail != nil {
					continue
				}
				seq++
				file := filepath.Join(dir, fmt.Sprintf("run%d", seq))
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs, err := b.ladderRun(v, file)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						v.nfail++
						if v.nfail == 1 {
							b.logf("2 ladder: %s: %v", v.name, err)
						}
						return
					}
					for k, e := range errs {
						v.errs[k] = append(v.errs[k], e)
					}
				}()
				time.Sleep(7 * time.Millisecond)
			}
		}
		wg.Wait()
	}
	var rows []Row
	var notes []string
	var p50 []float64 // supervise's matched variant, per step
	base := 0         // its first row
	for vi, v := range vs {
		if v.fail != nil {
			rows = append(rows, Row{Group: g, Name: v.name, P50: v.fail.Error()})
			continue
		}
		if vi == 0 {
			base = len(rows)
		}
		for k, st := range v.steps {
			what := fmt.Sprintf("%s: %s error (due %s after %s)", v.name, st.signal, st.after, prevName(v.steps, k))
			r, s := durRow(g, what, v.errs[k], true)
			switch vi {
			case 0:
				p50 = append(p50, s.P50)
			case 1:
				if k < len(p50) && vs[0].fail == nil {
					rows[base+k].Versus = fmtSignedMs(p50[k]-s.P50) + " vs timeout (p50)"
				}
			}
			rows = append(rows, r)
		}
		if v.nfail > 0 {
			notes = append(notes, fmt.Sprintf("ladder: %d run(s) of %s failed (see the log)", v.nfail, v.name))
		}
	}
	notes = append(notes, "ladder: a step's error is when the agent received it minus when it was due; the first step is due 1 s after the agent's own first instruction, the others one grace after the previous step arrived; SIGKILL is the agent's death as a pidfd reports it (includes the kernel's exit).")
	return rows, notes
}

func prevName(steps []ladderStep, k int) string {
	if k == 0 {
		return "agent start"
	}
	return steps[k-1].signal
}

// ladderRun runs one variant once and returns each step's error in ms.
func (b *bench) ladderRun(v *ladderVariant, file string) ([]float64, error) {
	cmd := b.command(v.argv(file))
	if err := b.start(cmd, false); err != nil {
		return nil, err
	}
	waited := false
	defer func() {
		if !waited {
			_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
			_ = b.wait(cmd)
		}
	}()
	// The agent's pid and start, from its file.
	var pid int
	var start time.Time
	deadline := time.Now().Add(5 * time.Second)
	for pid == 0 {
		if time.Now().After(deadline) || b.interrupted() {
			return nil, errors.New("the agent did not start within 5s")
		}
		if lines, _ := readLines(file); len(lines) > 0 {
			f := strings.Fields(lines[0])
			if len(f) == 3 && f[0] == "start" {
				pid, _ = strconv.Atoi(f[1])
				ns, _ := strconv.ParseInt(f[2], 10, 64)
				start = time.Unix(0, ns)
			}
		}
		time.Sleep(time.Millisecond)
	}
	pfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open: %w", err)
	}
	var death time.Time
	total := time.Duration(0)
	for _, s := range v.steps {
		total += s.after
	}
	for {
		fds := []unix.PollFd{{Fd: int32(pfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(total.Milliseconds())+10000)
		if err == unix.EINTR {
			continue
		}
		death = time.Now()
		if err != nil || n == 0 {
			unix.Close(pfd)
			return nil, fmt.Errorf("the agent did not die: %v", err)
		}
		break
	}
	unix.Close(pfd)
	_ = b.wait(cmd) // 137 either way
	waited = true
	lines, err := readLines(file)
	if err != nil {
		return nil, err
	}
	errs := make([]float64, len(v.steps))
	prev := start
	li := 1
	for k, st := range v.steps {
		var at time.Time
		if st.signal == "SIGKILL" {
			at = death
		} else {
			for ; li < len(lines); li++ { // the first such signal after the previous step
				f := strings.Fields(lines[li])
				if len(f) == 2 && f[0] == st.signal {
					ns, _ := strconv.ParseInt(f[1], 10, 64)
					at = time.Unix(0, ns)
					li++
					break
				}
			}
			if at.IsZero() {
				return nil, fmt.Errorf("no %s reached the agent", st.signal)
			}
		}
		due := prev.Add(st.after)
		errs[k] = float64(at.Sub(due).Nanoseconds()) / 1e6
		prev = at
	}
	return errs, nil
}

func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out, sc.Err()
}
