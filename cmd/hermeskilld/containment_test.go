// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
)

// escapeAgent builds a tree that tries every way out, and wedges:
//
//	main (agent.py, wedged in while True: pass, ignores SIGINT/SIGTERM)
//	├── stopped child (SIGSTOP)
//	└── child -> grandchild: setsid(), forks the escapee and exits
//	    (the classic double fork), so the escapee is an orphan in its own
//	    session that ignores SIGTERM, reparented to hermeskilld.
//
// Every process has the test's marker in its argv. The agent prints the
// pids once the escapee ignores SIGTERM and the child is stopped, then
// says READY and never beats again.
const escapeAgent = `
import os, signal, socket, subprocess, sys, time
marker = sys.argv[1]
IGNORE = "import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n    signal.signal(s, signal.SIG_IGN)\n"
SLEEP = "import time\nwhile True:\n    time.sleep(1)\n"
REPORT = "import os, sys\nfd = int(sys.argv[3])\nos.write(fd, b'%d\\n' % os.getpid())\nos.close(fd)\n"

def state(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rpartition(")")[2].split()[0]

# Popen returns once the child has exec'd, so its argv has the marker.
stopped = subprocess.Popen([sys.executable, "-c", IGNORE + SLEEP, marker, "stopped-child"])
os.kill(stopped.pid, signal.SIGSTOP)
while state(stopped.pid) != "T":
    time.sleep(0.01)

r, w = os.pipe()
child = os.fork()
if child == 0:
    if os.fork() == 0:       # the grandchild
        os.setsid()
        if os.fork() == 0:   # the escapee
            os.set_inheritable(w, True)
            os.execv(sys.executable, [sys.executable, "-c", IGNORE + REPORT + SLEEP, marker, "escapee", str(w)])
        os._exit(0)
    os.wait()
    os._exit(0)
os.close(w)
os.waitpid(child, 0)
with os.fdopen(r) as f:
    escapee = int(f.readline())

print("tree main=%d stopped=%d escapee=%d" % (os.getpid(), stopped.pid, escapee), flush=True)
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"READY=1\nWATCHDOG=1", os.environ["NOTIFY_SOCKET"])

def wedged_main_loop():
    while True:
        pass

wedged_main_loop()
`

var treeLine = regexp.MustCompile(`tree main=(\d+) stopped=(\d+) escapee=(\d+)`)

// A double-forked setsid() escapee that
// ignores SIGTERM, a SIGSTOPped child and a wedged main all die, with
// cgroup containment and with the process-group fallback; the autopsy
// lists the three with their states.
func TestContainmentNothingEscapes(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"cgroup", "pgroup"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			m := marker(t)
			r := hkRun(t, nil, "supervise", "--id", "escape-"+mode, "--containment", mode,
				"--startup-timeout", "60s", "--heartbeat-timeout", "1s", "--coop-grace", "200ms", "--term-grace", "300ms",
				"--certs-dir", dir, "--", python(t), agent(t, dir, escapeAgent), m)
			pids := treeLine.FindStringSubmatch(r.stdout)
			require.NotNil(t, pids, "the agent printed its tree")
			mainPID, _ := strconv.Atoi(pids[1])
			stopped, _ := strconv.Atoi(pids[2])
			escapee, _ := strconv.Atoi(pids[3])

			requireNoSurvivors(t, m)
			require.False(t, pidAlive(escapee), "the setsid() escapee survived")
			require.False(t, pidAlive(stopped), "the stopped child survived")
			require.Equal(t, 137, r.code)

			c := readCert(t, dir)
			require.Equal(t, mode, c.Containment)
			require.Equal(t, "heartbeat_timeout", c.TriggerCheck)
			require.Equal(t, certs.ReachedSigkill, c.Escalation.Reached)
			require.Empty(t, c.Survivors)
			require.GreaterOrEqual(t, c.FinalState.ProcsKilled, 3, "main, stopped child and escapee")
			require.Equal(t, mainPID, c.PID)

			// The autopsy is taken before any signal. With cgroup
			// containment the tree is frozen for it (cgroup.freeze), and
			// /proc shows a frozen task as sleeping: the states are read
			// just before the freeze, so the spinning main reads 'R' in
			// both modes, and the stopped child 'T'.
			for _, p := range c.ProcessTree {
				t.Logf("process_tree: pid %d ppid %d state %s threads %d: %.60s", p.PID, p.PPID, p.State, p.Threads, p.Cmdline)
			}
			mainProc := treeProc(t, c, mainPID)
			require.Contains(t, mainProc.Cmdline, "agent.py")
			require.Equal(t, "R", mainProc.State, "the main spins")
			sp := treeProc(t, c, stopped)
			require.Equal(t, "T", sp.State, "the stopped child")
			require.Equal(t, mainPID, sp.PPID)
			require.Contains(t, sp.Cmdline, "stopped-child")
			esc := treeProc(t, c, escapee)
			require.Contains(t, []string{"S", "R"}, esc.State, "the escapee sleeps")
			require.Equal(t, mainProc.PPID, esc.PPID, "the escapee was reparented to hermeskilld, the child subreaper")
			require.Contains(t, esc.Cmdline, "escapee")
		})
	}
}

// Kernel-measured symptoms.
func TestContainmentKernelSymptoms(t *testing.T) {
	t.Parallel()

	// A fork bomb: every process forks every 100ms, doubling the tree, up
	// to 2^7 processes (a cap so that a failing check cannot hurt the
	// machine). Forked processes keep the argv, so the marker finds them.
	const forkBomb = `
import os, sys, time
print("bombing", flush=True)
for generation in range(7):
    time.sleep(0.1)
    os.fork()
while True:
    time.sleep(1)
`
	for _, mode := range []string{"cgroup", "pgroup"} {
		t.Run("fork bomb/"+mode, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			m := marker(t)
			r := hkRun(t, nil, "supervise", "--id", "bomb", "--containment", mode, "--max-procs", "12", "--sample-interval", "100ms",
				"--coop-grace", "200ms", "--term-grace", "200ms", "--certs-dir", dir, "--", python(t), agent(t, dir, forkBomb), m)
			requireNoSurvivors(t, m)
			c := readCert(t, dir)
			require.Equal(t, "procs", c.TriggerCheck)
			require.Regexp(t, `^processes\+threads \d+ over kill threshold 12$`, c.TriggerReason)
			require.Greater(t, c.FinalState.ProcsKilled, 12)
			require.Empty(t, c.Survivors)
			require.NotEqual(t, 0, r.code)
		})
	}

	t.Run("memory hog", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		// 5 MiB every 100ms, touched (bytes of "x"), up to 600 MiB.
		src := `
import time
hog = []
print("allocating", flush=True)
while len(hog) < 120:
    hog.append(b"x" * (5 << 20))
    time.sleep(0.1)
while True:
    time.sleep(1)
`
		cfg := writeTestFile(t, dir, "agent.yaml", `
checks:
  sample_interval: 200ms
  memory: {warn: 64MiB, kill: 160MiB, for: 400ms}
escalation: {coop_grace: 300ms, term_grace: 300ms}
`)
		hkRun(t, nil, "supervise", "--id", "hog", "--config", cfg, "--certs-dir", dir, "--", python(t), agent(t, dir, src))
		c := readCert(t, dir)
		require.Equal(t, "memory", c.TriggerCheck)
		require.Equal(t, []string{"warning memory", "terminal memory"}, symptomsOf(c), "a warning first")
		require.Equal(t, "64MiB", c.SymptomsLog[0].Threshold)
		require.Equal(t, "160MiB", c.SymptomsLog[1].Threshold)
		require.Regexp(t, `^RSS \S+ over kill threshold 160MiB for 400ms$`, c.TriggerReason)
		require.Greater(t, c.FinalState.PeakRSSBytes, int64(160<<20))
	})

	t.Run("cpu spinner without progress", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		// Three processes spin, so that the tree stays over the
		// threshold on a loaded machine. For the first 1.5s the agent
		// reports progress while spinning, which only_without_progress
		// forgives; then progress stops.
		src := `
import os, socket, sys, time
notify = os.environ["NOTIFY_SOCKET"]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(b"READY=1", notify)
for _ in range(2):
    if os.fork() == 0:
        while True:
            pass
step, start, last = 0, time.monotonic(), 0.0
while time.monotonic() - start < 1.5:
    now = time.monotonic()
    if now - last >= 0.05:
        step += 1
        s.sendto(b"PROGRESS=%d" % step, notify)
        last = now
print("spinning without progress after step %d" % step, flush=True)
def spin_without_progress():
    while True:
        pass
spin_without_progress()
`
		cfg := writeTestFile(t, dir, "agent.yaml", `
checks:
  sample_interval: 200ms
  cpu_spin: {percent: 30, for: 1s, only_without_progress: true}
escalation: {coop_grace: 300ms, term_grace: 300ms}
`)
		r := hkRun(t, nil, "supervise", "--id", "spinner", "--config", cfg, "--certs-dir", dir, "--", python(t), agent(t, dir, src))
		c := readCert(t, dir)
		require.Equal(t, "cpu_spin", c.TriggerCheck)
		require.Regexp(t, `^CPU \d+% of a core for \S+ without progress \(threshold 30%\)$`, c.TriggerReason)
		require.Contains(t, r.stdout, "spinning without progress", "the spin with progress was forgiven")
		require.Greater(t, c.FinalState.Progress, int64(1))
		require.GreaterOrEqual(t, c.FinalState.ProcsKilled, 3)
	})

	t.Run("fd leak", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		src := `
import os, time
leaked = []
print("leaking", flush=True)
while len(leaked) < 900:
    for _ in range(20):
        leaked.append(os.open("/dev/null", os.O_RDONLY))
    time.sleep(0.05)
while True:
    time.sleep(1)
`
		hkRun(t, nil, "supervise", "--id", "fdleak", "--max-fds", "200", "--sample-interval", "100ms",
			"--coop-grace", "300ms", "--term-grace", "300ms", "--certs-dir", dir, "--", python(t), agent(t, dir, src))
		c := readCert(t, dir)
		require.Equal(t, "fds", c.TriggerCheck)
		require.Regexp(t, `^open file descriptors \d+ over kill threshold 200$`, c.TriggerReason)
		n, err := strconv.Atoi(c.SymptomsLog[len(c.SymptomsLog)-1].Observed)
		require.NoError(t, err)
		require.Greater(t, n, 200)
	})
}

// A kill -9 by someone else is a death worth a
// certificate: trigger_type external, naming SIGKILL; status 137.
func TestContainmentForeignKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := hkStart(t, nil, "supervise", "--id", "victim", "--certs-dir", dir, "--", python(t), agent(t, dir, `
import os, time
print("pid %d" % os.getpid(), flush=True)
time.sleep(60)
`))
	pid, _ := strconv.Atoi(h.expect(t, `^pid (\d+)$`)[1])
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	r := h.wait(t)
	require.Equal(t, 137, r.code)
	c := readCert(t, dir)
	require.Equal(t, certs.TriggerExternal, c.TriggerType)
	require.Equal(t, certs.TriggerExternal, c.TriggerCheck)
	require.Contains(t, c.TriggerReason, "SIGKILL")
	require.Equal(t, "SIGKILL", *c.Exit.Signal)
	require.Equal(t, certs.ReachedNone, c.Escalation.Reached)
	require.Empty(t, c.ShutdownLog, "hermeskilld sent nothing")
	require.Regexp(t, `hermeskilld: agent victim died by SIGKILL, which hermeskilld did not send.*; certificate: `+regexpQuote(dir), r.stderr)
}

// Fail closed: when supervise dies by SIGKILL, its keeper kills the
// whole tree — the wedged main, the SIGSTOPped child and the escapee in a
// session of its own — within the bound, in both containment modes; the
// agent's cgroup is removed.
func TestContainmentSupervisorKilled(t *testing.T) {
	for _, mode := range containmentModes(t) {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			m := marker(t)
			h := hkStart(t, nil, "supervise", "--id", "orphaned", "--containment", mode, "--certs-dir", dir, "--",
				python(t), agent(t, dir, escapeAgent), m)
			pids := h.expect(t, treeLine.String())
			var tree []int
			for _, s := range pids[1:] {
				pid, _ := strconv.Atoi(s)
				killAtEnd(t, pid)
				tree = append(tree, pid)
			}
			hkPID := h.cmd.Process.Pid
			t.Cleanup(func() { os.RemoveAll(socketDirOf("orphaned", hkPID)) })
			groups, err := filepath.Glob(fmt.Sprintf("/sys/fs/cgroup/unified/hermeskill/orphaned.%d-*", hkPID))
			require.NoError(t, err)

			require.NoError(t, h.cmd.Process.Signal(syscall.SIGKILL))
			_ = h.cmd.Wait()
			killed := time.Now()
			require.Eventually(t, func() bool {
				for _, pid := range tree {
					if pidAlive(pid) {
						return false
					}
				}
				return true
			}, failClosedBound, 5*time.Millisecond, "agent processes outlived their SIGKILLed hermeskilld")
			t.Logf("tree gone %s after the SIGKILL", time.Since(killed).Round(time.Millisecond))
			for _, g := range groups {
				require.Eventually(t, func() bool { _, err := os.Stat(g); return err != nil }, failClosedBound, 5*time.Millisecond,
					"the agent's cgroup %s was not removed", g)
			}
			requireNoSurvivors(t, m)
		})
	}
}

// failClosedBound bounds how long an agent process may outlive a
// SIGKILLed hermeskilld in the tests: the promise is a second, and the
// race detector's keeper starts slowly on a loaded machine.
const failClosedBound = 5 * time.Second

// The limit of the keeper: when hermeskilld and its keeper are SIGKILLed
// at once, the main process dies (parent-death signal) but the escapee
// lives on in the dead supervisor's cgroup, until the next hermeskilld
// start kills it and removes the cgroup.
//
// Not parallel: any hermeskilld starting meanwhile would clean the dead
// one's cgroup up, before this test has seen the escapee outlive it.
func TestContainmentSupervisorAndKeeperKilled(t *testing.T) {
	if !slices.Contains(containmentModes(t), "cgroup") {
		t.Skip("needs a writable cgroup v2 hierarchy: the next start's cleanup is by cgroup")
	}
	dir := t.TempDir()
	m := marker(t)
	h := hkStart(t, nil, "supervise", "--id", "orphaned", "--containment", "cgroup", "--certs-dir", dir, "--",
		python(t), agent(t, dir, escapeAgent), m)
	pids := h.expect(t, treeLine.String())
	mainPID, _ := strconv.Atoi(pids[1])
	stopped, _ := strconv.Atoi(pids[2])
	escapee, _ := strconv.Atoi(pids[3])
	for _, pid := range []int{mainPID, stopped, escapee} {
		killAtEnd(t, pid)
	}
	hkPID := h.cmd.Process.Pid
	t.Cleanup(func() { os.RemoveAll(socketDirOf("orphaned", hkPID)) }) // in case the test fails early
	var keeperPID int
	for pid := range childrenOf(hkPID) {
		if strings.Contains(string(mustRead(t, fmt.Sprintf("/proc/%d/cmdline", pid))), "keeper") {
			keeperPID = pid
		}
	}
	require.NotZero(t, keeperPID, "supervise runs a keeper")
	// <id>.<pid>-<start time>-<pidns>.<n>: named after its hermeskilld.
	groups, err := filepath.Glob(fmt.Sprintf("/sys/fs/cgroup/unified/hermeskill/orphaned.%d-*", hkPID))
	require.NoError(t, err)
	require.Len(t, groups, 1, "the agent's cgroup is named after its hermeskilld")
	group := groups[0]
	procs := string(mustRead(t, filepath.Join(group, "cgroup.procs")))
	require.Contains(t, procs, strconv.Itoa(escapee)+"\n", "the escapee is in the agent's cgroup")

	require.NoError(t, syscall.Kill(keeperPID, syscall.SIGKILL))
	require.NoError(t, h.cmd.Process.Signal(syscall.SIGKILL))
	_ = h.cmd.Wait()
	require.Eventually(t, func() bool { return !pidAlive(mainPID) }, 10*time.Second, 10*time.Millisecond,
		"the agent outlived its hermeskilld (PR_SET_PDEATHSIG)")
	require.True(t, pidAlive(escapee), "the escapee is no child of hermeskilld: only the cgroup holds it")
	require.DirExists(t, group)

	// The next start cleans up.
	next := t.TempDir()
	r := hkRun(t, nil, "supervise", "--id", "next", "--containment", "cgroup", "--certs-dir", next, "--", "true")
	require.Equal(t, 0, r.code)
	require.Eventually(t, func() bool { return !pidAlive(escapee) && !pidAlive(stopped) }, 10*time.Second, 10*time.Millisecond,
		"the stale cgroup's processes were not killed")
	_, err = os.Stat(group)
	require.ErrorIs(t, err, os.ErrNotExist, "the stale cgroup was not removed")
	_, err = os.Stat(socketDirOf("orphaned", hkPID))
	require.ErrorIs(t, err, os.ErrNotExist, "the killed hermeskilld's socket directory was not removed")
	requireNoSurvivors(t, m)
}

// socketDirOf is where `supervise` put the heartbeat socket of agent id
// when its pid was pid (heartbeat.SupervisorDir).
func socketDirOf(id string, pid int) string {
	base := "/run/hermeskill"
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
		base = filepath.Join(x, "hermeskill")
	}
	return filepath.Join(base, fmt.Sprintf("%s.%d", id, pid))
}

// Heartbeats from a short-lived `systemd-notify` are authenticated by
// cgroup membership: the shell agent lives, exits 0, no certificate.
func TestContainmentSystemdNotifyHeartbeats(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/bin/systemd-notify"); err != nil {
		t.Skip("systemd-notify is not installed (.ci/run installs the systemd package)")
	}
	dir := t.TempDir()
	r := hkRun(t, nil, "supervise", "--id", "notify", "--containment", "cgroup", "--heartbeat-timeout", "3s",
		"--certs-dir", dir, "--", "/bin/sh", "../../examples/agents/notify_agent.sh", "10")
	require.Equal(t, 0, r.code)
	noCert(t, dir)
	require.NotContains(t, r.stderr, "terminal symptom")
}
