// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/procfs"
)

// treeSize is the process count of the escape-attempt tree.
const treeSize = 20

func TestKillTree(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fallback bool
	}{
		{name: "cgroup.kill"},
		{name: "fallback", fallback: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := newTestManager(t, func(o *Options) { o.fallbackKill = tc.fallback })
			g, err := m.Create("tree")
			require.NoError(t, err)
			if _, err := os.Stat(filepath.Join(g.Path(), "cgroup.kill")); !tc.fallback && err != nil {
				t.Skipf("kernel without cgroup.kill: %v", err)
			}
			top := start(t, g, "fork-tree 20")

			pids, err := g.PIDs()
			require.NoError(t, err)
			require.Len(t, pids, treeSize)
			requireEscapes(t, top.pid(), pids)

			require.NoError(t, g.Kill())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, g.WaitEmpty(ctx))

			left, err := g.PIDs()
			require.NoError(t, err)
			assert.Empty(t, left)
			pop, err := g.Populated()
			require.NoError(t, err)
			assert.False(t, pop)
			requireKilled(t, top)
			for _, pid := range pids {
				// Gone, or a zombie waiting for its new parent to reap it.
				if st, err := procfs.Default().Stat(pid); err == nil {
					assert.Contains(t, "ZX", string(st.State), "pid %d", pid)
				}
			}
			require.NoError(t, g.Remove())
		})
	}
}

// requireEscapes checks that the tree really tried to escape: a process
// in a session of its own (setsid), and one whose parent is outside the
// tree (the double fork's orphan, reparented).
func requireEscapes(t *testing.T, top int, pids []int) {
	t.Helper()
	topSid, err := unix.Getsid(top)
	require.NoError(t, err)
	var newSession, orphan bool
	for _, pid := range pids {
		if sid, err := unix.Getsid(pid); err == nil && sid != topSid {
			newSession = true
		}
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		require.NoError(t, err)
		if ppid := statPPID(t, st); pid != top && !slices.Contains(pids, ppid) {
			orphan = true
		}
	}
	assert.True(t, newSession, "a process of the tree left the session")
	assert.True(t, orphan, "a process of the tree was reparented out of it")
}

func TestSignal(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, nil)
	g, err := m.Create("signals")
	require.NoError(t, err)
	stubborn := start(t, g, "ignore-term")
	polite := start(t, g, "sleep")

	n, err := g.Signal(syscall.SIGTERM)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	require.Eventually(t, func() bool {
		pids, err := g.PIDs()
		return err == nil && slices.Equal(pids, []int{stubborn.pid()})
	}, 10*time.Second, 5*time.Millisecond, "SIGTERM ends the polite one only")
	err = polite.wait()
	require.Error(t, err)

	n, err = g.Signal(syscall.SIGCONT)
	require.NoError(t, err)
	assert.Equal(t, 1, n)

	n, err = g.Signal(syscall.SIGKILL)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, g.WaitEmpty(ctx))
	requireKilled(t, stubborn)

	n, err = g.Signal(syscall.SIGTERM)
	require.NoError(t, err)
	assert.Zero(t, n, "an empty group")
	require.NoError(t, g.Remove())
}

func TestKillEmptyAndGone(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, func(o *Options) { o.fallbackKill = true })
	g, err := m.Create("empty")
	require.NoError(t, err)
	require.NoError(t, g.Kill(), "nothing to kill")
	require.NoError(t, g.Remove())
	assert.Error(t, g.Kill(), "the group is gone")
}

// statPPID returns field 4 of /proc/PID/stat, read after the last ')'
// since comm may contain one (proc(5)).
func statPPID(t testing.TB, stat []byte) int {
	t.Helper()
	i := bytes.LastIndexByte(stat, ')')
	require.GreaterOrEqual(t, i, 0)
	fields := strings.Fields(string(stat[i+1:]))
	require.GreaterOrEqual(t, len(fields), 2)
	ppid, err := strconv.Atoi(fields[1])
	require.NoError(t, err)
	return ppid
}
