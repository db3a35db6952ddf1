// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// The children of these tests are this test binary run again, as os/exec's
// tests do: TestMain sees helperEnv and runs the helper instead of the
// tests. Every helper closes its stdout once it is ready (signal
// dispositions set, its own children ready), and the parent reads to EOF:
// that is the handshake, no sleeping.
const helperEnv = "HERMESKILL_CGROUP_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(strings.Fields(mode)))
	}
	goleak.VerifyTestMain(m)
}

// helpers maps a mode to its body; args are the mode's arguments.
var helpers = map[string]func(args []string) error{
	// sleep: ready, then idle until killed.
	"sleep": func([]string) error { ready(); idle(); return nil },
	// ignore-term: SIGTERM ignored.
	"ignore-term": func([]string) error {
		signal.Ignore(syscall.SIGTERM)
		ready()
		idle()
		return nil
	},
	// spin: burn CPU (for freezing).
	"spin": func([]string) error {
		ready()
		for {
		}
	},
	// exit: exit at once (a pid that is surely dead after Wait).
	"exit": func([]string) error { return nil },
	// tree N: N processes in all, this one included, as a binary tree.
	"tree": func(args []string) error {
		n, err := strconv.Atoi(args[0])
		if err != nil || n < 1 {
			return fmt.Errorf("tree: bad size %q", args[0])
		}
		rest := n - 1
		var modes []string
		if a := rest - rest/2; a > 0 {
			modes = append(modes, "tree "+strconv.Itoa(a))
		}
		if b := rest / 2; b > 0 {
			modes = append(modes, "tree "+strconv.Itoa(b))
		}
		if err := spawnAndWait(modes...); err != nil {
			return err
		}
		ready()
		idle()
		return nil
	},
	// fork-tree N: N live processes: this one, an "escapee" that calls
	// setsid and double-forks (leaving an orphan behind, reparented away
	// from the tree), and a tree of N-3.
	"fork-tree": func(args []string) error {
		n, err := strconv.Atoi(args[0])
		if err != nil || n < 3 {
			return fmt.Errorf("fork-tree: bad size %q", args[0])
		}
		modes := []string{"escapee"}
		if n > 3 {
			modes = append(modes, "tree "+strconv.Itoa(n-3))
		}
		if err := spawnAndWait(modes...); err != nil {
			return err
		}
		ready()
		idle()
		return nil
	},
	// escapee: a new session, then a double fork: "mid" starts the
	// orphan and exits; the escapee reaps mid and stays.
	"escapee": func([]string) error {
		if _, err := unix.Setsid(); err != nil {
			return os.NewSyscallError("setsid", err)
		}
		cmd, r, err := spawnHelper("mid")
		if err != nil {
			return err
		}
		if err := readToEOF(r); err != nil {
			return err
		}
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("mid: %w", err)
		}
		ready()
		idle()
		return nil
	},
	"mid": func([]string) error {
		if err := spawnAndWait("sleep"); err != nil {
			return err
		}
		ready()
		return nil
	},
}

func runHelper(args []string) int {
	h, ok := helpers[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown helper %q\n", args[0])
		return 2
	}
	if err := h(args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "helper %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// ready tells the parent this helper is set up: EOF on its stdout.
func ready() { _ = os.Stdout.Close() }

// idle blocks until a signal ends the process; pause(2) returns after any
// handled signal (the runtime's own included), hence the loop.
func idle() {
	for {
		_ = unix.Pause()
	}
}

// spawnHelper starts a helper child whose stdout is a fresh pipe, so that
// no other process holds it and EOF means this child is ready.
func spawnHelper(mode string) (*exec.Cmd, *os.File, error) {
	return spawnHelperAttr(mode, nil)
}

func spawnHelperAttr(mode string, attr *syscall.SysProcAttr) (*exec.Cmd, *os.File, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.Stdout = w
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = attr
	err = cmd.Start()
	_ = w.Close()
	if err != nil {
		_ = r.Close()
		return nil, nil, err
	}
	return cmd, r, nil
}

// spawnAndWait starts the helpers together and waits until all are ready.
// They are never waited for: they live until the test kills the tree.
func spawnAndWait(modes ...string) error {
	pipes := make([]*os.File, 0, len(modes))
	for _, m := range modes {
		_, r, err := spawnHelper(m)
		if err != nil {
			return err
		}
		pipes = append(pipes, r)
	}
	for _, r := range pipes {
		if err := readToEOF(r); err != nil {
			return err
		}
	}
	return nil
}

// readyTimeout only guards against a hung helper; readiness itself is EOF.
const readyTimeout = 60 * time.Second

func readToEOF(r *os.File) error {
	defer r.Close()
	_ = r.SetReadDeadline(time.Now().Add(readyTimeout))
	_, err := io.Copy(io.Discard, r)
	return err
}

// testComm is the comm of this test binary and of its helpers.
var testComm = filepath.Base(os.Args[0])

// newTestManager returns a Manager whose base is a fresh temporary cgroup
// under the detected hierarchy, removed (after killing what is left) when
// the test ends. It skips the test when no writable cgroup v2 exists.
func newTestManager(t testing.TB, tweak func(*Options)) *Manager {
	t.Helper()
	p, err := locate(Options{})
	if err != nil {
		t.Skip("no writable cgroup v2 hierarchy: " + err.Error())
	}
	parent := p.h.mount.point
	if p.mode == modeDelegated {
		parent = p.base
	}
	tmp, err := os.MkdirTemp(parent, "hermeskill-test-")
	if err != nil {
		t.Skip("no writable cgroup v2 hierarchy: " + err.Error())
	}
	opts := Options{Base: tmp, OwnerComm: []string{testComm}}
	if tweak != nil {
		tweak(&opts)
	}
	m, err := Detect(opts)
	if err != nil {
		_ = unix.Rmdir(tmp)
		require.NoError(t, err)
	}
	t.Cleanup(func() { destroy(t, m, tmp) })
	return m
}

// destroy kills whatever is left under dir and removes it.
func destroy(t testing.TB, m *Manager, dir string) {
	t.Helper()
	g, err := m.open(dir)
	if err != nil {
		t.Errorf("cleanup %s: %v", dir, err)
		return
	}
	defer g.Close()
	if err := g.Kill(); err != nil {
		t.Errorf("cleanup %s: %v", dir, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.WaitEmpty(ctx); err != nil {
		t.Errorf("cleanup %s: %v", dir, err)
	}
	if err := m.removeTree(dir); err != nil {
		t.Errorf("cleanup %s: %v", dir, err)
	}
}

// child is a helper started by a test.
type child struct {
	cmd      *exec.Cmd
	waitOnce sync.Once
	err      error
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// wait reaps the child once and returns its Wait error.
func (c *child) wait() error {
	c.waitOnce.Do(func() { c.err = c.cmd.Wait() })
	return c.err
}

// start runs a helper, in g when g is not nil (CLONE_INTO_CGROUP, and a
// process group of its own as hermeskilld does), and waits until it is
// ready. The test's cleanup kills and reaps it.
func start(t testing.TB, g *Group, mode string) *child {
	t.Helper()
	attr := &syscall.SysProcAttr{Setpgid: true}
	if g != nil {
		attr.UseCgroupFD = true
		attr.CgroupFD = g.FD()
	}
	cmd, r, err := spawnHelperAttr(mode, attr)
	require.NoError(t, err)
	c := &child{cmd: cmd}
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		_ = c.wait()
	})
	require.NoError(t, readToEOF(r))
	return c
}

// requireKilled checks that the child died of SIGKILL.
func requireKilled(t testing.TB, c *child) {
	t.Helper()
	err := c.wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	ws := ee.Sys().(syscall.WaitStatus)
	require.True(t, ws.Signaled(), "child exited: %v", err)
	require.Equal(t, syscall.SIGKILL, ws.Signal())
}
