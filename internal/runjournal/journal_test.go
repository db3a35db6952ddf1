// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package runjournal

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/procfs"
)

func entry(owner Owner, agent, marker string) *Entry {
	return &Entry{Owner: owner, Marker: marker, CertsDir: "/certs",
		Certificate: &certs.Certificate{Schema: certs.Schema, AgentID: agent, PID: 4242}}
}

// dead is an owner that does not run: our pid with another start time
// (a recycled pid is not the owner).
func dead() Owner { o := Self(); o.Start++; return o }

func names(t *testing.T, dir string) []string {
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// Only the entries of a dead hermeskilld are recovered, each once, with
// the keeper's record of its kill; recorded entries and the kill record
// are removed, a live owner's entry is left alone.
func TestRecover(t *testing.T) {
	dir := t.TempDir()
	d := dead()
	require.NoError(t, Write(Path(dir, "lost", 4242, 7), entry(d, "lost", "HERMESKILL_SOCKET=/a")))
	require.NoError(t, Write(Path(dir, "other", 4243, 7), entry(d, "other", "HERMESKILL_SOCKET=/b")))
	require.NoError(t, Write(Path(dir, "live", 4244, 7), entry(Self(), "live", "HERMESKILL_SOCKET=/c")))
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	require.NoError(t, WriteKilled(dir, &Killed{At: at, Owner: d.PID, Keeper: 99, Processes: 3, Runs: []string{"HERMESKILL_SOCKET=/a"}}))

	got := map[string]*Killed{}
	n, err := Recover(dir, func(e *Entry, k *Killed) error {
		got[e.Certificate.AgentID] = k
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	require.Contains(t, got, "lost")
	require.NotNil(t, got["lost"], "the keeper's kill of run /a")
	assert.Equal(t, at, got["lost"].At)
	assert.Nil(t, got["other"], "a kill record covers only the runs it names")
	assert.NotContains(t, got, "live")
	// Our own pid, hence also the kill record's owner, still has a live
	// entry: the record stays until none is left.
	left := names(t, dir)
	assert.Contains(t, left, filepath.Base(Path(dir, "live", 4244, 7)))
	assert.Len(t, left, 2, "%v", left)

	n, err = Recover(dir, func(*Entry, *Killed) error { t.Fatal("recovered twice"); return nil })
	require.NoError(t, err)
	assert.Zero(t, n)
}

// An entry whose certificate could not be written stays for the next
// start; one another start is recording (its claimer alive) is skipped;
// a claim whose claimer died is taken over.
func TestRecoverClaims(t *testing.T) {
	dir := t.TempDir()
	d := dead()
	require.NoError(t, Write(Path(dir, "fails", 1, 1), entry(d, "fails", "")))
	_, err := Recover(dir, func(*Entry, *Killed) error { return errors.New("disk full") })
	require.ErrorContains(t, err, "disk full")
	assert.Equal(t, []string{"fails.1.1.run"}, names(t, dir))

	require.NoError(t, os.Rename(filepath.Join(dir, "fails.1.1.run"), filepath.Join(dir, "fails.1.1.run.claimed.1")))
	n, err := Recover(dir, func(*Entry, *Killed) error { t.Fatal("taken from a live claimer (pid 1)"); return nil })
	require.NoError(t, err)
	assert.Zero(t, n)

	require.NoError(t, os.Rename(filepath.Join(dir, "fails.1.1.run.claimed.1"), filepath.Join(dir, "fails.1.1.run.claimed.999999999")))
	n, err = Recover(dir, func(*Entry, *Killed) error { return nil })
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Empty(t, names(t, dir))
}

// A malformed entry is reported and kept; a missing directory is no
// error.
func TestRecoverBadEntry(t *testing.T) {
	n, err := Recover(filepath.Join(t.TempDir(), "none"), nil)
	require.NoError(t, err)
	assert.Zero(t, n)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.1.1.run"), []byte("{"), 0o600))
	_, err = recoverIn(dir, procfs.Default(), func(*Entry, *Killed) error { return nil })
	require.Error(t, err)
	assert.Equal(t, []string{"x.1.1.run"}, names(t, dir))
}

// A rewrite trades names with the spare file: the entry always reads
// whole, the spare holds the entry before, and from the third write on no
// file is created (the inodes of the entry and the spare alternate). A
// spare is never recovered as an entry, and Remove takes it too.
func TestWriteReusesSpare(t *testing.T) {
	dir := t.TempDir()
	path := Path(dir, "a", 4242, 7)
	ino := func(p string) uint64 {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	read := func(p string) string {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		var e Entry
		require.NoError(t, json.Unmarshal(b, &e))
		return e.Marker
	}
	d := dead()
	require.NoError(t, Write(path, entry(d, "a", "first")))
	assert.Equal(t, []string{filepath.Base(path)}, names(t, dir), "the first write leaves no spare")
	require.NoError(t, Write(path, entry(d, "a", "second")))
	assert.Equal(t, "second", read(path))
	assert.Equal(t, "first", read(sparePath(path)))
	entryIno, spareIno := ino(path), ino(sparePath(path))
	require.NoError(t, Write(path, entry(d, "a", "third")))
	assert.Equal(t, "third", read(path))
	assert.Equal(t, spareIno, ino(path), "the spare's inode now holds the entry")
	assert.Equal(t, entryIno, ino(sparePath(path)), "and the entry's the spare")
	// A shorter entry over a longer one's file leaves none of it behind.
	require.NoError(t, Write(path, entry(d, "a", strings.Repeat("x", 5000))))
	require.NoError(t, Write(path, entry(d, "a", "long gone")))
	require.NoError(t, Write(path, entry(d, "a", "third")))
	assert.Equal(t, "third", read(path))

	var got []string
	n, err := Recover(dir, func(e *Entry, _ *Killed) error { got = append(got, e.Marker); return nil })
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []string{"third"}, got, "the spare is not an entry")

	require.NoError(t, Write(path, entry(Self(), "a", "fourth")))
	require.NoError(t, Write(path, entry(Self(), "a", "fifth")))
	require.NoError(t, Remove(path))
	assert.Empty(t, names(t, dir), "Remove takes the spare too")
}
