// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/procfs"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/testchild"
)

// Freeze stops the whole tree, the main process and its children: in a
// cgroup the kernel's freezer says so (cgroup.events "frozen 1"), without
// one every process is stopped (state T). Thaw lets them all run again,
// and the tree still dies as ever.
func TestTreeFreezeThaw(t *testing.T) {
	containments(t, func(t *testing.T, opts procsup.TreeOptions, spec procsup.Spec) {
		c := testchild.Start(t, rt, "fork-tree", spec, "3")
		tree := procsup.NewTree(rt, c.P, opts)
		pids := append([]int{c.P.PID()}, c.PIDs...)
		state := func(pid int) byte {
			st, err := procfs.Default().Stat(pid)
			require.NoError(t, err)
			return st.State
		}

		how, err := tree.Freeze()
		require.NoError(t, err)
		require.Equal(t, how, tree.Frozen())
		if opts.Cgroup != nil {
			require.Equal(t, procsup.FrozenCgroup, how)
			b, err := os.ReadFile(filepath.Join(opts.Cgroup.Path(), "cgroup.events"))
			require.NoError(t, err)
			require.Contains(t, strings.Split(string(b), "\n"), "frozen 1")
		} else {
			require.Equal(t, procsup.FrozenSIGSTOP, how)
			for _, pid := range pids {
				require.Eventually(t, func() bool { return state(pid) == 'T' }, 5*time.Second, time.Millisecond, "pid %d stopped", pid)
			}
		}
		again, err := tree.Freeze()
		require.NoError(t, err)
		require.Equal(t, how, again, "freezing a frozen tree changes nothing")

		require.NoError(t, tree.Thaw())
		require.Empty(t, tree.Frozen())
		for _, pid := range pids {
			require.Eventually(t, func() bool { return state(pid) != 'T' }, 5*time.Second, time.Millisecond, "pid %d runs again", pid)
		}
		if opts.Cgroup != nil {
			require.Eventually(t, func() bool {
				b, err := os.ReadFile(filepath.Join(opts.Cgroup.Path(), "cgroup.events"))
				return err == nil && strings.Contains(string(b), "frozen 0")
			}, 5*time.Second, time.Millisecond)
		}
		require.NoError(t, tree.Thaw(), "thawing a thawed tree is harmless")

		_, _, err = tree.KillTree()
		require.NoError(t, err)
		require.Eventually(t, tree.Empty, 10*time.Second, 5*time.Millisecond)
	})
}
