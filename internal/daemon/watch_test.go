// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/control"
)

// A settled agent file that a process still has open for writing is not
// read until it is closed: a shell's `cat >FILE` that has created the
// file and not yet written it is no invalid agent in ps, and the agent
// starts once the file is whole. One kept open longer than
// maxWriterWait is read as it is.
func TestAgentFileReadOnceClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, f := newTestDaemon(t)
		w := &watcher{pending: map[string]bool{}, writing: map[string]time.Time{}, timer: time.NewTimer(time.Hour)}
		w.timer.Stop()
		settle := func() {
			t.Helper()
			select {
			case <-w.settled():
				d.applySettled(w)
			case <-time.After(time.Minute):
				t.Fatal("nothing pending")
			}
		}

		path := filepath.Join(d.cfg.AgentsDir, "bot.yaml")
		wf, err := os.Create(path) // created, not yet written
		require.NoError(t, err)
		defer wf.Close()
		if !openForWriting(path) {
			t.Skip("no file leases on the file system of " + d.cfg.AgentsDir + " (fcntl F_SETLEASE): a writer cannot be seen")
		}
		d.fileEvent(w, fsnotify.Event{Name: path, Op: fsnotify.Create})
		settle()
		settle()
		require.Empty(t, d.List(), "an agent file still being written was read")
		_, err = wf.WriteString("id: bot\ncommand: [agent]\n")
		require.NoError(t, err)
		settle()
		require.Empty(t, d.List())
		require.NoError(t, wf.Close())
		settle()
		synctest.Wait()
		require.Len(t, f.of("bot"), 1, "started once its file was closed")
		require.Equal(t, control.StateRunning, state(d, "bot"))
		select {
		case <-w.settled():
			t.Fatal("still pending after it was read")
		default:
		}

		// Kept open: read after maxWriterWait, whatever it holds.
		other := filepath.Join(d.cfg.AgentsDir, "held.yaml")
		hf, err := os.Create(other)
		require.NoError(t, err)
		defer hf.Close()
		_, err = hf.WriteString("id: held\ncommand: [agent]\n")
		require.NoError(t, err)
		d.fileEvent(w, fsnotify.Event{Name: other, Op: fsnotify.Write})
		began := time.Now()
		for len(f.of("held")) == 0 {
			settle()
			synctest.Wait()
		}
		waited := time.Since(began)
		require.GreaterOrEqual(t, waited, maxWriterWait)
		require.Less(t, waited, maxWriterWait+2*settleDelay)
	})
}

// A file nobody writes is not open for writing; the probe leaves no
// lease behind (a writer opens it at once).
func TestOpenForWriting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.yaml")
	require.NoError(t, os.WriteFile(path, []byte("id: a\n"), 0o644))
	wf, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	if !openForWriting(path) {
		t.Skip("no file leases on the file system of " + path + " (fcntl F_SETLEASE)")
	}
	require.NoError(t, wf.Close())
	require.False(t, openForWriting(path))
	rf, err := os.Open(path) // readers do not count
	require.NoError(t, err)
	defer rf.Close()
	require.False(t, openForWriting(path))
	// O_NONBLOCK: an open that would break a lease fails at once.
	wf, err = os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	require.NoError(t, err, "a lease was left behind")
	require.NoError(t, wf.Close())
	require.False(t, openForWriting(filepath.Join(filepath.Dir(path), "gone.yaml")))
}
