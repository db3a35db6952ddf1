// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/rotlog"
)

func TestTailStart(t *testing.T) {
	for _, c := range []struct {
		data      string
		n         int
		off, have int
	}{
		{"", 3, 0, 0},
		{"a\nb\nc\n", 2, 2, 2},
		{"a\nb\nc\n", 3, 0, 3},
		{"a\nb\nc\n", 5, 0, 3},
		{"a\nb\nc", 1, 4, 1},   // a last line without its newline counts
		{"a\nb\nc\n", 0, 6, 0}, // none
		{"a\nb\nc\n", -1, 0, 0},
		{"\n\n", 1, 1, 1},
	} {
		off, have, err := tailStart(strings.NewReader(c.data), int64(len(c.data)), c.n)
		require.NoError(t, err)
		require.Equal(t, c.off, int(off), "%q n=%d", c.data, c.n)
		require.Equal(t, c.have, have, "%q n=%d", c.data, c.n)
	}
	// Longer than the read buffer.
	long := strings.Repeat(strings.Repeat("x", 999)+"\n", 100)
	off, have, err := tailStart(strings.NewReader(long), int64(len(long)), 40)
	require.NoError(t, err)
	require.Equal(t, 40, have)
	require.Equal(t, int64(60*1000), off)
}

func readAllLog(t *testing.T, path string, req control.LogsRequest) string {
	t.Helper()
	lr, err := openLog(context.Background(), path, req)
	require.NoError(t, err)
	defer lr.Close()
	b, err := io.ReadAll(lr)
	require.NoError(t, err)
	return string(b)
}

// The tail spans rotated files, oldest first; "everything" is every file.
func TestLogTailAcrossRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bot.log")
	w, err := rotlog.Open(path, 12, 3) // two lines of "lineN\n" per file
	require.NoError(t, err)
	var all strings.Builder
	for i := range 7 {
		line := "line" + string(rune('0'+i)) + "\n"
		all.WriteString(line)
		_, err := w.Write([]byte(line))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	require.FileExists(t, path+".3")

	require.Equal(t, "line5\nline6\n", readAllLog(t, path, control.LogsRequest{Tail: 2}))
	require.Equal(t, "line2\nline3\nline4\nline5\nline6\n", readAllLog(t, path, control.LogsRequest{Tail: 5}))
	require.Equal(t, "", readAllLog(t, path, control.LogsRequest{Tail: 0}))
	require.Equal(t, all.String(), readAllLog(t, path, control.LogsRequest{Tail: -1}))
	require.Equal(t, all.String(), readAllLog(t, path, control.LogsRequest{Tail: 100}))

	// One more rotation: line0 and line1 are past keep, gone.
	w, err = rotlog.Open(path, 12, 3)
	require.NoError(t, err)
	_, err = w.Write([]byte("line7\n"))
	require.NoError(t, err)
	_, err = w.Write([]byte("line8\n"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.Equal(t, "line2\nline3\nline4\nline5\nline6\nline7\nline8\n", readAllLog(t, path, control.LogsRequest{Tail: -1}))
}

// syncBuf collects what a follower reads.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A follower sees every line once, in order, across rotations (several
// between two looks included), and waits for a log not created yet.
func TestLogFollowAcrossRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bot.log")
	ctx, cancel := context.WithCancel(context.Background())
	lr, err := openLog(ctx, path, control.LogsRequest{Tail: 10, Follow: true})
	require.NoError(t, err, "no log yet: a follower waits for it")
	got := &syncBuf{}
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(got, lr)
		done <- err
	}()

	w, err := rotlog.Open(path, 20, 50) // every rotated file is kept: none is lost
	require.NoError(t, err)
	var want strings.Builder
	write := func(s string) {
		want.WriteString(s)
		_, err := w.Write([]byte(s))
		require.NoError(t, err)
	}
	write("first\n")
	require.Eventually(t, func() bool { return got.String() == want.String() }, 10*time.Second, 5*time.Millisecond)
	for i := range 30 { // many rotations, faster than the follower looks
		write(strings.Repeat("abcdefgh"[i%8:i%8+1], 9) + "\n")
	}
	require.Eventually(t, func() bool { return got.String() == want.String() }, 10*time.Second, 5*time.Millisecond,
		"got %q", got.String())
	write("last\n")
	require.Eventually(t, func() bool { return got.String() == want.String() }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, w.Close())
	cancel()
	require.NoError(t, <-done, "the end of ctx is the end of the stream")
	require.NoError(t, lr.Close())
}

// Logs through the daemon: a known agent without a log has an empty one,
// an unknown id is not found, a path is refused.
func TestDaemonLogs(t *testing.T) {
	d, _ := newTestDaemon(t)
	writeAgent(t, d, "bot", "")
	rd, err := d.Logs(context.Background(), "bot", control.LogsRequest{Tail: -1})
	require.NoError(t, err)
	b, err := io.ReadAll(rd)
	require.NoError(t, err)
	require.Empty(t, b)
	require.NoError(t, rd.Close())

	_, err = d.Logs(context.Background(), "nope", control.LogsRequest{Tail: -1})
	require.ErrorIs(t, err, control.ErrNotFound)
	for _, bad := range []string{"../x", ".hidden", "a/b", ""} {
		_, err = d.Logs(context.Background(), bad, control.LogsRequest{Tail: -1})
		require.ErrorIs(t, err, control.ErrBadInput, bad)
	}

	// The log of an agent whose file is gone is still served.
	require.NoError(t, os.WriteFile(filepath.Join(d.logsDir, "gone.log"), []byte("bye\n"), 0o640))
	rd, err = d.Logs(context.Background(), "gone", control.LogsRequest{Tail: 1})
	require.NoError(t, err)
	b, err = io.ReadAll(rd)
	require.NoError(t, err)
	require.Equal(t, "bye\n", string(b))
	require.NoError(t, rd.Close())
}

// A tail is the last lines when it was asked for: what the agent writes
// while it is read is not added (a tail of n lines never has more).
func TestLogTailDoesNotGrowWhileRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bot.log")
	require.NoError(t, os.WriteFile(path, []byte("a\nb\nc\n"), 0o600))
	lr, err := openLog(context.Background(), path, control.LogsRequest{Tail: 2})
	require.NoError(t, err)
	defer lr.Close()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("d\ne\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	got, err := io.ReadAll(lr)
	require.NoError(t, err)
	require.Equal(t, "b\nc\n", string(got))
}

// A follower is woken by inotify, not by a timer: with the rechecks an
// hour apart, each of 200 lines written through rotlog (3 rotations) is
// read within 2 s of its write, every line once and in order, and a
// cancel ends the stream and, at Close, the watcher's goroutine.
func TestLogFollowIsEventDriven(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	path := filepath.Join(t.TempDir(), "bot.log")
	w, err := rotlog.Open(path, 500, 10)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lr, err := openLog(ctx, path, control.LogsRequest{Tail: 0, Follow: true})
	require.NoError(t, err)
	require.NotNil(t, lr.watcher, "inotify is available here")
	lr.recheck, lr.poll = time.Hour, time.Hour
	got := &syncBuf{}
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(got, lr)
		done <- err
	}()

	var want strings.Builder
	for i := range 200 {
		line := fmt.Sprintf("line %03d\n", i)
		want.WriteString(line)
		_, err := w.Write([]byte(line))
		require.NoError(t, err)
		require.Eventually(t, func() bool { return got.String() == want.String() }, 2*time.Second, time.Millisecond,
			"line %d not read within 2 s of its write; got %q", i, got.String())
	}
	require.NoError(t, w.Close())
	require.FileExists(t, rotlog.Name(path, 3), "the 200 lines were written across 3 rotations")
	require.NoFileExists(t, rotlog.Name(path, 4))

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "the end of ctx is the end of the stream")
	case <-time.After(2 * time.Second):
		t.Fatal("the follower did not end with its ctx")
	}
	require.NoError(t, lr.Close())
	require.Equal(t, want.String(), got.String())
}

// Without a watcher (here: the log's directory does not exist yet, so
// there is nothing to watch) a follower polls, and finds the log once it
// is created.
func TestLogFollowWithoutWatcherPolls(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	path := filepath.Join(dir, "bot.log")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lr, err := openLog(ctx, path, control.LogsRequest{Tail: -1, Follow: true})
	require.NoError(t, err)
	require.Nil(t, lr.watcher)
	got := &syncBuf{}
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(got, lr)
		done <- err
	}()
	require.NoError(t, os.Mkdir(dir, 0o750))
	w, err := rotlog.Open(path, 0, 1)
	require.NoError(t, err)
	_, err = w.Write([]byte("hello\n"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return got.String() == "hello\n" }, 2*time.Second, 5*time.Millisecond)
	require.NoError(t, w.Close())
	cancel()
	require.NoError(t, <-done)
	require.NoError(t, lr.Close())
}
