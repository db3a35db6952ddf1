// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"
)

//go:embed agents/benchagent/main.go
var benchagentSource []byte

//go:embed agents/empty/main.go
var emptySource []byte

// bench is what every row group shares.
type bench struct {
	cfg   config
	ctx   context.Context
	tmp   string // removed at the end, Ctrl-C included
	agent string // the benchagent binary
	empty string // the empty Go program
	reg   *registry
	load0 string // load average at the start
	// autoMode is what supervise's --containment auto chose (from a
	// certificate): cgroup or pgroup.
	autoMode string
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.cfg.log, "benchcompare: "+format+"\n", args...)
}

// interrupted reports whether the run was cancelled (Ctrl-C).
func (b *bench) interrupted() bool { return b.ctx.Err() != nil }

// buildAgents compiles the two embedded programs into tmp/bin.
func (b *bench) buildAgents() error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	for _, p := range []struct {
		name string
		src  []byte
		out  *string
	}{{"benchagent", benchagentSource, &b.agent}, {"empty", emptySource, &b.empty}} {
		dir := filepath.Join(b.tmp, "src", p.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "main.go"), p.src, 0o644); err != nil {
			return err
		}
		out := filepath.Join(b.tmp, "bin", p.name)
		cmd := exec.CommandContext(b.ctx, goTool, "build", "-trimpath", "-o", out, "main.go")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GO111MODULE=on", "GOWORK=off")
		if msg, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %v: %s", p.name, err, msg)
		}
		*p.out = out
	}
	return nil
}

// registry holds every process the harness started and has not reaped,
// so that an interrupted run leaves nothing behind. Each was started in a
// process group of its own (pgid = pid).
type registry struct {
	mu      sync.Mutex
	procs   map[int]bool // pid -> is a daemon (stopped with SIGTERM first)
	stopped bool
}

func newRegistry() *registry { return &registry{procs: map[int]bool{}} }

func (r *registry) add(pid int, daemon bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.procs[pid] = daemon
	if r.stopped { // started while cleaning up: gone at once
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

func (r *registry) remove(pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.procs, pid)
}

// killAll stops everything: daemons get SIGTERM and up to grace to run
// their ladders (their agents die with them anyway: the keeper), then
// every process group left gets SIGKILL.
func (r *registry) killAll(grace time.Duration) {
	r.mu.Lock()
	r.stopped = true
	var daemons []int
	for pid, d := range r.procs {
		if d {
			daemons = append(daemons, pid)
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	r.mu.Unlock()
	deadline := time.Now().Add(grace)
	for _, pid := range daemons {
		for time.Now().Before(deadline) && alive(pid) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for pid := range r.procs {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	st, err := statState(b)
	return err == nil && st != 'Z' && st != 'X'
}

// statState is the state letter of a /proc/PID/stat line.
func statState(b []byte) (byte, error) {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' {
			if i+2 < len(b) {
				return b[i+2], nil
			}
			break
		}
	}
	return 0, errors.New("bad stat line")
}

// command prepares argv in a process group of its own, with stdin, stdout
// and stderr on /dev/null unless set later.
func (b *bench) command(argv []string, env ...string) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// start starts cmd and registers it; wait reaps and unregisters it.
func (b *bench) start(cmd *exec.Cmd, daemon bool) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	b.reg.add(cmd.Process.Pid, daemon)
	return nil
}

func (b *bench) wait(cmd *exec.Cmd) error {
	err := cmd.Wait()
	b.reg.remove(cmd.Process.Pid)
	return err
}

// cpuTicks is utime+stime of pid in clock ticks (/proc/PID/stat).
func cpuTicks(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := len(raw) - 1
	for i >= 0 && raw[i] != ')' {
		i--
	}
	var f [13]int64
	var state string
	// after ")": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
	_, err = fmt.Sscan(string(raw[i+1:]), &state, &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &f[9], &f[10], &f[11])
	if err != nil {
		return 0, fmt.Errorf("parsing /proc/%d/stat: %w", pid, err)
	}
	return f[10] + f[11], nil
}

// clockTick is USER_HZ: 100 on every Linux that Go supports.
const clockTick = 100

// procStatus reads VmRSS (bytes) and Threads of pid.
func procStatus(pid int) (rss int64, threads int, err error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range splitLines(string(raw)) {
		var kb int64
		if n, _ := fmt.Sscanf(line, "VmRSS: %d kB", &kb); n == 1 {
			rss = kb * 1024
		}
		fmt.Sscanf(line, "Threads: %d", &threads)
	}
	return rss, threads, nil
}

func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\n' {
			i++
		}
		out = append(out, s[:i])
		if i < len(s) {
			i++
		}
		s = s[i:]
	}
	return out
}

// sleepCtx sleeps d or until the run is interrupted; false if interrupted.
func (b *bench) sleepCtx(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-b.ctx.Done():
		return false
	}
}
