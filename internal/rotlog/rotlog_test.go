// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package rotlog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRotatesAtTheLimitAndKeepsN(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.log")
	w, err := Open(path, 100, 2)
	require.NoError(t, err)
	line := strings.Repeat("x", 39) + "\n" // 40 bytes
	for i := 0; i < 10; i++ {
		_, err := w.Write([]byte(line))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	for _, name := range []string{path, path + ".1", path + ".2"} {
		fi, err := os.Stat(name)
		require.NoError(t, err, name)
		require.LessOrEqual(t, fi.Size(), int64(100))
		require.Equal(t, os.FileMode(0o640), fi.Mode().Perm())
	}
	_, err = os.Stat(path + ".3")
	require.True(t, os.IsNotExist(err), "only keep=2 rotated files")
	_, err = w.Write([]byte("late"))
	require.ErrorIs(t, err, os.ErrClosed)
}

func TestAppendsToExisting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.log")
	require.NoError(t, os.WriteFile(path, []byte("before\n"), 0o640))
	w, err := Open(path, 0, 1)
	require.NoError(t, err)
	_, err = w.Write([]byte("after\n"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "before\nafter\n", string(b))
}

func TestShift(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	require.Equal(t, path+".3", Name(path, 3))
	write := func(name, content string) {
		require.NoError(t, os.WriteFile(name, []byte(content), 0o640))
	}
	read := func(name string) string {
		data, err := os.ReadFile(name)
		require.NoError(t, err, name)
		return string(data)
	}
	write(path, "new")
	write(Name(path, 1), "one")
	write(Name(path, 3), "three") // .2 is missing: skipped
	require.NoError(t, Shift(path, 3))
	require.NoFileExists(t, path)
	require.Equal(t, "new", read(Name(path, 1)))
	require.Equal(t, "one", read(Name(path, 2)))
	require.Equal(t, "three", read(Name(path, 3)), "keep=3: .3 is not moved to .4")
	require.NoFileExists(t, Name(path, 4))

	// keep 0 is 1: the one rotated file is replaced.
	write(path, "newer")
	require.NoError(t, Shift(path, 0))
	require.Equal(t, "newer", read(Name(path, 1)))
	require.Equal(t, "one", read(Name(path, 2)))
}

// A rename that fails stops the shift: the file stays where it is, and no
// rotated file is overwritten.
func TestShiftStopsAtAFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.log")
	require.NoError(t, os.WriteFile(path, []byte("current"), 0o640))
	require.NoError(t, os.WriteFile(Name(path, 1), []byte("one"), 0o640))
	require.NoError(t, os.WriteFile(Name(path, 2), []byte("two"), 0o640))
	require.NoError(t, os.Mkdir(Name(path, 3), 0o750)) // a file cannot replace a directory: .2 -> .3 fails
	err := Shift(path, 3)
	var le *os.LinkError
	require.ErrorAs(t, err, &le)
	require.FileExists(t, path)
	for n, want := range map[int]string{1: "one", 2: "two"} {
		data, err := os.ReadFile(Name(path, n))
		require.NoError(t, err)
		require.Equal(t, want, string(data))
	}

	require.ErrorIs(t, Shift(filepath.Join(dir, "missing"), 2), os.ErrNotExist)
}
