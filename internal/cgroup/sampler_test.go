// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCPUStat(t *testing.T) {
	user, sys, ok := parseCPUStat([]byte("usage_usec 3500\nuser_usec 2000\nsystem_usec 1500\nnr_periods 0\n"))
	require.True(t, ok)
	assert.Equal(t, uint64(2000), user)
	assert.Equal(t, uint64(1500), sys)

	_, _, ok = parseCPUStat([]byte("usage_usec 3500\nuser_usec 2000\n"))
	assert.False(t, ok, "system_usec missing")
	_, _, ok = parseCPUStat([]byte("user_usec 2000\nsystem_usec x\n"))
	assert.False(t, ok, "malformed")
	_, _, ok = parseCPUStat(nil)
	assert.False(t, ok)
}

func TestParseCPUStatDoesNotAllocate(t *testing.T) {
	data := []byte("usage_usec 3500\nuser_usec 2000\nsystem_usec 1500\n")
	assert.Zero(t, testing.AllocsPerRun(100, func() { parseCPUStat(data) }))
}

// A Sampler holds its files open and reads them again from the start:
// a file's new content is what the next sample sees.
func TestSampler(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	s := (&Group{dir: dir}).NewSampler()
	defer s.Close()

	_, err := s.PIDs(nil)
	require.ErrorIs(t, err, os.ErrNotExist)
	_, _, ok := s.CPUTime()
	require.False(t, ok)

	write("cgroup.procs", "42\n43\n")
	write("cpu.stat", "usage_usec 3500\nuser_usec 2000\nsystem_usec 1500\n")
	pids, err := s.PIDs(nil)
	require.NoError(t, err)
	assert.Equal(t, []int{42, 43}, pids)
	user, sys, ok := s.CPUTime()
	require.True(t, ok)
	assert.Equal(t, 2*time.Millisecond, user)
	assert.Equal(t, 1500*time.Microsecond, sys)

	// More pids than the first buffer holds: read whole, not cut.
	var many []string
	var want []int
	for pid := 100000; pid < 100400; pid++ {
		many = append(many, strconv.Itoa(pid))
		want = append(want, pid)
	}
	write("cgroup.procs", strings.Join(many, "\n")+"\n")
	pids, err = s.PIDs(pids)
	require.NoError(t, err)
	assert.Equal(t, want, pids)

	write("cgroup.procs", "")
	_, err = s.PIDs(pids)
	require.ErrorIs(t, err, io.EOF, "no process left")

	write("cgroup.procs", "7\nx\n")
	_, err = s.PIDs(nil)
	require.ErrorContains(t, err, `bad pid "x"`)
}
