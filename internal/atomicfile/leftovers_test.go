// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTargetOf(t *testing.T) {
	long := strings.Repeat("n", maxBase)
	tests := []struct {
		name string
		base string
		ok   bool
	}{
		{".cert.json.0123456789abcdef.tmp", "cert.json", true},
		{".a.b.c.json.fedcba9876543210.tmp", "a.b.c.json", true},
		{"." + long[:maxBase-1] + ".0123456789abcdef.tmp", long[:maxBase-1], true},
		{"." + long + ".0123456789abcdef.tmp", "", false}, // maybe shortened
		{"cert.json.0123456789abcdef.tmp", "", false},     // not hidden
		{".cert.json.0123456789abcdef", "", false},
		{".cert.json.0123456789ABCDEF.tmp", "", false},
		{".cert.json.0123456789abcde.tmp", "", false},
		{"..0123456789abcdef.tmp", "", false},
		{"...0123456789abcdef.tmp", "", false},
		{".0123456789abcdef.tmp", "", false},
		{"cert.json", "", false},
	}
	for _, tt := range tests {
		base, ok := TargetOf(tt.name)
		assert.Equal(t, tt.ok, ok, tt.name)
		assert.Equal(t, tt.base, base, tt.name)
	}
}

// crashedTemp leaves what a writer killed before its rename leaves: a
// temporary file holding data, with nobody holding its lock.
func crashedTemp(t *testing.T, dir, base, data string) string {
	t.Helper()
	f, err := createTemp(dir, base)
	require.NoError(t, err)
	_, err = f.WriteString(data)
	require.NoError(t, err)
	require.NoError(t, f.Close()) // the process died: its descriptors are closed
	return f.Name()
}

func TestLeftovers(t *testing.T) {
	dir := t.TempDir()
	orphan := crashedTemp(t, dir, "cert.json", "half a cert")
	// A writer at work: created and locked, not renamed yet.
	busy, err := createTemp(dir, "busy.json")
	require.NoError(t, err)
	defer busy.Close()
	for _, name := range []string{"cert.json", ".hidden", "notes.txt", ".x.json.zzzzzzzzzzzzzzzz.tmp"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, ".d.json.0123456789abcdef.tmp"), 0o700))

	var got []Leftover
	err = Leftovers(dir, func(lo Leftover) error {
		data, err := io.ReadAll(lo.File)
		require.NoError(t, err)
		assert.Equal(t, "half a cert", string(data))
		got = append(got, lo)
		return nil
	})

	require.NoError(t, err)
	require.Len(t, got, 1, "only the orphan: the busy file is locked, the rest are not temporary files")
	assert.Equal(t, orphan, got[0].Path)
	assert.Equal(t, filepath.Join(dir, "cert.json"), got[0].Target)
	assert.FileExists(t, orphan, "Leftovers itself never removes anything")
}

func TestLeftoversCallbackErrorsAreJoined(t *testing.T) {
	dir := t.TempDir()
	crashedTemp(t, dir, "a.json", "a")
	crashedTemp(t, dir, "b.json", "b")
	boom := errors.New("boom")
	calls := 0

	err := Leftovers(dir, func(Leftover) error { calls++; return boom })

	require.ErrorIs(t, err, boom)
	assert.Equal(t, 2, calls, "the scan goes on past an error")
}

func TestLeftoversMissingDir(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	err := Leftovers(missing, func(Leftover) error { return nil })
	require.ErrorIs(t, err, fs.ErrNotExist)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "read dir", pe.Op)
}

// A scan that removed an empty temporary file before its writer locked it
// makes the writer take another name, never write into a removed file.
func TestLockTempAfterRemoval(t *testing.T) {
	dir := t.TempDir()
	f, err := os.OpenFile(filepath.Join(dir, ".f.0123456789abcdef.tmp"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, os.Remove(f.Name()))

	mine, err := lockTemp(f)

	require.NoError(t, err)
	assert.False(t, mine)
}

// WriteFile holds the lock from just after creating its temporary file
// until after the rename. A scan beside many writes can only catch a
// temporary file in the instant between open(2) and flock(2), still empty;
// when it removes it, as a recovery does with an incomplete file, the
// writer takes another name. No write fails and none is lost.
func TestLeftoversBesideWriters(t *testing.T) {
	dir := t.TempDir()
	done := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		for {
			select {
			case <-done:
				return
			default:
			}
			err := Leftovers(dir, func(lo Leftover) error {
				data, err := io.ReadAll(lo.File)
				if err == nil && len(data) > 0 {
					err = errors.New("a live writer's data in " + lo.Path)
				}
				return errors.Join(err, os.Remove(lo.Path))
			})
			if err != nil {
				errc <- err
				return
			}
		}
	}()
	for i := range 50 {
		data := []byte(strings.Repeat("x", i+1))
		require.NoError(t, WriteFile(filepath.Join(dir, "f.json"), data, 0o640))
		got, err := os.ReadFile(filepath.Join(dir, "f.json"))
		require.NoError(t, err)
		require.Equal(t, data, got)
	}
	close(done)
	require.NoError(t, <-errc)
	assert.Equal(t, []string{"f.json"}, names(t, dir))
}
