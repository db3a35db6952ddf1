// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package execstage

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/landlock"
)

func TestArgvRoundTrip(t *testing.T) {
	for _, r := range []landlock.Ruleset{
		{ScopeSignals: true},
		{Writable: []string{}},
		{ScopeSignals: true, Writable: []string{"/tmp/a b", "--", "signals"}},
	} {
		argv := Argv(r, 7, "/bin/agent", []string{"agent", "--", "x"})
		got, abi, path, args, ok := parse(argv)
		require.True(t, ok, argv)
		require.Equal(t, r, got)
		require.Equal(t, 7, abi)
		require.Equal(t, "/bin/agent", path)
		require.Equal(t, []string{"agent", "--", "x"}, args)
	}
	for _, argv := range [][]string{
		{"hermeskilld", "supervise", "--", "x", "y", "z"},
		{Arg0, "v2", "7", "signals", "-1", "/bin/x", "x"},
		{Arg0, "v1", "7", "all", "-1", "/bin/x", "x"},
		{Arg0, "v1", "7", "signals", "2", "/w", "/bin/x", "x"}, // a path short
		{Arg0, "v1", "7", "signals", "-1", "/bin/x"},           // no argv
	} {
		_, _, _, _, ok := parse(argv)
		require.False(t, ok, argv)
	}
}

func TestResult(t *testing.T) {
	read := func(report string) error {
		r, w, err := os.Pipe()
		require.NoError(t, err)
		defer r.Close()
		_, _ = w.WriteString(report)
		w.Close()
		return Result(r, 10*time.Second)
	}
	require.NoError(t, read(""))
	err := read("execve 2\n")
	var f *Failure
	require.ErrorAs(t, err, &f)
	require.True(t, f.Exec)
	require.ErrorIs(t, err, syscall.ENOENT)
	err = read("confine 1 landlock_restrict_self: operation not permitted\n")
	require.ErrorAs(t, err, &f)
	require.False(t, f.Exec)
	require.ErrorIs(t, err, syscall.EPERM)
	require.Equal(t, "landlock_restrict_self: operation not permitted", err.Error())

	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	require.ErrorIs(t, Result(r, 50*time.Millisecond), ErrTimeout, "a stage that never reports")
}
