// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestAsyncWritesInOrderAndVerifies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Open(path, Options{})
	require.NoError(t, err)
	a := NewAsync(l, 1024, func(err error) { t.Errorf("append: %v", err) })
	for i := 0; i < 100; i++ {
		require.True(t, a.Append(Event{Type: "symptom", AgentID: "a", Data: map[string]int{"i": i}}))
	}
	require.NoError(t, a.Close())
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	rep, err := verify(f)
	require.NoError(t, err)
	require.Equal(t, 100, rep.Lines)
	require.EqualValues(t, 100, rep.LastSeq)
	require.Zero(t, a.Dropped())
}

func TestAsyncDropsWhenFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Open(path, Options{})
	require.NoError(t, err)
	// Another holder of the chain's lock (a second open file description,
	// as another process would have) blocks the writer on its first
	// append: the queue of 2 fills and Append must not block.
	other, err := os.Open(path + ".lock")
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, flock(other, unix.LOCK_EX))
	a := NewAsync(l, 2, nil)
	a.Append(Event{Type: "symptom"}) // taken by the writer, which blocks
	dropped := false
	for i := 0; i < 10 && !dropped; i++ {
		dropped = !a.Append(Event{Type: "symptom"})
	}
	require.True(t, dropped)
	require.NotZero(t, a.Dropped())
	require.NoError(t, flock(other, unix.LOCK_UN))
	require.NoError(t, a.Close())
}

// An Append that comes after Close (a control request still in flight
// while the daemon shuts down) is dropped and counted, never a panic;
// appends racing with Close are either written or counted.
func TestAsyncAppendAfterClose(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "audit.jsonl"), Options{})
	require.NoError(t, err)
	a := NewAsync(l, 1024, nil)
	done := make(chan int)
	go func() {
		ok := 0
		for range 1000 {
			if a.Append(Event{Type: "symptom"}) {
				ok++
			}
		}
		done <- ok
	}()
	require.NoError(t, a.Close())
	ok := <-done
	require.EqualValues(t, 1000-ok, a.Dropped())
	require.False(t, a.Append(Event{Type: "symptom"}))
	require.NoError(t, a.Close(), "a second Close is harmless")
}

// A queued event the log fails to append is reported and counted, and
// the writer goes on with the next.
func TestAsyncCountsFailedAppends(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "audit.jsonl"), Options{})
	require.NoError(t, err)
	var errs []error
	a := NewAsync(l, 8, func(err error) { errs = append(errs, err) })
	require.True(t, a.Append(Event{Type: "symptom"}))
	require.True(t, a.Append(Event{})) // no type: Append refuses it
	require.True(t, a.Append(Event{Type: "symptom"}))
	require.NoError(t, a.Close()) // waits for the writer: errs is settled
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], errNoType)
	require.EqualValues(t, 1, a.Failed())
	require.Zero(t, a.Dropped())
	head, ok := a.Head()
	require.True(t, ok)
	require.EqualValues(t, 2, head.Seq, "the events around the failed one were written")
}
