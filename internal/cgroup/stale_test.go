// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/procfs"
)

func TestCleanupStale(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, nil)

	// A pid that surely is dead: a helper that exited and was reaped.
	gone := start(t, nil, "exit")
	require.NoError(t, gone.wait())
	dead := gone.pid()

	// pid 1 is alive but is not a hermeskilld.
	comm, err := os.ReadFile("/proc/1/comm")
	require.NoError(t, err)
	require.False(t, m.isOwner(strings.TrimSpace(string(comm)), true), "pid 1 is %s", comm)

	ghost := filepath.Join(m.Base(), "ghost."+strconv.Itoa(dead)+".1")
	alien := filepath.Join(m.Base(), "alien.1.1")
	ours := filepath.Join(m.Base(), "ours."+strconv.Itoa(os.Getpid())+".1")
	// A live pid with another start time: the pid was reused after its
	// owner died.
	reused := filepath.Join(m.Base(), "reused.1-1.1")
	// pid 1 with its real start time: alive whatever its name.
	stat1, err := procfs.Default().Stat(1)
	require.NoError(t, err)
	start1 := stat1.StartTimeTicks
	init := filepath.Join(m.Base(), "init.1-"+strconv.FormatUint(start1, 10)+".1")
	// A dead pid of another PID namespace: not ours to judge.
	foreign := filepath.Join(m.Base(), "foreign."+strconv.Itoa(dead)+"-1-"+strconv.FormatUint(m.pidns+1, 10)+".1")
	other := filepath.Join(m.Base(), "other-tool")
	for _, dir := range []string{ghost, alien, ours, other, reused, init, foreign} {
		require.NoError(t, os.Mkdir(dir, 0o755))
	}
	mkdirGroup(t, ghost, "nested")

	// What a dead hermeskilld left running.
	gg, err := m.open(ghost)
	require.NoError(t, err)
	orphan := start(t, gg, "fork-tree 5")
	require.NoError(t, gg.Close())
	ng, err := m.open(filepath.Join(ghost, "nested"))
	require.NoError(t, err)
	nested := start(t, ng, "sleep")
	require.NoError(t, ng.Close())

	removed, err := m.CleanupStale()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{ghost, alien, reused}, removed)
	assert.DirExists(t, init, "the owner's pid and start time match: alive, whatever its name")
	require.NoError(t, os.Remove(init))
	assert.DirExists(t, foreign, "another PID namespace's group is left alone")
	require.NoError(t, os.Remove(foreign))
	assert.NoDirExists(t, ghost)
	assert.NoDirExists(t, alien)
	assert.DirExists(t, ours, "owned by a live hermeskilld (this test)")
	assert.DirExists(t, other, "not named by us")
	requireKilled(t, orphan)
	requireKilled(t, nested)

	removed, err = m.CleanupStale()
	require.NoError(t, err)
	assert.Empty(t, removed)
}

func TestOwnerAlive(t *testing.T) {
	t.Parallel()
	m := &Manager{procRoot: "/proc", owners: []string{ownerName, "a-very-long-binary-name"}, pid: -1}
	m.owners = append(m.owners, testComm)
	assert.True(t, m.ownerAlive(groupOwner{pid: os.Getpid()}), "comm %q", testComm)
	assert.False(t, m.ownerAlive(groupOwner{pid: 1 << 30}))
	assert.False(t, m.ownerAlive(groupOwner{pid: 1, start: 1}), "pid 1 did not start at tick 1")
	m.pidns = 7
	assert.True(t, m.ownerAlive(groupOwner{pid: 1 << 30, start: 1, pidns: 8}), "another namespace's pid")

	// comm is cut at 15 bytes.
	assert.True(t, m.isOwner("a-very-long-bin", true))
	assert.False(t, m.isOwner("a-very-long-bin", false))
	assert.False(t, m.isOwner("hermeskill", true))
}
