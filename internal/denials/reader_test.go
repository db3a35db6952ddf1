// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package denials_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/denials"
	"github.com/hermeskill/hermeskilld/internal/landlock"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/testaudit"
)

func TestMain(m *testing.M) {
	os.Exit(m.Run())
}

// run runs script under sh, confined to writing beneath dir and to
// signalling its own domain, hands its pid to track when set, and waits
// for its end.
func run(t *testing.T, rt *procsup.Runtime, dir, script string, track chan<- int) {
	t.Helper()
	gate := filepath.Join(dir, "go")
	os.Remove(gate)
	// The pid is known only once it runs: the script waits for its
	// go-ahead, written once the pid is handed to the tracker.
	script = `while [ ! -e ` + gate + ` ]; do sleep 0.01; done; ` + script
	p, err := rt.Start(procsup.Spec{Argv: []string{"/bin/sh", "-c", script},
		Landlock: landlock.Ruleset{ScopeSignals: true, Writable: []string{dir}}})
	require.NoError(t, err)
	if track != nil {
		track <- p.PID()
	}
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	<-p.Done()
}

// Real denials of a real confined process, read from the kernel's audit
// log: writes outside its directory and a signal to us are counted for
// it, by what refused them; a confined process that is not tracked
// counts for nobody.
func TestCountsRealDenials(t *testing.T) {
	if abi := landlock.ABI(); abi < landlock.LoggingABI {
		t.Skipf("the kernel's Landlock ABI is %d; logging denials after an execve needs %d (Linux 6.15)", abi, landlock.LoggingABI)
	}
	testaudit.Enable(t)
	r, err := denials.Open()
	require.NoError(t, err)
	defer r.Close()
	rt, err := procsup.NewRuntime(procsup.Options{})
	require.NoError(t, err)
	defer rt.Close()

	dir := t.TempDir()
	var agent int
	tracked := make(chan int, 1)
	c := r.Track(func(pid int) bool {
		select {
		case p := <-tracked:
			agent = p
		default:
		}
		return pid == agent // called on the reader's goroutine only
	})
	defer c.Untrack()
	other := r.Track(func(int) bool { return false })
	defer other.Untrack()

	script := `echo ok > ` + dir + `/allowed
		echo no > /etc/hermeskill-denied-1
		echo no > /hermeskill-denied-2
		kill -0 ` + strconv.Itoa(os.Getpid())
	run(t, rt, dir, script, tracked)
	require.Eventually(t, func() bool { return c.Count() >= 3 }, 5*time.Second, 10*time.Millisecond,
		"the agent's three denials; counted %d", c.Count())
	c.Settle(5 * time.Second)
	s := c.Summary()
	require.Equal(t, 3, s.Count, "the kernel's total, once the domain is gone")
	require.Equal(t, map[string]int{"fs.make_reg": 2, "scope.signal": 1}, s.ByBlocker)
	require.Equal(t, "/etc", s.Recent[0].Target)
	require.Equal(t, agent, s.Recent[0].PID)
	require.FileExists(t, filepath.Join(dir, "allowed"))
	require.Contains(t, s.Recent[2].Target, "pid "+strconv.Itoa(os.Getpid()))
	_, err = os.Stat("/etc/hermeskill-denied-1")
	require.ErrorIs(t, err, os.ErrNotExist)

	// Another confined process, tracked by nobody, then the agent once
	// more: records arrive in order, so once the agent's fourth denial is
	// counted the other's has been read, and counted for nobody.
	run(t, rt, dir, "echo no > /etc/hermeskill-denied-3", nil)
	run(t, rt, dir, "echo no > /etc/hermeskill-denied-4", tracked)
	require.Eventually(t, func() bool { return c.Count() == 4 }, 5*time.Second, 10*time.Millisecond)
	require.Zero(t, other.Count())
	require.Equal(t, 4, c.Count())
}
