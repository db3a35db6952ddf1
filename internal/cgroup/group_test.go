// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestCreateNames(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, nil)
	g1, err := m.Create("research.bot/../x")
	require.NoError(t, err)
	g2, err := m.Create("research.bot/../x")
	require.NoError(t, err)
	t.Cleanup(func() { _ = g1.Remove(); _ = g2.Remove() })

	re := regexp.MustCompile(`^research_bot____x\.` + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(m.start, 10) +
		"-" + strconv.FormatUint(m.pidns, 10) + `\.(\d+)$`)
	require.NotZero(t, m.start, "our start time is part of the names")
	require.NotZero(t, m.pidns, "and our PID namespace")
	for _, g := range []*Group{g1, g2} {
		assert.Equal(t, m.Base(), filepath.Dir(g.Path()))
		assert.Regexp(t, re, filepath.Base(g.Path()))
		assert.DirExists(t, g.Path())
		assert.GreaterOrEqual(t, g.FD(), 0)
	}
	assert.NotEqual(t, g1.Path(), g2.Path())

	// A name already taken (a stale group of an earlier process with our
	// pid) is skipped.
	taken := filepath.Join(m.Base(), groupName("dup", os.Getpid(), m.start, m.pidns, m.next.Load()+1))
	require.NoError(t, os.Mkdir(taken, 0o755))
	g3, err := m.Create("dup")
	require.NoError(t, err)
	t.Cleanup(func() { _ = g3.Remove() })
	assert.NotEqual(t, taken, g3.Path())
}

func TestStartIntoGroup(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, nil)
	g, err := m.Create("sleeper")
	require.NoError(t, err)
	c := start(t, g, "sleep")

	in, err := g.Contains(c.pid())
	require.NoError(t, err)
	assert.True(t, in, "child spawned with CLONE_INTO_CGROUP is in the group")
	in, err = g.Contains(os.Getpid())
	require.NoError(t, err)
	assert.False(t, in, "the test process is not")
	in, err = g.Contains(1 << 30)
	require.NoError(t, err)
	assert.False(t, in, "a pid that does not exist is not")

	pids, err := g.PIDs()
	require.NoError(t, err)
	assert.Equal(t, []int{c.pid()}, pids)

	pop, err := g.Populated()
	require.NoError(t, err)
	assert.True(t, pop)

	// The child is the leader of its own process group (Setpgid).
	pgid, err := unix.Getpgid(c.pid())
	require.NoError(t, err)
	assert.Equal(t, c.pid(), pgid)

	// Stats: known exactly when the controller's file exists (a hybrid
	// host has none).
	st, err := g.Stats()
	require.NoError(t, err)
	for file, r := range map[string]Reading{
		"memory.current": st.MemoryCurrent, "memory.peak": st.MemoryPeak,
		"pids.current": st.PidsCurrent, "memory.events": st.OOMKills,
	} {
		_, ferr := os.Stat(filepath.Join(g.Path(), file))
		assert.Equal(t, ferr == nil, r.Known, file)
	}
	if st.PidsCurrent.Known {
		assert.GreaterOrEqual(t, st.PidsCurrent.Value, uint64(1))
	}
	t.Logf("stats: %+v", st)

	require.NoError(t, g.Kill())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, g.WaitEmpty(ctx))
	requireKilled(t, c)
	require.NoError(t, g.Remove())
}

func TestSubCgroupAndAttach(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, nil)
	g, err := m.Create("nested")
	require.NoError(t, err)

	// A sub-cgroup, as an agent with its own delegation could make.
	sub, err := m.open(mkdirGroup(t, g.Path(), "inner"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	top := start(t, g, "sleep")
	deep := start(t, sub, "sleep")

	// A process started outside, then attached (kernels without
	// CLONE_INTO_CGROUP).
	late := start(t, nil, "sleep")
	in, err := g.Contains(late.pid())
	require.NoError(t, err)
	require.False(t, in)
	require.NoError(t, g.Attach(late.pid()))

	want := []int{top.pid(), deep.pid(), late.pid()}
	pids, err := g.PIDs()
	require.NoError(t, err)
	assert.ElementsMatch(t, want, pids)
	for _, pid := range want {
		in, err := g.Contains(pid)
		require.NoError(t, err)
		assert.True(t, in, "pid %d", pid)
	}
	in, err = sub.Contains(top.pid())
	require.NoError(t, err)
	assert.False(t, in, "the parent's process is not in the sub-cgroup")

	require.NoError(t, g.Kill())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, g.WaitEmpty(ctx))
	for _, c := range []*child{top, deep, late} {
		requireKilled(t, c)
	}
	require.NoError(t, g.Remove(), "removes the sub-cgroup first")
	assert.NoDirExists(t, g.Path())
}

func TestRemove(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, nil)
	m.removeWait = 200 * time.Millisecond

	g, err := m.Create("busy")
	require.NoError(t, err)
	c := start(t, g, "sleep")
	err = g.Remove()
	require.ErrorIs(t, err, ErrBusy, "a live process keeps the cgroup")
	require.ErrorIs(t, err, unix.EBUSY)
	assert.DirExists(t, g.Path())

	require.NoError(t, g.Kill())
	// No wait for the tree to empty: Remove itself waits for EBUSY to pass.
	require.NoError(t, g.Remove())
	assert.NoDirExists(t, g.Path())
	assert.Equal(t, -1, g.FD())
	require.NoError(t, g.Remove(), "removing twice is not an error")
	requireKilled(t, c)

	// A removed group is empty for WaitEmpty.
	require.NoError(t, g.WaitEmpty(context.Background()))
}

func TestWaitEmptyContext(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, nil)
	g, err := m.Create("waiter")
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })

	// Empty: returns at once, whatever the context.
	require.NoError(t, g.WaitEmpty(context.Background()))

	start(t, g, "sleep")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = g.WaitEmpty(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, g.WaitEmpty(ctx), context.Canceled)
}

// TestWaitEmptyWakes checks that WaitEmpty is woken by the inotify event
// of the last exit, not by its context: it is started before the kill.
func TestWaitEmptyWakes(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, nil)
	g, err := m.Create("wake")
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	c := start(t, g, "sleep")

	done := make(chan error, 1)
	go func() { done <- g.WaitEmpty(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("WaitEmpty returned before the kill: %v", err)
	default:
	}
	require.NoError(t, syscall.Kill(c.pid(), syscall.SIGKILL))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("WaitEmpty not woken by cgroup.events")
	}
	requireKilled(t, c)
}

func mkdirGroup(t testing.TB, parent, name string) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	require.NoError(t, os.Mkdir(dir, 0o755), fmt.Sprintf("mkdir %s", dir))
	return dir
}
