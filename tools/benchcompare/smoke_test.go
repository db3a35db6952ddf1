// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// buildHK builds hermeskilld for the smoke tests.
func buildHK(t *testing.T) string {
	t.Helper()
	hk := filepath.Join(t.TempDir(), "hermeskilld")
	cmd := exec.Command("go", "build", "-o", hk, "../../cmd/hermeskilld")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building hermeskilld: %v\n%s", err, out)
	}
	return hk
}

// leftovers lists processes still running a program from dir.
func leftovers(dir string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(raw, []byte(dir)) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(raw), "\x00", " "))
		}
	}
	return out
}

// noLeftovers checks that the run removed its directory and stopped
// every process it started (given a few seconds: the keeper's).
func noLeftovers(t *testing.T, tmp string) {
	t.Helper()
	if ents, _ := filepath.Glob(filepath.Join(tmp, "hkbench-*")); len(ents) > 0 {
		t.Errorf("temporary directories left: %v", ents)
	}
	look := time.NewTicker(100 * time.Millisecond)
	defer look.Stop()
	deadline := time.After(5 * time.Second)
	for {
		left := leftovers(tmp)
		if len(left) == 0 {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("processes left:\n%s", strings.Join(left, "\n"))
		case <-look.C:
		}
	}
}

// TestSmoke runs every row group with tiny counts on a freshly built
// binary: the harness works end to end, prints one table, and leaves no
// process or directory behind. Figures are not checked.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("-short is set: this test starts daemons and real agent processes for ~40 s")
	}
	hk := buildHK(t)
	floor := filepath.Join(t.TempDir(), "launchfloor")
	cmd := exec.Command("go", "build", "-o", floor, "./agents/launchfloor")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the launch floor: %v\n%s", err, out)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var out, log bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := run(ctx, cancel, []string{"-hk", hk, "-floor", floor, "-quick", "-install=false",
		"-rounds", "5", "-ladder-rounds", "1", "-ladder-par", "1", "-agents", "5",
		"-kill-runs", "1", "-n", "20", "-window", "2s", "-ingest-window", "1s",
		"-gw-n", "20", "-gw-conc", "2", "-gw-rounds", "1", "-gw-window", "200ms", "-gw-streams", "10", "-gw-hold", "500ms",
		"-gw-slo-from", "50", "-gw-slo-max", "100", "-gw-slo-window", "200ms", "-gw-many", "20", "-gw-many-every", "200ms", "-gw-many-hold", "1s"}, &out, &log, false)
	t.Logf("log:\n%s", log.String())
	t.Logf("output:\n%s", out.String())
	if code != 0 {
		t.Fatalf("exit status %d", code)
	}
	s := out.String()
	if !strings.Contains(s, "**Machine:**") || strings.Count(s, "| group | measurement |") != 1 {
		t.Error("no machine line, or not exactly one table")
	}
	for _, g := range []string{"1 launch", "2 ladder", "3 detection", "4 kill-to-empty", "5 ingest", "6 daemon", "7 gateway"} {
		if !strings.Contains(s, "| "+g+" |") {
			t.Errorf("no row of group %q", g)
		}
	}
	if !strings.Contains(s, "| "+nameFloor+" fork → reaped |") {
		t.Error("no launch floor row")
	}
	if strings.Contains(s, "FAILED") {
		t.Error("a row failed")
	}
	noLeftovers(t, tmp)
}

// TestSmokeInterrupt cancels a run in the middle of the daemon rows (what
// Ctrl-C does): it ends promptly with 130, leaving nothing behind.
func TestSmokeInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("-short is set: this test starts a daemon and real agent processes")
	}
	hk := buildHK(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var out, log bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(4*time.Second, cancel)
	t0 := time.Now()
	code := run(ctx, cancel, []string{"-hk", hk, "-quick", "-rows", "6", "-n", "50", "-window", "60s"}, &out, &log, false)
	if code != 130 {
		t.Fatalf("exit status %d, want 130; log:\n%s", code, log.String())
	}
	if d := time.Since(t0); d > 30*time.Second {
		t.Errorf("took %s after the interrupt", d)
	}
	noLeftovers(t, tmp)
}
