// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/landlock"
	"github.com/hermeskill/hermeskilld/internal/procfs"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/testchild"
)

func needLandlock(t *testing.T, abi int) {
	t.Helper()
	if got := rt.LandlockABI(); got < abi {
		t.Skipf("the kernel's Landlock ABI is %d (0: none); this test needs %d", got, abi)
	}
}

// startReach starts the "reach" helper through rt with spec, against
// targets, and returns it with its report.
func startReach(t *testing.T, spec procsup.Spec, targets ...string) (*procsup.Process, string) {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	base := testchild.Spec("reach", targets...)
	spec.Argv, spec.Env, spec.Stdout = base.Argv, append(base.Env, spec.Env...), w
	p, err := rt.Start(spec)
	w.Close()
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Signal(syscall.SIGKILL); <-p.Done() })
	br := bufio.NewReader(r)
	report, err := br.ReadString('\n')
	require.NoError(t, err)
	ready, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", ready)
	return p, strings.TrimSpace(report)
}

// A confined agent cannot signal, stop, kill or trace a process outside
// its domain — supervise's stand-in here, and the test process, its
// parent — though it runs as the same user (here root, with CAP_KILL and
// CAP_SYS_PTRACE: Landlock is above capabilities); its own child it
// signals as ever, and signals from outside still reach it.
func TestLandlockScopesSignals(t *testing.T) {
	needLandlock(t, landlock.SignalsABI)
	outside := testchild.StartOutside(t, "hang")
	p, report := startReach(t, procsup.Spec{Landlock: landlock.Ruleset{ScopeSignals: true}},
		fmt.Sprint(outside), fmt.Sprint("-", os.Getpid()))
	require.Equal(t, fmt.Sprintf("%d: kill0=EPERM ptrace=EPERM mem=EACCES stop=EPERM kill=EPERM; "+
		"%d: kill0=EPERM ptrace=EPERM mem=EACCES; own child: kill=ok", outside, os.Getpid()), report)
	st, err := procfs.Default().Stat(outside)
	require.NoError(t, err)
	require.Equal(t, byte('S'), st.State, "the outside process is neither stopped nor killed")

	// The agent is the process Start returned, in its own group, as
	// without the exec stage.
	ast, err := procfs.Default().Stat(p.PID())
	require.NoError(t, err)
	require.Equal(t, p.PID(), ast.PGID)
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID()))
	require.NoError(t, err)
	require.Equal(t, os.Args[0], strings.Split(string(cmdline), "\x00")[0], "the agent's own argv, not the stage's")

	require.NoError(t, p.Signal(syscall.SIGKILL))
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the confined agent outlived a SIGKILL from outside its domain")
	}
	require.Equal(t, "killed by SIGKILL", p.Status().String())
}

// Without confinement the same attempts succeed: the test above is not
// passing for some other reason (the target would be unreachable anyway).
func TestUnconfinedReachesOutside(t *testing.T) {
	outside := testchild.StartOutside(t, "hang")
	_, report := startReach(t, procsup.Spec{}, fmt.Sprint(outside))
	require.Equal(t, fmt.Sprintf("%d: kill0=ok ptrace=ok mem=ok stop=ok kill=ok; own child: kill=ok", outside), report)
}

// The exec stage keeps the shell's statuses for a command that cannot be
// executed, and a confinement that cannot be applied runs nothing.
func TestExecStageFailures(t *testing.T) {
	needLandlock(t, landlock.FilesABI)
	dir := t.TempDir()
	notExec := filepath.Join(dir, "script")
	require.NoError(t, os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644))
	confine := landlock.Ruleset{Writable: []string{dir}}

	_, err := rt.Start(procsup.Spec{Argv: []string{notExec}, Landlock: confine})
	var se *procsup.StartError
	require.ErrorAs(t, err, &se)
	require.Equal(t, 126, se.Code)
	require.ErrorIs(t, err, syscall.EACCES)

	_, err = rt.Start(procsup.Spec{Argv: []string{filepath.Join(dir, "missing")}, Landlock: confine})
	require.ErrorAs(t, err, &se)
	require.Equal(t, 127, se.Code)

	ran := filepath.Join(dir, "ran")
	_, err = rt.Start(procsup.Spec{Argv: []string{"/bin/sh", "-c", "touch " + ran},
		Landlock: landlock.Ruleset{Writable: []string{filepath.Join(dir, "no-such-dir")}}})
	var ce *procsup.ConfineError
	require.ErrorAs(t, err, &ce)
	require.ErrorIs(t, err, syscall.ENOENT)
	require.Contains(t, err.Error(), "no-such-dir")
	require.NoFileExists(t, ran, "the command ran unconfined")
	require.False(t, hasStageChild(t), "the failed stage was reaped before Start returned")
}

// hasStageChild reports whether a child of ours is an exec stage (comm
// "exe", from /proc/self/exe), running or a zombie.
func hasStageChild(t *testing.T) bool {
	snap, err := procfs.Default().Scan()
	require.NoError(t, err)
	for _, st := range snap {
		if st.PPID == os.Getpid() && st.Comm == "exe" {
			return true
		}
	}
	return false
}
