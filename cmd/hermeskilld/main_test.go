// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/keeper"
)

// The test binary doubles as hermeskilld: with HK_AS_HERMESKILLD=1 it runs
// main's run() on its arguments. End-to-end tests start it as a real
// process against real agents, so the binary under test is the one built
// with the race detector.
const asMain = "HK_AS_HERMESKILLD"

func TestMain(m *testing.M) {
	keeper.Main()
	if os.Getenv(asGoAgent) == "1" {
		os.Exit(goAgent(os.Args[1]))
	}
	if os.Getenv(asMain) == "1" {
		injectPanics(os.Getenv(panicEnv))
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// result is one finished hermeskilld run.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// hk runs hermeskilld with args and waits (bounded) for it to exit.
func hk(t *testing.T, args ...string) result {
	t.Helper()
	cmd := hkCmd(t, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	began := time.Now()
	err := cmd.Run()
	r := result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String(), took: time.Since(began)}
	if err != nil {
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "hermeskilld did not run: %v", err)
	}
	t.Logf("hermeskilld %s -> %d in %s\nstderr:\n%s", strings.Join(args, " "), r.code, r.took, r.stderr)
	return r
}

// hkCmd prepares a hermeskilld process, killed if a test overruns.
func hkCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	return hkCmdFor(t, 90*time.Second, args...)
}

// hkCmdFor is hkCmd for a process that may run as long as lifetime.
func hkCmdFor(t *testing.T, lifetime time.Duration, args ...string) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), lifetime)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), asMain+"=1")
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// python is the interpreter for the end-to-end agents.
func python(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("python3")
	require.NoError(t, err, "python3 is needed for the end-to-end tests (.ci/run installs it)")
	return p
}

// agent writes a Python agent into a temp dir and returns its path.
func agent(t *testing.T, dir, src string) string {
	t.Helper()
	p := filepath.Join(dir, "agent.py")
	require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
	return p
}

// cert is the one certificate in dir.
func cert(t *testing.T, dir string) map[string]any {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1, "want exactly one certificate in %s", dir)
	data, err := os.ReadFile(files[0])
	require.NoError(t, err)
	var c map[string]any
	require.NoError(t, json.Unmarshal(data, &c))
	return c
}

func noCert(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	require.Empty(t, files, "no certificate expected")
}

// steps lists the shutdown_log step names.
func steps(c map[string]any) []string {
	var names []string
	for _, s := range c["shutdown_log"].([]any) {
		names = append(names, s.(map[string]any)["step"].(string))
	}
	return names
}

// survivors lists live processes whose command line contains marker.
func survivors(marker string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(marker)) {
			continue
		}
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			pids = append(pids, -pid) // a zombie: reported negative
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// requireNoSurvivors fails (and cleans up) when anything with marker is left.
func requireNoSurvivors(t *testing.T, marker string) {
	t.Helper()
	left := survivors(marker)
	for _, pid := range left {
		if pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	require.Empty(t, left, "processes of the agent survived (negative pids are zombies)")
}

func marker(t *testing.T) string {
	return "hkmark-" + strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()) + "-" + strconv.Itoa(os.Getpid())
}

func regexpQuote(s string) string { return regexp.QuoteMeta(s) }

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// mustGlob is the base name of the one certificate in dir.
func mustGlob(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	return filepath.Base(files[0])
}

func unixSignalName(s syscall.Signal) string { return unix.SignalName(s) }
