// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package landlock

import (
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRulesetNames(t *testing.T) {
	require.Equal(t, "none", Ruleset{}.String())
	require.Equal(t, "signals", Ruleset{ScopeSignals: true}.String())
	require.Equal(t, "files", Ruleset{Writable: []string{"/tmp"}}.String())
	require.Equal(t, "signals+files", Ruleset{ScopeSignals: true, Writable: []string{}}.String())
	require.Equal(t, 0, Ruleset{}.Needs())
	require.Equal(t, FilesABI, Ruleset{Writable: []string{"/tmp"}}.Needs())
	require.Equal(t, SignalsABI, Ruleset{ScopeSignals: true, Writable: []string{"/tmp"}}.Needs())
	require.ErrorIs(t, RestrictSelf(Ruleset{}, ABI()), ErrEmpty)
	require.ErrorIs(t, RestrictSelf(Ruleset{ScopeSignals: true}, 5), ErrUnsupported)
}

// onConfinedThread runs fn on a thread confined by r; the thread is never
// given back (it ends with its goroutine, its domain with it).
func onConfinedThread(t *testing.T, r Ruleset, fn func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies confined
		if err := RestrictSelf(r, ABI()); err != nil {
			done <- err
			return
		}
		fn()
		done <- nil
	}()
	require.NoError(t, <-done)
}

// A confined thread cannot signal a process outside its domain (init,
// here), nor write outside its writable paths; the rest of the process
// is untouched.
func TestRestrictSelf(t *testing.T) {
	if ABI() < SignalsABI {
		t.Skipf("the kernel's Landlock ABI is %d (0: none); this test needs %d", ABI(), SignalsABI)
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	require.NoError(t, os.Mkdir(in, 0o755))
	require.NoError(t, os.Mkdir(out, 0o755))
	var kill, writeIn, writeOut error
	onConfinedThread(t, Ruleset{ScopeSignals: true, Writable: []string{in}}, func() {
		kill = syscall.Kill(1, 0)
		writeIn = syscall.Mkdir(filepath.Join(in, "d"), 0o755)
		writeOut = syscall.Mkdir(filepath.Join(out, "d"), 0o755)
	})
	require.ErrorIs(t, kill, syscall.EPERM)
	require.NoError(t, writeIn)
	require.ErrorIs(t, writeOut, syscall.EACCES)
	require.NoError(t, syscall.Mkdir(filepath.Join(out, "mine"), 0o755), "another thread is not confined")
}
