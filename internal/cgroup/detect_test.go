// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestDetectHost runs the real detection. Where it would take rule 3 it
// would move the test process, which TestDetectDelegated covers instead.
func TestDetectHost(t *testing.T) {
	p, err := locate(Options{})
	if err != nil {
		t.Skip("no writable cgroup v2 hierarchy: " + err.Error())
	}
	if p.mode != modeRoot {
		t.Skipf("detection takes rule 3 (%s) here; see TestDetectDelegated", p.base)
	}
	_, statErr := os.Stat(p.base)
	m, err := Detect(Options{})
	require.NoError(t, err)
	if errors.Is(statErr, fs.ErrNotExist) {
		t.Cleanup(func() { assert.NoError(t, unix.Rmdir(m.Base())) })
	}
	t.Log(m.Describe())
	assert.Equal(t, filepath.Join(m.Mount(), baseName), m.Base())
	assert.DirExists(t, m.Base())
	assert.Contains(t, m.Describe(), "agents under "+m.Base()+" (root; controllers: ")
	for _, w := range m.Warnings() {
		t.Logf("warning: %v", w)
	}
}

// TestDetectDelegated puts the test process in a cgroup marked as systemd
// marks a Delegate=yes unit's, and checks rule 3: the base is that cgroup,
// and the process moved itself into base/supervisor.
func TestDetectDelegated(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to set trusted.delegate")
	}
	p, err := locate(Options{})
	if err != nil {
		t.Skip("no writable cgroup v2 hierarchy: " + err.Error())
	}
	origDir, ok := p.h.dirOf(p.h.own)
	require.True(t, ok)
	unit, err := os.MkdirTemp(p.h.mount.point, "hermeskill-test-unit-")
	require.NoError(t, err)
	t.Cleanup(func() {
		// Back where we came from, then remove what Detect made.
		assert.NoError(t, writeFile(filepath.Join(origDir, "cgroup.procs"), strconv.Itoa(os.Getpid())))
		assert.NoError(t, (&Manager{removeWait: defaultRemoveWait}).removeTree(unit))
	})
	require.NoError(t, unix.Setxattr(unit, "trusted.delegate", []byte("1"), 0))
	require.NoError(t, writeFile(filepath.Join(unit, "cgroup.procs"), strconv.Itoa(os.Getpid())))

	m, err := Detect(Options{})
	require.NoError(t, err)
	t.Log(m.Describe())
	assert.Equal(t, unit, m.Base())
	assert.Contains(t, m.Describe(), "(delegated; ")

	self, err := os.ReadFile("/proc/self/cgroup")
	require.NoError(t, err)
	own, err := parseProcCgroup(self)
	require.NoError(t, err)
	leaf, err := p.h.cgroupOf(filepath.Join(unit, supervisorLeaf))
	require.NoError(t, err)
	assert.Equal(t, leaf, own, "moved into the supervisor leaf")
	procs, err := os.ReadFile(filepath.Join(unit, "cgroup.procs"))
	require.NoError(t, err)
	assert.Empty(t, strings.TrimSpace(string(procs)), "the delegated cgroup is an inner node now")

	// Detecting again from the leaf finds the same base.
	again, err := Detect(Options{})
	require.NoError(t, err)
	assert.Equal(t, unit, again.Base())

	g, err := m.Create("delegated")
	require.NoError(t, err)
	assert.Equal(t, unit, filepath.Dir(g.Path()))
	c := start(t, g, "sleep")
	in, err := g.Contains(c.pid())
	require.NoError(t, err)
	assert.True(t, in)
	require.NoError(t, g.Kill())
	requireKilled(t, c)
	require.NoError(t, g.Remove())
}
