// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/keeper"
	"github.com/hermeskill/hermeskilld/internal/landlock"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
	"github.com/hermeskill/hermeskilld/internal/testchild"
)

var rt *procsup.Runtime

func TestMain(m *testing.M) {
	if mode := os.Getenv(agentEnv); mode != "" {
		os.Exit(agentMain(mode)) // this binary re-executed as an agent
	}
	testchild.Main()
	var err error
	if rt, err = procsup.NewRuntime(procsup.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	rt.Close()
	os.Exit(code)
}

// startReal runs a real agent: a real process, socket and certificate.
func startReal(t *testing.T, a *config.Agent) (*Run, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "hksup") // short: sun_path is 108 bytes
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	r, err := Start(Options{Agent: a, Runtime: rt, Exclusive: true, SocketDir: filepath.Join(dir, "sock"),
		CertsDir: filepath.Join(dir, "certs"), Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	return r, filepath.Join(dir, "certs")
}

// An agent that never says READY is killed at its startup deadline,
// through the ladder, with a certificate on disk.
func TestRunKillsSilentAgent(t *testing.T) {
	a := agentWith(config.Checks{StartupTimeout: 300 * time.Millisecond})
	a.Command = testchild.Spec("hang").Argv
	a.Env = map[string]string{testchild.Env: "hang"}
	a.Escalation.CoopGrace, a.Escalation.TermGrace = 100*time.Millisecond, 100*time.Millisecond
	r, dir := startReal(t, a)
	out := r.Wait()
	require.True(t, out.Killed)
	require.Equal(t, symptoms.StartupTimeout, out.Trigger.Check)
	require.NoError(t, out.CertErr)
	c, _, err := certs.Read(out.CertPath)
	require.NoError(t, err)
	require.Equal(t, "startup_timeout", c.TriggerCheck)
	require.Equal(t, filepath.Dir(out.CertPath), dir)
	require.Equal(t, StateExited, r.Status().State)
}

// A main process that exits leaving a child that ignores SIGTERM: while
// the run spends its term_grace on the survivor, Status answers at once.
func TestRunStatusDuringSurvivorCleanup(t *testing.T) {
	a := agentWith(config.Checks{})
	// The main process exits only once the survivor ignores SIGTERM (its
	// marker), so the cleanup's SIGTERM cannot come first.
	mark := filepath.Join(t.TempDir(), "ignoring")
	a.Command = []string{"/bin/sh", "-c", `(trap "" TERM; : >"$1"; exec sleep 30) & while [ ! -e "$1" ]; do sleep 0.01; done; exit 0`, "sh", mark}
	a.Escalation.TermGrace = 3 * time.Second
	r, _ := startReal(t, a)
	require.Eventually(t, func() bool { return r.Status().State == StateStopping }, 10*time.Second, time.Millisecond,
		"the survivor's cleanup began")
	for range 20 {
		began := time.Now()
		st := r.Status()
		require.Less(t, time.Since(began), 50*time.Millisecond, "Status waited for the cleanup")
		require.Equal(t, StateStopping, st.State)
	}
	out := r.Wait()
	require.False(t, out.Killed, "no check fired: the agent exited by itself")
	require.Equal(t, "sigkill", string(out.Reached), "the survivor ignored SIGTERM")
	require.Equal(t, 0, out.Exit.Code)
}

// A confined agent is started once its keeper is forked, not once it
// runs: should the keeper then fail to start (here a program that exits
// half a second in, never ready), the agent is stopped, fail closed, and
// the certificate says why.
func TestRunStoppedWhenItsKeeperFailsToStart(t *testing.T) {
	if abi := rt.LandlockABI(); abi < landlock.SignalsABI {
		t.Skipf("the kernel's Landlock ABI is %d: an agent is confined (and started before its keeper runs) from ABI %d", abi, landlock.SignalsABI)
	}
	// A keeper that exits, never ready, once the agent has started.
	exe := filepath.Join(t.TempDir(), "keeper")
	require.NoError(t, os.WriteFile(exe, []byte("#!/bin/sh\nsleep 0.5\n"), 0o755))
	k, err := keeper.Start(keeper.Options{Runtime: rt, Exe: exe, Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Close() })
	a := agentWith(config.Checks{})
	a.Command = testchild.Spec("hang").Argv
	a.Env = map[string]string{testchild.Env: "hang"}
	a.Escalation.CoopGrace, a.Escalation.TermGrace = 100*time.Millisecond, 100*time.Millisecond
	dir, err := os.MkdirTemp("", "hksup")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	r, err := Start(Options{Agent: a, Runtime: rt, Exclusive: true, Keeper: k, SocketDir: filepath.Join(dir, "sock"),
		CertsDir: filepath.Join(dir, "certs"), Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	out := r.Wait()
	require.True(t, out.Killed)
	require.Equal(t, symptoms.InternalError, out.Trigger.Check)
	require.Equal(t, "keeper", out.Trigger.Observed)
	require.Contains(t, out.Trigger.Message, "keeper did not start")
	require.NoError(t, out.CertErr)
}
