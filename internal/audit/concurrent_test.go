// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeConcurrently has three goroutines on two Logs and a helper process append k events
// each to path, all released at once, and returns the writers' names.
func writeConcurrently(t *testing.T, path string, k int, opts Options) []string {
	t.Helper()
	args := []string{path, "child", strconv.Itoa(k)}
	if opts.MaxBytes > 0 {
		args = append(args, strconv.FormatInt(opts.MaxBytes, 10))
	}
	child := startAppender(t, args...)
	a, b := openLog(t, path, opts), openLog(t, path, opts)
	writers := map[string]*Log{"a1": a, "a2": a, "b": b}

	start := make(chan struct{})
	var wg sync.WaitGroup
	for name, l := range writers {
		wg.Go(func() {
			<-start
			for i := range k {
				if !assert.NoError(t, l.Append(writerEvent(name, i))) {
					return
				}
			}
		})
	}
	child.release(t)
	close(start)
	wg.Wait()
	child.wait(t)
	return []string{"a1", "a2", "b", "child"}
}

// eventsByWriter returns, per agent_id, the "i" of its events in file order.
func eventsByWriter(t *testing.T, paths ...string) map[string][]int {
	t.Helper()
	got := map[string][]int{}
	for _, p := range paths {
		for _, b := range readLines(t, p) {
			l := decode(t, b)
			if l.Type == typeRotated {
				continue
			}
			var d struct{ I int }
			require.NoError(t, json.Unmarshal(l.Data, &d))
			got[l.AgentID] = append(got[l.AgentID], d.I)
		}
	}
	return got
}

func assertAllEvents(t *testing.T, got map[string][]int, writers []string, k int) {
	t.Helper()
	want := make([]int, k)
	for i := range want {
		want[i] = i
	}
	require.Len(t, got, len(writers))
	for _, w := range writers {
		assert.Equal(t, want, got[w], "events of writer %s, in order", w)
	}
}

func TestConcurrentWriters(t *testing.T) {
	path := logPath(t)
	const k = 200

	writers := writeConcurrently(t, path, k, Options{})

	rep := checkOK(t, path)[0].Report
	assert.Equal(t, 4*k, rep.Lines)
	assert.Equal(t, uint64(4*k), rep.LastSeq)
	assertAllEvents(t, eventsByWriter(t, path), writers, k)
}

func TestConcurrentWritersRotating(t *testing.T) {
	path := logPath(t)
	const k = 150

	writers := writeConcurrently(t, path, k, Options{MaxBytes: 4096, Keep: 1000})

	files := chainFiles(t, path)
	require.Greater(t, len(files), 5, "rotated several times")
	checkOK(t, files...)
	assertAllEvents(t, eventsByWriter(t, files...), writers, k)
}

// chainFiles returns path's rotated files, oldest first, then path.
func chainFiles(t *testing.T, path string) []string {
	t.Helper()
	matches, err := filepath.Glob(path + ".*")
	require.NoError(t, err)
	var gens []int
	for _, m := range matches {
		if n, err := strconv.Atoi(strings.TrimPrefix(m, path+".")); err == nil {
			gens = append(gens, n)
		}
	}
	require.NotEmpty(t, gens, "no rotated files")
	slices.Sort(gens)
	require.Equal(t, len(gens), gens[len(gens)-1]-gens[0]+1, "no gaps in %v", gens)
	var files []string
	for _, n := range slices.Backward(gens) {
		files = append(files, path+"."+strconv.Itoa(n))
	}
	return append(files, path)
}
