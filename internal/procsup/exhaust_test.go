// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup_test

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/fdreserve"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/testchild"
)

// exhaustEnv marks the re-executed test binary that runs the exhaustion
// itself: a full descriptor table would break every other test.
const exhaustEnv = "HK_PROCSUP_EXHAUST"

// With hermeskilld out of descriptors (an agent's flood, another user's)
// the kill path still kills what needs none and never reads an error as
// success: on the reserve the whole tree dies as usual; with the reserve
// gone too, the process group still dies, the kill reports its failure,
// the survivors are "not known" rather than none, and the tree is never
// reported empty while its escapee lives. Once descriptors are back the
// escapee dies.
func TestKillOutOfDescriptors(t *testing.T) {
	if os.Getenv(exhaustEnv) == "" {
		out, err := os.CreateTemp(t.TempDir(), "out")
		require.NoError(t, err)
		defer out.Close()
		p, err := rt.Start(procsup.Spec{Path: os.Args[0],
			Argv:   []string{os.Args[0], "-test.run=^TestKillOutOfDescriptors$", "-test.v", "-test.count=1"},
			Env:    append(os.Environ(), exhaustEnv+"=1"),
			Stdout: out, Stderr: out})
		require.NoError(t, err)
		select {
		case <-p.Done():
		case <-time.After(2 * time.Minute):
			_ = p.Signal(syscall.SIGKILL)
			<-p.Done()
		}
		b, _ := os.ReadFile(out.Name())
		t.Logf("%s", b)
		require.Zero(t, p.Status().ShellCode(), "the exhausted run failed")
		require.Contains(t, string(b), "--- PASS: TestKillOutOfDescriptors/reserve-gone/cgroup",
			"every mode ran")
		return
	}
	// Low, so the table fills fast; the Go runtime raised the soft limit
	// to the hard one at start.
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 256, Max: 256}))

	t.Run("on-reserve", func(t *testing.T) {
		containments(t, func(t *testing.T, opts procsup.TreeOptions, spec procsup.Spec) {
			tree, escapee := escapeTree(t, opts, spec)
			_, release := exhaust(t, false)
			defer release()
			n, _, err := tree.KillTree()
			require.NoError(t, err, "the reserve serves the kill")
			assert.GreaterOrEqual(t, n, 2)
			requireEmpties(t, tree)
			release()
			assert.False(t, testchild.Alive(escapee))
		})
	})
	t.Run("reserve-gone", func(t *testing.T) {
		containments(t, func(t *testing.T, opts procsup.TreeOptions, spec procsup.Spec) {
			tree, escapee := escapeTree(t, opts, spec)
			refill, release := exhaust(t, true)
			defer release()
			_, _, err := tree.KillTree()
			if tree.Mode() == procsup.ModePgroup {
				require.Error(t, err, "a kill that could not list the tree is a failure")
				select {
				case <-tree.MainExited():
				case <-time.After(10 * time.Second):
					t.Fatal("the process group's SIGKILL needs no descriptor, yet the main process lives")
				}
			} else {
				require.Error(t, err, "cgroup.kill could not be opened")
			}
			// The main process's pidfds, closed at its reaping, are free
			// again: take them, as a flood would.
			refill()
			survivors, err := tree.Survivors(4096)
			require.Error(t, err, "survivors %v read as known", survivors)
			assert.Contains(t, err.Error(), "survivors not known")
			done, stop := tree.WaitEmpty()
			select {
			case <-done:
				t.Fatal("the tree was reported empty while its escapee lives")
			case <-time.After(500 * time.Millisecond):
			}
			stop()
			require.False(t, tree.Empty())
			require.NoError(t, unix.Kill(escapee, 0), "the escapee is the proof: it must still be alive here")

			release()
			_, _, err = tree.KillTree()
			require.NoError(t, err)
			requireEmpties(t, tree)
			assert.False(t, testchild.Alive(escapee))
		})
	})
}

// escapeTree starts a main process whose grandchild left its session and
// process group, and returns its tree (listed once, as the ladder's
// samples list it) and the escapee.
func escapeTree(t *testing.T, opts procsup.TreeOptions, spec procsup.Spec) (*procsup.Tree, int) {
	c := testchild.Start(t, rt, "escape", spec)
	escapee := c.PIDs[0]
	t.Cleanup(func() { _ = syscall.Kill(escapee, syscall.SIGKILL) })
	tree := procsup.NewTree(rt, c.P, opts)
	pids, err := tree.PIDs()
	require.NoError(t, err)
	require.Contains(t, pids, escapee)
	return tree, escapee
}

// exhaust fills the descriptor table; with drain, the reserve is used up
// too (taken by a retry that finds the table full again). release gives
// everything back (idempotent) and refills the reserve.
func exhaust(t *testing.T, drain bool) (refill, release func()) {
	var fds []int
	fill := func() error {
		for {
			fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			fds = append(fds, fd)
		}
	}
	require.True(t, fdreserve.Exhausted(fill()))
	if drain {
		require.True(t, fdreserve.Exhausted(fdreserve.Do(fill)))
		require.Zero(t, fdreserve.Held(), "the reserve was not used up")
	}
	_, err := os.Open("/dev/null")
	require.True(t, fdreserve.Exhausted(err), "the table is not full: %v", err)
	done := false
	refill = func() { _ = fill() }
	return refill, func() {
		if done {
			return
		}
		done = true
		for _, fd := range fds {
			unix.Close(fd)
		}
		require.NoError(t, fdreserve.Hold())
	}
}

func requireEmpties(t *testing.T, tree *procsup.Tree) {
	t.Helper()
	done, stop := tree.WaitEmpty()
	defer stop()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		procs, err := tree.Survivors(4096)
		var left []string
		for _, p := range procs {
			left = append(left, p.Cmdline)
		}
		t.Fatalf("the tree did not empty: %s (%v)", strings.Join(left, "; "), err)
	}
}
