// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestSamplerMatchesUsage(t *testing.T) {
	pids := []int{4242, 4243, 4250, 4300, 9999, 12345}
	want, err := fixture.Usage(pids, true)
	require.NoError(t, err)

	for _, maxFiles := range []int{0, 1, 2, 100} {
		s := fixture.NewSampler(maxFiles)
		for range 3 { // first sample opens, the next ones reuse
			got, err := s.Usage(pids, true)
			require.NoError(t, err)
			assert.Equal(t, want, got, "maxFiles %d", maxFiles)
			if maxFiles > 0 {
				assert.LessOrEqual(t, len(s.files), maxFiles)
			}
		}
		require.NoError(t, s.Close())
		assert.Empty(t, s.files)
	}
}

func TestSamplerDropsFilesNotAskedFor(t *testing.T) {
	s := fixture.NewSampler(0)
	defer s.Close()
	_, err := s.Usage([]int{4242, 4243, 4300}, false)
	require.NoError(t, err)
	assert.Len(t, s.files, 3)

	u, err := s.Usage([]int{4243}, false)
	require.NoError(t, err)
	assert.Equal(t, 1, u.Procs)
	assert.Len(t, s.files, 1)
	assert.Contains(t, s.files, 4243)
}

func TestSamplerRealProcessReaped(t *testing.T) {
	s := host.NewSampler(0)

	a := startChild(t, nil, nil, "open-files", "2")
	b := startChild(t, nil, nil, "open-files", "0")
	pids := []int{a.pid, b.pid}
	u, err := s.Usage(pids, true)
	require.NoError(t, err)
	assert.Equal(t, 2, u.Procs)
	nA, err := host.NumFDs(a.pid)
	require.NoError(t, err)
	nB, err := host.NumFDs(b.pid)
	require.NoError(t, err)
	assert.Equal(t, nA+nB, u.FDs)
	want, err := host.Usage(pids, false)
	require.NoError(t, err)
	assert.Equal(t, want.Threads, u.Threads)

	a.stop()
	require.NoError(t, a.wait())
	u, err = s.Usage(pids, true)
	require.NoError(t, err)
	assert.Equal(t, 1, u.Procs, "the reaped child is no longer counted")
	assert.NotContains(t, s.files, a.pid)
	assert.Contains(t, s.files, b.pid)

	held := ownFDs(t)
	require.NoError(t, s.Close())
	assert.Equal(t, held-1, ownFDs(t), "Close closes the file held for b")
}

func ownFDs(t *testing.T) int {
	t.Helper()
	n, err := countDirents("/proc/self/fd")
	require.NoError(t, err)
	return n - 1 // the directory being listed
}

func TestHeldStatFileFailsOnceReaped(t *testing.T) {
	// What the Sampler relies on: an open /proc/PID/stat follows the
	// process, not the number.
	c := startChild(t, nil, nil, "open-files", "0")
	fd, err := unix.Open(host.path(c.pid, "stat"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	buf := make([]byte, bufSize)
	_, err = pread(fd, buf)
	require.NoError(t, err)

	c.stop()
	require.NoError(t, c.wait())
	_, err = pread(fd, buf)
	require.ErrorIs(t, err, unix.ESRCH)
}
