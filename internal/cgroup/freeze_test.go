// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFreezeThaw(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, nil)
	g, err := m.Create("spinner")
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(g.Path(), "cgroup.freeze")); err != nil {
		require.ErrorIs(t, g.Freeze(context.Background()), ErrFreezeUnsupported)
		t.Skipf("kernel without cgroup.freeze: %v", err)
	}
	spinner := start(t, g, "spin")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, g.Freeze(ctx))
	requireFrozen(t, g, 1)

	require.NoError(t, g.Thaw())
	require.Eventually(t, func() bool { return frozen(t, g) == 0 },
		10*time.Second, time.Millisecond, "cgroup.events says thawed")
	pids, err := g.PIDs()
	require.NoError(t, err)
	assert.Equal(t, []int{spinner.pid()}, pids, "thawed, still running")

	// Frozen processes can be killed: the ladder may freeze first.
	require.NoError(t, g.Freeze(ctx))
	requireFrozen(t, g, 1)
	require.NoError(t, g.Kill())
	require.NoError(t, g.WaitEmpty(ctx))
	requireKilled(t, spinner)
	require.NoError(t, g.Remove())
}

func TestFreezeEmptyAndGone(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, nil)
	g, err := m.Create("frozen-empty")
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Remove() })
	if _, err := os.Stat(filepath.Join(g.Path(), "cgroup.freeze")); err != nil {
		t.Skipf("kernel without cgroup.freeze: %v", err)
	}
	// An empty group is frozen at once.
	require.NoError(t, g.Freeze(context.Background()))
	requireFrozen(t, g, 1)
	require.NoError(t, g.Thaw())

	require.NoError(t, g.Remove())
	assert.Error(t, g.Freeze(context.Background()), "the group is gone")
	assert.NotErrorIs(t, g.Freeze(context.Background()), ErrFreezeUnsupported)
}

func frozen(t testing.TB, g *Group) uint64 {
	t.Helper()
	ev, err := readEvents(g.Path())
	require.NoError(t, err)
	return ev["frozen"]
}

func requireFrozen(t testing.TB, g *Group, want uint64) {
	t.Helper()
	require.Equal(t, want, frozen(t, g), "cgroup.events frozen")
}
