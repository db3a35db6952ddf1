// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/heartbeat"
)

// owner returns the uid and gid of path, not following a symlink.
func owner(t *testing.T, path string) (uid, gid int, mode os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid), fi.Mode()
}

func TestPrepareDirCreates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sock")
	require.NoError(t, heartbeat.PrepareDir(dir, -1, -1))
	uid, _, mode := owner(t, dir)
	require.Equal(t, os.ModeDir|0o700, mode)
	require.Equal(t, os.Geteuid(), uid)

	// Idempotent, and an existing dir of ours is made private.
	require.NoError(t, os.Chmod(dir, 0o777))
	require.NoError(t, heartbeat.PrepareDir(dir, -1, -1))
	_, _, mode = owner(t, dir)
	require.Equal(t, os.ModeDir|0o700, mode)

	// A missing parent is the caller's problem, reported as such.
	require.ErrorIs(t, heartbeat.PrepareDir(filepath.Join(t.TempDir(), "a", "b"), -1, -1), os.ErrNotExist)
}

func TestPrepareDirRefusesSymlink(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "target")
	require.NoError(t, os.Mkdir(target, 0o755))
	link := filepath.Join(base, "sock")
	require.NoError(t, os.Symlink(target, link))

	err := heartbeat.PrepareDir(link, -1, -1)
	require.ErrorIs(t, err, heartbeat.ErrUnsafeDir)
	require.ErrorContains(t, err, link+" is a symbolic link")
	_, _, mode := owner(t, target)
	require.Equal(t, os.ModeDir|0o755, mode, "the symlink's target was changed")

	dangling := filepath.Join(base, "dangling")
	require.NoError(t, os.Symlink(filepath.Join(base, "nowhere"), dangling))
	require.ErrorIs(t, heartbeat.PrepareDir(dangling, -1, -1), heartbeat.ErrUnsafeDir)
	_, err = os.Lstat(filepath.Join(base, "nowhere"))
	require.ErrorIs(t, err, os.ErrNotExist, "created through a dangling symlink")
}

func TestPrepareDirRefusesNonDirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sock")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	err := heartbeat.PrepareDir(file, -1, -1)
	require.ErrorIs(t, err, heartbeat.ErrUnsafeDir)
	require.ErrorContains(t, err, "not a directory")
}

func TestPrepareDirOwnership(t *testing.T) {
	requireRoot(t)

	t.Run("refuses a dir owned by another uid", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "sock")
		require.NoError(t, os.Mkdir(dir, 0o755))
		require.NoError(t, os.Chown(dir, otherUID, otherUID))
		err := heartbeat.PrepareDir(dir, -1, -1)
		require.ErrorIs(t, err, heartbeat.ErrUnsafeDir)
		require.ErrorContains(t, err, "owned by uid 65534")
		uid, _, mode := owner(t, dir)
		require.Equal(t, otherUID, uid)
		require.Equal(t, os.ModeDir|0o755, mode, "a refused dir is left alone")

		// Nor is it accepted for a third uid.
		require.ErrorIs(t, heartbeat.PrepareDir(dir, agentUID, agentUID), heartbeat.ErrUnsafeDir)
	})

	t.Run("gives a new dir to the agent", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "sock")
		require.NoError(t, heartbeat.PrepareDir(dir, agentUID, agentUID))
		uid, gid, mode := owner(t, dir)
		require.Equal(t, [2]int{agentUID, agentUID}, [2]int{uid, gid})
		require.Equal(t, os.ModeDir|0o700, mode)
		// Already the agent's: accepted as is (a restart).
		require.NoError(t, heartbeat.PrepareDir(dir, agentUID, agentUID))
	})

	t.Run("applies the gid alone", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "sock")
		require.NoError(t, heartbeat.PrepareDir(dir, -1, otherUID))
		uid, gid, _ := owner(t, dir)
		require.Equal(t, [2]int{0, otherUID}, [2]int{uid, gid})
	})
}
