// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/landlock"
	"github.com/hermeskill/hermeskilld/internal/procfs"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/testchild"
)

func TestExitCodePassedThrough(t *testing.T) {
	p, err := rt.Start(testchild.Spec("exit", "7"))
	require.NoError(t, err)
	st := p.Status()
	require.False(t, st.Signaled)
	require.Equal(t, 7, st.Code)
	require.Equal(t, 7, st.ShellCode())
}

func TestSignalDeathIs128PlusN(t *testing.T) {
	c := testchild.Start(t, rt, "hang", procsup.Spec{})
	require.NoError(t, c.P.Signal(syscall.SIGKILL))
	st := c.P.Status()
	require.True(t, st.Signaled)
	require.Equal(t, syscall.SIGKILL, st.Signal)
	require.Equal(t, 137, st.ShellCode())
	require.Equal(t, "killed by SIGKILL", st.String())
	// Signalling a reaped process through its pidfd is not an error.
	require.NoError(t, c.P.Signal(syscall.SIGTERM))
}

func TestOwnProcessGroup(t *testing.T) {
	c := testchild.Start(t, rt, "hang", procsup.Spec{})
	st, err := procfs.Default().Stat(c.P.PID())
	require.NoError(t, err)
	require.Equal(t, c.P.PID(), st.PGID, "the agent leads its own process group")
	require.Equal(t, os.Getpid(), st.PPID)
}

// A stop is reported once, with its signal, and leaves the exit to the
// owner; SignalGroup continues the child's whole group.
func TestTakeStopAndSignalGroup(t *testing.T) {
	c := testchild.Start(t, rt, "hang", procsup.Spec{})
	_, stopped := c.P.TakeStop()
	require.False(t, stopped, "a running child is not stopped")
	require.NoError(t, c.P.Signal(syscall.SIGTSTP))
	var sig syscall.Signal
	require.Eventually(t, func() bool { sig, stopped = c.P.TakeStop(); return stopped }, 5*time.Second, time.Millisecond)
	require.Equal(t, syscall.SIGTSTP, sig)
	_, again := c.P.TakeStop()
	require.False(t, again, "one report per stop")
	require.NoError(t, c.P.SignalGroup(syscall.SIGCONT))
	require.Eventually(t, func() bool {
		st, err := procfs.Default().Stat(c.P.PID())
		return err == nil && st.State != 'T'
	}, 5*time.Second, time.Millisecond, "continued")
	require.NoError(t, c.P.SignalGroup(syscall.SIGKILL))
	require.Equal(t, syscall.SIGKILL, c.P.Status().Signal, "the exit stays the owner's to reap")
	_, stopped = c.P.TakeStop()
	require.False(t, stopped)
	require.NoError(t, c.P.SignalGroup(syscall.SIGKILL), "a reaped child's group is not signalled")
}

func TestStartErrors(t *testing.T) {
	_, err := rt.Start(procsup.Spec{Argv: []string{"/nonexistent/agent"}})
	var se *procsup.StartError
	require.ErrorAs(t, err, &se)
	require.Equal(t, 127, se.Code)

	_, err = rt.Start(procsup.Spec{Argv: []string{"no-such-command-hk"}})
	require.ErrorAs(t, err, &se)
	require.Equal(t, 127, se.Code)
	require.Contains(t, err.Error(), "command not found")

	dir := t.TempDir()
	notExec := filepath.Join(dir, "agent.sh")
	require.NoError(t, os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644))
	_, err = rt.Start(procsup.Spec{Argv: []string{notExec}})
	require.ErrorAs(t, err, &se)
	require.Equal(t, 126, se.Code)

	_, err = rt.Start(procsup.Spec{Argv: []string{dir}})
	require.ErrorAs(t, err, &se)
	require.Equal(t, 126, se.Code)
}

// PR_SET_PDEATHSIG: when the supervisor dies (even by SIGKILL) its agent
// dies — also when the goroutine that asked for the start has since
// exited locked to its thread (Go's thread caveat, solved by forking from
// one long-lived locked thread).
func TestAgentDiesWithSupervisor(t *testing.T) {
	sup := testchild.Start(t, rt, "mini-supervisor", procsup.Spec{})
	require.Len(t, sup.PIDs, 1)
	agent := sup.PIDs[0]
	require.True(t, testchild.Alive(agent))
	require.Never(t, func() bool { return !testchild.Alive(agent) }, 500*time.Millisecond, 50*time.Millisecond,
		"the agent died when the thread that requested it exited")
	require.NoError(t, sup.P.Signal(syscall.SIGKILL))
	<-sup.P.Done()
	require.Eventually(t, func() bool { return !testchild.Alive(agent) }, 10*time.Second, 10*time.Millisecond,
		"the agent outlived its supervisor")
}

// Orphans reparented to us (child subreaper) are reaped; no zombie stays.
func TestOrphansAreReaped(t *testing.T) {
	c := testchild.Start(t, rt, "escape", procsup.Spec{})
	require.Len(t, c.PIDs, 1)
	escapee := c.PIDs[0]
	st, err := procfs.Default().Stat(escapee)
	require.NoError(t, err)
	require.Equal(t, os.Getpid(), st.PPID, "the orphan was reparented to the subreaper")
	before := rt.OrphansReaped()
	require.NoError(t, syscall.Kill(escapee, syscall.SIGKILL))
	require.Eventually(t, func() bool { return !testchild.Exists(escapee) }, 10*time.Second, 5*time.Millisecond,
		"the orphan was not reaped (still a zombie)")
	// Counted just after wait4(2) returns: /proc can show the reap first.
	require.Eventually(t, func() bool { return rt.OrphansReaped() > before }, 10*time.Second, time.Millisecond,
		"the reap was not counted")
	// The managed process is still ours to wait for: the reaper left it.
	require.NoError(t, c.P.Signal(syscall.SIGKILL))
	require.True(t, c.P.Status().Signaled)
}

// The reaper never steals a managed child's exit status, even when many
// exit at once beside orphans.
func TestReaperLeavesManagedChildren(t *testing.T) {
	var ps []*procsup.Process
	for i := 0; i < 20; i++ {
		p, err := rt.Start(testchild.Spec("exit", "5"))
		require.NoError(t, err)
		ps = append(ps, p)
	}
	for _, p := range ps {
		st := p.Status()
		require.False(t, st.Signaled)
		require.Equal(t, 5, st.Code)
	}
}

func TestAgentEnv(t *testing.T) {
	base := []string{"PATH=/bin", "NOTIFY_SOCKET=/run/systemd/notify", "WATCHDOG_USEC=1", "WATCHDOG_PID=1",
		"LISTEN_FDS=3", "HERMESKILL_SOCKET=/old", "HERMESKILL_STREAM_SOCKET=/old-stream", "KEEP=1"}
	extra := map[string]string{"LOG": "info", "NOTIFY_SOCKET": "/evil", "HERMESKILL_STREAM_SOCKET": "/evil-stream"}
	env := procsup.AgentEnv(base, extra, "bot", "/run/hk/bot/notify.sock", "/run/hk/bot/stream.sock", 30*time.Second)
	joined := "\n" + strings.Join(env, "\n") + "\n"
	require.Contains(t, joined, "\nPATH=/bin\n")
	require.Contains(t, joined, "\nKEEP=1\n")
	require.Contains(t, joined, "\nLOG=info\n")
	require.Contains(t, joined, "\nNOTIFY_SOCKET=/run/hk/bot/notify.sock\n")
	require.Contains(t, joined, "\nHERMESKILL_SOCKET=/run/hk/bot/notify.sock\n")
	require.Contains(t, joined, "\nHERMESKILL_STREAM_SOCKET=/run/hk/bot/stream.sock\n")
	require.Contains(t, joined, "\nHERMESKILL_AGENT_ID=bot\n")
	require.Contains(t, joined, "\nWATCHDOG_USEC=30000000\n")
	for _, leaked := range []string{"/run/systemd/notify", "WATCHDOG_PID", "LISTEN_FDS", "/old", "/evil"} {
		require.NotContains(t, joined, leaked)
	}
	require.NotContains(t, strings.Join(procsup.AgentEnv(nil, nil, "x", "/s", "", 0), "\n"), "WATCHDOG_USEC")
	// Without a stream socket the variable is unset, whatever the
	// inherited environment or the agent file say.
	require.NotContains(t, strings.Join(procsup.AgentEnv(base, extra, "x", "/s", "", 0), "\n"), "STREAM")
}

func TestOwnSupervisorVar(t *testing.T) {
	for _, k := range []string{"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		require.True(t, procsup.OwnSupervisorVar(k), k)
	}
	for _, k := range []string{"PATH", "HERMESKILL_SOCKET", "NOTIFY", ""} {
		require.False(t, procsup.OwnSupervisorVar(k), k)
	}
}

// The daemon's runtime waits on pidfds through the netpoller (no thread
// per child): exit codes and signals come out the same, and it holds one
// pidfd per child, as the runtime that waits in a thread does.
func TestPollWaitRuntime(t *testing.T) {
	spec := testchild.Spec("pollwait-runtime")
	r, w, err := os.Pipe()
	require.NoError(t, err)
	spec.Stdout = w
	p, err := rt.Start(spec)
	w.Close()
	require.NoError(t, err)
	out, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, 0, p.Status().Code)
	require.Equal(t, "exited with code 7\npidfds 1\nkilled by SIGKILL 137\n", string(out))

	c := testchild.Start(t, rt, "hang", procsup.Spec{})
	require.Equal(t, 1, testchild.PidfdsOf(c.P.PID()), "pidfds of a child of the thread-waiting runtime")
}

// Start returns once the command's execve(2) has finished: right after
// it, /proc/PID/cmdline is the command's argv, never the empty one of an
// exec still loading the program (nor the exec stage's). The window is
// microseconds wide, widest for a large dynamically linked program: a
// thousand starts of python3 found it (about one start in a hundred)
// before Start waited for it.
func TestStartReturnsAfterExec(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("no %s here, the program whose exec shows the window: %v", python, err)
	}
	starts := map[string]int{"plain": 1000}
	if rt.LandlockABI() >= landlock.SignalsABI {
		starts["exec stage"] = 50 // through the stage too: the race-built test binary, slow to start
	}
	for name, n := range starts {
		t.Run(name, func(t *testing.T) {
			r := landlock.Ruleset{ScopeSignals: name == "exec stage"}
			for i := range n {
				p, err := rt.Start(procsup.Spec{Argv: []string{python, "-c", "import time; time.sleep(60)", strconv.Itoa(i)}, Landlock: r})
				require.NoError(t, err)
				raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID()))
				require.NoError(t, err)
				require.Equal(t, python+"\x00-c\x00import time; time.sleep(60)\x00"+strconv.Itoa(i)+"\x00", string(raw), "start %d", i)
				require.NoError(t, p.Signal(syscall.SIGKILL))
				<-p.Done()
			}
		})
	}
}
