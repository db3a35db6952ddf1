// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/cgroup"
	"github.com/hermeskill/hermeskilld/internal/procfs"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/testchild"
)

// containments runs a test with process-group containment (exclusive and
// shared, as supervise and the daemon use it) and with a cgroup.
func containments(t *testing.T, fn func(t *testing.T, opts procsup.TreeOptions, spec procsup.Spec)) {
	env := []string{procsup.EnvAgentID + "=tree-test"}
	t.Run("pgroup-exclusive", func(t *testing.T) {
		fn(t, procsup.TreeOptions{AgentID: "tree-test", Exclusive: true}, procsup.Spec{Env: env})
	})
	t.Run("pgroup-shared", func(t *testing.T) {
		fn(t, procsup.TreeOptions{AgentID: "tree-test"}, procsup.Spec{Env: env})
	})
	t.Run("cgroup", func(t *testing.T) {
		m, err := cgroup.Detect(cgroup.Options{})
		if errors.Is(err, cgroup.ErrUnavailable) {
			t.Skipf("no writable cgroup v2 hierarchy: %v", err)
		}
		require.NoError(t, err)
		g, err := m.Create("tree-test")
		require.NoError(t, err)
		t.Cleanup(func() { _ = g.Remove() })
		fn(t, procsup.TreeOptions{AgentID: "tree-test", Cgroup: g, Exclusive: true}, procsup.Spec{Env: env, CgroupFD: g.FD()})
	})
}

// A grandchild that double-forked into its own session and ignores
// SIGTERM is still in the tree, and dies with it.
func TestTreeFindsAndKillsEscapee(t *testing.T) {
	containments(t, func(t *testing.T, opts procsup.TreeOptions, spec procsup.Spec) {
		c := testchild.Start(t, rt, "escape", spec)
		escapee := c.PIDs[0]
		tree := procsup.NewTree(rt, c.P, opts)
		t.Cleanup(func() { _ = syscall.Kill(escapee, syscall.SIGKILL) })

		st, err := procfs.Default().Stat(escapee)
		require.NoError(t, err)
		require.NotEqual(t, c.P.PID(), st.PGID, "the escapee left the process group")

		pids, err := tree.PIDs()
		require.NoError(t, err)
		require.Contains(t, pids, c.P.PID())
		require.Contains(t, pids, escapee)
		in, err := tree.Contains(escapee)
		require.NoError(t, err)
		require.True(t, in)
		in, err = tree.Contains(os.Getpid())
		require.NoError(t, err)
		require.False(t, in, "the supervisor is not in the agent's tree")
		_, err = tree.Contains(1 << 22)
		require.ErrorIs(t, err, procfs.ErrNoProcess)

		// SIGTERM is ignored by both; SIGKILL to the tree gets them all.
		n, err := tree.SignalTree(syscall.SIGTERM)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.False(t, tree.Empty())
		n, method, err := tree.KillTree()
		require.NoError(t, err)
		require.GreaterOrEqual(t, n, 2)
		require.NotEmpty(t, method)
		done, stop := tree.WaitEmpty()
		defer stop()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("tree not empty 10s after SIGKILL")
		}
		require.True(t, tree.Empty())
		// Shared mode's Empty counts live processes: the orphan reaper
		// may reap the escapee's zombie a moment later.
		require.Eventually(t, func() bool { return !testchild.Exists(escapee) }, 10*time.Second, time.Millisecond,
			"the escapee is dead and reaped")
		require.Len(t, tree.Killed(), 2)
	})
}

// A fork tree is killed whole; the autopsy lists every process first.
func TestTreeSnapshotAndKill(t *testing.T) {
	containments(t, func(t *testing.T, opts procsup.TreeOptions, spec procsup.Spec) {
		c := testchild.Start(t, rt, "fork-tree", spec, "5")
		require.Len(t, c.PIDs, 5)
		tree := procsup.NewTree(rt, c.P, opts)
		procs, thaw := tree.Snapshot(128, true)
		thaw()
		got := map[int]procfs.Proc{}
		for _, p := range procs {
			got[p.PID] = p
		}
		require.Contains(t, got, c.P.PID())
		for _, pid := range c.PIDs {
			require.Contains(t, got, pid)
			require.Equal(t, c.P.PID(), got[pid].PPID)
			require.NotEmpty(t, got[pid].Cmdline)
		}
		u, err := tree.Usage(true)
		require.NoError(t, err)
		require.Equal(t, 6, u.Procs)
		require.Greater(t, u.RSSBytes, int64(0))
		require.Greater(t, u.FDs, 0)

		_, _, err = tree.KillTree()
		require.NoError(t, err)
		require.Eventually(t, tree.Empty, 10*time.Second, 5*time.Millisecond)
		for _, pid := range c.PIDs {
			require.False(t, testchild.Alive(pid))
		}
		require.True(t, c.P.Status().Signaled)
	})
}

// When the main process exits, what it left behind is still the tree.
func TestTreeOutlivesMain(t *testing.T) {
	containments(t, func(t *testing.T, opts procsup.TreeOptions, spec procsup.Spec) {
		c := testchild.Start(t, rt, "fork-tree", spec, "2")
		tree := procsup.NewTree(rt, c.P, opts)
		require.NoError(t, c.P.Signal(syscall.SIGKILL))
		<-tree.MainExited()
		require.False(t, tree.Empty(), "children of the dead main process are left")
		pids, err := tree.PIDs()
		require.NoError(t, err)
		require.ElementsMatch(t, c.PIDs, pids)
		n, err := tree.SignalTree(syscall.SIGTERM)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.Eventually(t, tree.Empty, 10*time.Second, 5*time.Millisecond)
	})
}

// An autopsy whose freeze times out still leaves the tree to be thawed,
// and thaw thaws it: a frozen agent would act on no signal of the ladder
// but SIGKILL.
func TestSnapshotFreezeTimeoutThaws(t *testing.T) {
	m, err := cgroup.Detect(cgroup.Options{})
	if errors.Is(err, cgroup.ErrUnavailable) {
		t.Skipf("no writable cgroup v2 hierarchy: %v", err)
	}
	require.NoError(t, err)
	g, err := m.Create("freeze-test")
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Remove() })
	spec := procsup.Spec{CgroupFD: g.FD()}
	c := testchild.Start(t, rt, "exit-on-term", spec)
	tree := procsup.NewTree(rt, c.P, procsup.TreeOptions{Cgroup: g, Exclusive: true})
	tree.SetFreezeWait(time.Nanosecond)
	// The 1ns bound has usually passed before the kernel reports the
	// tree frozen (and when it has not, the thaw is the same).
	procs, thaw := tree.Snapshot(128, true)
	require.NotEmpty(t, procs)
	freeze := filepath.Join(g.Path(), "cgroup.freeze")
	events, err := os.ReadFile(freeze)
	require.NoError(t, err)
	require.Equal(t, "1\n", string(events), "held frozen until thaw")
	thaw()
	thaw() // idempotent
	events, err = os.ReadFile(freeze)
	require.NoError(t, err)
	require.Equal(t, "0\n", string(events), "the tree was thawed")
	require.NoError(t, c.P.Signal(syscall.SIGTERM))
	require.Equal(t, 4, c.P.Status().Code, "the agent acted on SIGTERM")
}

// A process of the agent's session that joined the agent's process group
// is not in the tree: membership comes from descent, which cannot be
// faked, never from a group id any process of the session can take. (The
// joiner is our own child here, which supervise's exclusive mode counts
// as the agent's orphan by design; the end-to-end test of supervise covers
// that mode with a joiner that is not its child.)
func TestTreeGroupJoinerIsNoMember(t *testing.T) {
	c := testchild.Start(t, rt, "hang", procsup.Spec{})
	tree := procsup.NewTree(rt, c.P, procsup.TreeOptions{AgentID: "tree-test"})
	joiner := testchild.StartOutside(t, "join-group", strconv.Itoa(c.P.PID()))
	st, err := procfs.Default().Stat(joiner)
	require.NoError(t, err)
	require.Equal(t, c.P.PID(), st.PGID, "the joiner is in the agent's process group")

	in, err := tree.Contains(joiner)
	require.NoError(t, err)
	require.False(t, in, "a group joiner must not pass for the agent (its heartbeats would be trusted)")
	pids, err := tree.PIDs()
	require.NoError(t, err)
	require.Equal(t, []int{c.P.PID()}, pids)
}
