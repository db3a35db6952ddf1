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
	argv  func(file, certs string) []string
	steps []ladderStep
	errs  [][]float64 // per step, ms late (negative: early)
	// hermeskilld's variants: the decision (the certificate's
	// triggered_at) → the first signal sent (its shutdown_log step),
	// and → the first signal in the agent's handler, in ms.
	sent, seen []float64
	fail       error
	nfail      int
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
	dir := filepath.Join(b.tmp, "ladder")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return []Row{failed(g, "ladder", err)}, nil
	}
	sec := time.Second
	vs := []*ladderVariant{
		{name: "supervise `--max-runtime 1s --coop-signal none --term-grace 1s`",
			argv: func(f, certs string) []string {
				return []string{b.cfg.hk, "supervise", "--certs-dir", certs, "--log-level", "error",
					"--max-runtime", "1s", "--coop-signal", "none", "--term-grace", "1s", "--", b.agent, "wedged", f}
			},
			steps: []ladderStep{{"SIGTERM", sec}, {"SIGKILL", sec}}},
		{name: "`timeout -k 1s 1s`",
			argv: func(f, _ string) []string {
				return []string{"timeout", "-k", "1s", "1s", b.agent, "wedged", f}
			},
			steps: []ladderStep{{"SIGTERM", sec}, {"SIGKILL", sec}}},
		{name: "supervise `--max-runtime 1s --coop-grace 1s --term-grace 1s`",
			argv: func(f, certs string) []string {
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
					errs, first, err := b.ladderRun(v, file)
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
					if first != nil {
						v.sent = append(v.sent, first[0])
						v.seen = append(v.seen, first[1])
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
		if v.sent != nil {
			r, _ := durRow(g, v.name+": decision → first signal sent", v.sent, false)
			rows = append(rows, r)
			r, _ = durRow(g, v.name+": decision → first signal in the agent's handler", v.seen, false)
			rows = append(rows, r)
		}
		if v.nfail > 0 {
			notes = append(notes, fmt.Sprintf("ladder: %d run(s) of %s failed (see the log)", v.nfail, v.name))
		}
	}
	notes = append(notes, "ladder: a step's error is when the agent received it minus when it was due; the first step is due 1 s after the agent's own first instruction, the others one grace after the previous step arrived; SIGKILL is the agent's death as a pidfd reports it (includes the kernel's exit). Decision → first signal: from the certificate's triggered_at to its first signal's step (sent), and to the agent's handler (its own clock reading, after the thaw).")
	return rows, notes
}

func prevName(steps []ladderStep, k int) string {
	if k == 0 {
		return "agent start"
	}
	return steps[k-1].signal
}

// ladderRun runs one variant once and returns each step's error in ms,
// and for hermeskilld's variants the decision → first signal sent and →
// first signal in the agent's handler, in ms (from the run's certificate).
func (b *bench) ladderRun(v *ladderVariant, file string) ([]float64, []float64, error) {
	certs := file + ".certs"
	argv := v.argv(file, certs)
	cmd := b.command(argv)
	if err := b.start(cmd, false); err != nil {
		return nil, nil, err
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
			return nil, nil, errors.New("the agent did not start within 5s")
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
		return nil, nil, fmt.Errorf("pidfd_open: %w", err)
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
			return nil, nil, fmt.Errorf("the agent did not die: %v", err)
		}
		break
	}
	unix.Close(pfd)
	_ = b.wait(cmd) // 137 either way
	waited = true
	lines, err := readLines(file)
	if err != nil {
		return nil, nil, err
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
				return nil, nil, fmt.Errorf("no %s reached the agent", st.signal)
			}
		}
		due := prev.Add(st.after)
		errs[k] = float64(at.Sub(due).Nanoseconds()) / 1e6
		prev = at
	}
	if argv[0] != b.cfg.hk {
		return errs, nil, nil // not hermeskilld: no certificate
	}
	first, err := firstSignal(certs, lines)
	if err != nil {
		return nil, nil, err
	}
	return errs, first, nil
}

// firstSignal reads the run's one certificate: the decision (triggered_at)
// → its first signal's step, and → the first signal the agent's lines
// record, in ms.
func firstSignal(dir string, lines []string) ([]float64, error) {
	cs, err := readCerts(dir)
	if err != nil {
		return nil, err
	}
	if len(cs) != 1 {
		return nil, fmt.Errorf("%d certificates in %s, 1 expected", len(cs), dir)
	}
	c := cs[0]
	var sent time.Time
	for _, s := range c.ShutdownLog {
		switch s.Step {
		case "dump_signal_sent", "directive_sent", "coop_signal_sent", "sigterm_sent", "sigkill_sent":
			sent = s.At
		}
		if !sent.IsZero() {
			break
		}
	}
	if sent.IsZero() || c.TriggeredAt.IsZero() {
		return nil, fmt.Errorf("%s: no triggered_at or no signal in the shutdown log", dir)
	}
	var seen time.Time
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) == 2 {
			ns, _ := strconv.ParseInt(f[1], 10, 64)
			seen = time.Unix(0, ns)
			break
		}
	}
	if seen.IsZero() {
		return nil, errors.New("the agent recorded no signal")
	}
	return []float64{ms(sent.Sub(c.TriggeredAt)), ms(seen.Sub(c.TriggeredAt))}, nil
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
