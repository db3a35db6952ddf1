// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package keeper

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hermeskill/hermeskilld/internal/cgroup"
	"github.com/hermeskill/hermeskilld/internal/procfs"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/runjournal"
	"github.com/hermeskill/hermeskilld/internal/testchild"
	"github.com/hermeskill/hermeskilld/internal/testnobody"
)

var rt *procsup.Runtime

func TestMain(m *testing.M) {
	Main()
	testchild.Main()
	if os.Getenv(probeEnv) != "" {
		os.Exit(probeDumpable())
	}
	var err error
	if rt, err = procsup.NewRuntime(procsup.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	rt.Close()
	os.Exit(code)
}

const marker = "HERMESKILL_SOCKET"

// dead waits (bounded, as the keeper's promise) until no pid is alive.
func dead(t *testing.T, pids ...int) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, pid := range pids {
			if testchild.Alive(pid) {
				return false
			}
		}
		return true
	}, 2*time.Second, 5*time.Millisecond, "processes outlived hermeskilld's death by more than the keeper's bound")
}

func start(t *testing.T, cg *cgroup.Manager) *Keeper {
	t.Helper()
	k, err := Start(Options{Runtime: rt, Cgroups: cg, Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Close() })
	require.NoError(t, k.Ready(), "no agent starts before Ready")
	return k
}

// pgroupRun starts an agent-like tree without a cgroup: a main process
// with children in its group, and a grandchild that escaped into a
// session of its own (its parent exited: it is our orphan now).
func pgroupRun(t *testing.T, k *Keeper, value string) (run *Run, all []int) {
	t.Helper()
	run = k.Guard(marker, value)
	env := []string{marker + "=" + value}
	main := testchild.Start(t, rt, "fork-tree", procsup.Spec{Env: env}, "3")
	run.Spawned(main.P.PID(), startTicks(t, main.P.PID()))
	esc := testchild.Start(t, rt, "escape", procsup.Spec{Env: env})
	t.Cleanup(func() { _ = syscall.Kill(esc.PIDs[0], syscall.SIGKILL) })
	for _, pid := range main.PIDs {
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	}
	return run, append(append([]int{main.P.PID(), esc.P.PID()}, main.PIDs...), esc.PIDs...)
}

func startTicks(t *testing.T, pid int) uint64 {
	t.Helper()
	st, err := procfs.Default().Stat(pid)
	require.NoError(t, err)
	return st.StartTimeTicks
}

// hermeskilld's death (the pipe closes, nobody disarmed) kills a
// process-group run whole: main, children, and the grandchild in a
// session of its own, found by its environment.
func TestDeathKillsProcessGroupRun(t *testing.T) {
	k := start(t, nil)
	_, pids := pgroupRun(t, k, "/run/hermeskill/test.1/notify.sock")
	other := testchild.Start(t, rt, "hang", procsup.Spec{Env: []string{marker + "=/another/agent.sock"}})
	k.abandon()
	dead(t, pids...)
	require.True(t, testchild.Alive(other.P.PID()), "a process of no guarded run is left alone")
}

// The keeper journals its kill: when, how many, which runs, for the next
// hermeskilld start to certify each death (package runjournal).
func TestDeathJournalled(t *testing.T) {
	dir := t.TempDir()
	k, err := Start(Options{Runtime: rt, JournalDir: dir, Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	require.NoError(t, k.Ready())
	value := "/run/hermeskill/test.journal/notify.sock"
	_, pids := pgroupRun(t, k, value)
	before := time.Now()
	k.abandon()
	dead(t, pids...)
	var files []string
	require.Eventually(t, func() bool {
		files, _ = filepath.Glob(filepath.Join(dir, "killed.*.json"))
		return len(files) == 1
	}, 5*time.Second, 5*time.Millisecond, "no record of the kill in the journal")
	var rec runjournal.Killed
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &rec))
	assert.Equal(t, os.Getpid(), rec.Owner)
	assert.Equal(t, []string{marker + "=" + value}, rec.Runs)
	// Those already dying of the process group's one SIGKILL when the
	// tree is walked are not counted again: at least one is.
	assert.Positive(t, rec.Processes)
	assert.LessOrEqual(t, rec.Processes, len(pids))
	assert.False(t, rec.At.Before(before.Add(-time.Second)))
}

// What the keeper must know before a fork reaches it by the time Ready
// (the cgroups, a run's marker) or Spawned (the run's group) returns,
// not whenever the loop gets to write it: a SIGKILL of hermeskilld right
// after the fork writes nothing more. Here the loop writes nothing at
// all, so only those writes can reach the keeper.
func TestToldBeforeTheFork(t *testing.T) {
	loopHook = func() bool { return false }
	defer func() { loopHook = nil }() // after abandon: the loops have ended
	t.Run("process group", func(t *testing.T) {
		k, err := Start(Options{Runtime: rt, Log: zaptest.NewLogger(t)})
		require.NoError(t, err)
		value := "/run/hermeskill/test.told/notify.sock"
		run := k.Guard(marker, value)
		require.NoError(t, k.Ready())
		c := testchild.Start(t, rt, "fork-tree", procsup.Spec{Env: []string{marker + "=" + value}}, "3")
		run.Spawned(c.P.PID(), startTicks(t, c.P.PID()))
		for _, pid := range c.PIDs {
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		}
		k.abandon()
		dead(t, append([]int{c.P.PID()}, c.PIDs...)...)
	})
	t.Run("cgroup", func(t *testing.T) {
		m, err := cgroup.Detect(cgroup.Options{})
		if errors.Is(err, cgroup.ErrUnavailable) {
			t.Skipf("needs a writable cgroup v2 hierarchy: %v", err)
		}
		require.NoError(t, err)
		k, err := Start(Options{Runtime: rt, Cgroups: m, Log: zaptest.NewLogger(t)})
		require.NoError(t, err)
		g, err := m.Create("keeper-told")
		require.NoError(t, err)
		t.Cleanup(func() { _ = g.Remove() })
		require.NoError(t, k.Ready())
		c := testchild.Start(t, rt, "fork-tree", procsup.Spec{CgroupFD: g.FD()}, "3")
		k.abandon()
		dead(t, append([]int{c.P.PID()}, c.PIDs...)...)
	})
}

// A clean exit disarms the keeper: nothing is killed, the keeper exits.
func TestCloseDisarms(t *testing.T) {
	k := start(t, nil)
	run, pids := pgroupRun(t, k, "/run/hermeskill/test.2/notify.sock")
	run.End() // declared gone (the processes, left alive, are the witnesses)
	keeper := k.PID()
	require.NoError(t, k.Close())
	require.Eventually(t, func() bool { return !testchild.Alive(keeper) }, 10*time.Second, 5*time.Millisecond,
		"the keeper exits once disarmed")
	for _, pid := range pids {
		require.True(t, testchild.Alive(pid), "pid %d was killed by a disarmed keeper", pid)
	}
}

// Close never disarms the keeper while a run has not ended or a tree is
// unproven (its survivors not known): the keeper kills what is left, as
// at our death, and Close says so.
func TestCloseWithUnendedRunKills(t *testing.T) {
	t.Run("run not ended", func(t *testing.T) {
		k := start(t, nil)
		_, pids := pgroupRun(t, k, "/run/hermeskill/test.7/notify.sock")
		err := k.Close()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "not disarmed")
		dead(t, pids...)
	})
	t.Run("cgroup unproven", func(t *testing.T) {
		m, err := cgroup.Detect(cgroup.Options{})
		if errors.Is(err, cgroup.ErrUnavailable) {
			t.Skipf("needs a writable cgroup v2 hierarchy: %v", err)
		}
		require.NoError(t, err)
		k := start(t, m)
		g, err := m.Create("keeper-unproven")
		require.NoError(t, err)
		t.Cleanup(func() { _ = g.Remove() })
		c := testchild.Start(t, rt, "fork-tree", procsup.Spec{CgroupFD: g.FD()}, "3")
		k.Unproven()
		err = k.Close()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "not disarmed")
		dead(t, append([]int{c.P.PID()}, c.PIDs...)...)
	})
}

// A run that ended is forgotten: its processes are not the keeper's.
func TestEndForgets(t *testing.T) {
	k := start(t, nil)
	run := k.Guard(marker, "/run/hermeskill/test.3/notify.sock")
	c := testchild.Start(t, rt, "hang", procsup.Spec{Env: []string{marker + "=/run/hermeskill/test.3/notify.sock"}})
	run.Spawned(c.P.PID(), startTicks(t, c.P.PID()))
	run.End()
	keeper := k.PID()
	k.abandon()
	// The keeper exits once it has done its (empty) work.
	require.Eventually(t, func() bool { return !testchild.Alive(keeper) }, 5*time.Second, 5*time.Millisecond)
	require.True(t, testchild.Alive(c.P.PID()))
}

// With cgroups, the keeper empties and removes every group hermeskilld
// created.
func TestDeathReapsCgroups(t *testing.T) {
	m, err := cgroup.Detect(cgroup.Options{})
	if errors.Is(err, cgroup.ErrUnavailable) {
		t.Skipf("needs a writable cgroup v2 hierarchy: %v", err)
	}
	require.NoError(t, err)
	k := start(t, m)
	g, err := m.Create("keeper-test")
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Remove() })
	c := testchild.Start(t, rt, "fork-tree", procsup.Spec{CgroupFD: g.FD()}, "3")
	k.abandon()
	dead(t, append([]int{c.P.PID()}, c.PIDs...)...)
	require.Eventually(t, func() bool {
		_, err := os.Stat(g.Path())
		return errors.Is(err, os.ErrNotExist)
	}, 5*time.Second, 5*time.Millisecond, "the cgroup was removed")
}

// A keeper that dies while hermeskilld runs is replaced, and the new one
// knows every run.
func TestKeeperRestarted(t *testing.T) {
	k := start(t, nil)
	_, pids := pgroupRun(t, k, "/run/hermeskill/test.4/notify.sock")
	first := k.PID()
	require.NoError(t, syscall.Kill(first, syscall.SIGKILL))
	require.Eventually(t, func() bool { p := k.PID(); return p != 0 && p != first }, 10*time.Second, 5*time.Millisecond)
	k.abandon()
	dead(t, pids...)
}

// Signals meant for hermeskilld's terminal or process group do not end a
// keeper.
func TestKeeperIgnoresStopSignals(t *testing.T) {
	k := start(t, nil)
	pid := k.PID()
	// Start does not wait for the keeper's runtime to be up (that would
	// delay every agent's start); wait until it ignores SIGINT.
	require.Eventually(t, func() bool {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return false
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
				mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
				return err == nil && mask&(1<<(syscall.SIGINT-1)) != 0
			}
		}
		return false
	}, 10*time.Second, time.Millisecond)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		require.NoError(t, syscall.Kill(pid, sig))
	}
	_, pids := pgroupRun(t, k, "/run/hermeskill/test.5/notify.sock")
	require.Equal(t, pid, k.PID(), "the keeper lived through the signals")
	k.abandon()
	dead(t, pids...)
}

// The keeper is never part of an agent's tree in supervise's exclusive
// mode, where every other child of ours is the agent's.
func TestKeeperNotInExclusiveTree(t *testing.T) {
	k := start(t, nil)
	c := testchild.Start(t, rt, "hang", procsup.Spec{})
	tree := procsup.NewTree(rt, c.P, procsup.TreeOptions{AgentID: "x", Exclusive: true})
	pids, err := tree.PIDs()
	require.NoError(t, err)
	require.NotContains(t, pids, k.PID())
	require.NoError(t, c.P.Signal(syscall.SIGKILL))
	require.Eventually(t, tree.Empty, 10*time.Second, 5*time.Millisecond, "the keeper does not keep the tree from being empty")
}

func TestApplyRejectsBadMessages(t *testing.T) {
	st := &state{runs: make(map[uint64]*watch)}
	for _, bad := range []string{"", "nonsense", "run x \"A=b\"", "run 1 A=b", "run 1 \"novalue\"", "group 9 1 2",
		"pid 1 2", "cgroup base 1 2 3", "end"} {
		require.ErrorIs(t, st.apply(bad), errBadMessage, bad)
	}
	require.NoError(t, st.apply(`run 1 "HERMESKILL_SOCKET=/a b/c"`))
	require.Equal(t, "/a b/c", st.runs[1].value)
	require.NoError(t, st.apply("group 1 42 7"))
	require.NoError(t, st.apply("pid 1 43 8"))
	require.Equal(t, uint64(8), st.runs[1].pids[43])
	require.NoError(t, st.apply("end 1"))
	require.Empty(t, st.runs)
}

// Only lines with the key the first line gave are obeyed: a disarm or an
// "end" written by anyone else (who got hold of the pipe) is reported and
// ignored, and the end of the pipe still kills the run.
func TestMessagesWithoutTheKeyAreIgnored(t *testing.T) {
	const key = "0123456789abcdef0123456789abcdef"
	value := "/run/hermeskill/test.forged/notify.sock"
	victim := testchild.Start(t, rt, "hang", procsup.Spec{Env: []string{marker + "=" + value}})
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	var report strings.Builder
	done := make(chan int, 1)
	go func() { done <- serve(r, &report, os.Getpid(), true) }()
	fmt.Fprintf(w, "key %s\n%s run 1 %q\n%s group 1 %d %d\n", key, key, marker+"="+value, key,
		victim.P.PID(), startTicks(t, victim.P.PID()))
	fmt.Fprintf(w, "disarm\nend 1\nffffffffffffffffffffffffffffffff disarm\nkey %s disarm\n", strings.Repeat("f", 32))
	w.Close()
	select {
	case code := <-done:
		require.Equal(t, 0, code, report.String())
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not end at the end of the pipe")
	}
	dead(t, victim.P.PID())
	require.Contains(t, report.String(), "without hermeskilld's key")
}

// Main is a keeper only with the arguments Start gives it: the variable
// alone is not enough.
func TestKeeperArgs(t *testing.T) {
	pid, ok := keeperArgs([]string{"hermeskilld", "keeper", "--for", "4242"})
	require.True(t, ok)
	require.Equal(t, 4242, pid)
	for _, args := range [][]string{
		{"hermeskilld", "supervise", "--", "true"},
		{"hermeskilld", "keeper", "--for", "x"},
		{"hermeskilld", "keeper", "--for", "-1"},
		{"hermeskilld", "keeper", "--for", "042"},
		{"hermeskilld", "keeper", "--for"},
		{"hermeskilld"},
	} {
		_, ok := keeperArgs(args)
		require.False(t, ok, "%q", args)
	}
}

// A keeper stopped by SIGSTOP (which it cannot ignore) is replaced: the
// new one knows every run and kills it at our death.
func TestStoppedKeeperReplaced(t *testing.T) {
	k := start(t, nil)
	_, pids := pgroupRun(t, k, "/run/hermeskill/test.6/notify.sock")
	first := k.PID()
	require.NoError(t, syscall.Kill(first, syscall.SIGSTOP))
	require.Eventually(t, func() bool { p := k.PID(); return p != 0 && p != first }, 10*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return !testchild.Alive(first) }, 10*time.Second, 5*time.Millisecond, "the stopped keeper was killed")
	k.abandon()
	dead(t, pids...)
}

// probeEnv makes the test binary probeDumpable instead of running tests.
const probeEnv = "HERMESKILL_TEST_PROBE_DUMPABLE"

// probeDumpable starts keepers one after another and, the moment Ready
// returns, looks at the owner of each one's /proc/PID/fd: a process of
// ours that is still dumpable owns it (we run as uid 65534), one that
// made itself undumpable leaves it to root (proc(5)). It prints one line
// per keeper, "uid N", and exits 0, or prints why it could not.
func probeDumpable() int {
	rt, err := procsup.NewRuntime(procsup.Options{})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer rt.Close()
	exe, err := os.Executable()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	for range 20 {
		k, err := Start(Options{Runtime: rt, Exe: exe})
		if err == nil {
			err = k.Ready()
		}
		if err != nil {
			fmt.Println(err)
			return 1
		}
		var st syscall.Stat_t
		err = syscall.Stat(fmt.Sprintf("/proc/%d/fd", k.PID()), &st)
		_ = k.Close()
		if err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Printf("uid %d\n", st.Uid)
	}
	return 0
}

// From the moment Ready returns, a keeper is undumpable: an agent started
// then, of the same user, can open none of its descriptors through /proc.
// Run as uid 65534, where a dumpable keeper would own its /proc/PID/fd.
func TestKeeperUndumpableWhenReady(t *testing.T) {
	// Started through the package's runtime, whose reaper would take an
	// os/exec child's exit status.
	outFile, err := os.CreateTemp(t.TempDir(), "probe")
	require.NoError(t, err)
	defer outFile.Close()
	p, err := rt.Start(procsup.Spec{Argv: []string{testnobody.Executable(t), "-test.run=^$"}, Dir: testnobody.Dir(t),
		Env: append(os.Environ(), probeEnv+"=1"), Stdout: outFile, Stderr: outFile, Credential: testnobody.Credential()})
	require.NoError(t, err)
	st := p.Status()
	outb, err := os.ReadFile(outFile.Name())
	require.NoError(t, err)
	out := string(outb)
	require.Equal(t, 0, st.ShellCode(), "%s: %s", st, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 20, "%s", out)
	for i, line := range lines {
		require.Equal(t, "uid 0", line, "keeper %d was still dumpable when Ready returned", i)
	}
}

// What the keeper must kill is in its pipe once Forked returns, before
// the keeper runs: a death of hermeskilld right after the agent's fork,
// before Ready, still kills the whole run.
func TestForkedIsEnoughToKill(t *testing.T) {
	k, err := Start(Options{Runtime: rt, Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	// Its own value each run: a keeper of an earlier run (-count) may
	// still be killing what carries its.
	value := fmt.Sprintf("/run/hermeskill/test.forked.%d/notify.sock", time.Now().UnixNano())
	run := k.Guard(marker, value)
	require.NoError(t, k.Forked())
	c := testchild.Start(t, rt, "fork-tree", procsup.Spec{Env: []string{marker + "=" + value}}, "3")
	run.Spawned(c.P.PID(), startTicks(t, c.P.PID()))
	for _, pid := range c.PIDs {
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	}
	k.abandon()
	dead(t, append([]int{c.P.PID()}, c.PIDs...)...)
}

// A clean exit right after the keeper's fork disarms it without waiting
// for it to run: it reads the disarm once it does, and exits 0.
func TestCloseBeforeTheKeeperRuns(t *testing.T) {
	k, err := Start(Options{Runtime: rt, Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	require.NoError(t, k.Forked())
	k.mu.Lock()
	proc := k.proc
	k.mu.Unlock()
	require.NoError(t, k.Close())
	select {
	case <-proc.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the keeper did not exit after its disarm")
	}
	require.Equal(t, "exited with code 0", proc.Status().String())
	<-k.up
	require.NoError(t, k.upErr, "it said it was ready before it read the disarm")
}
