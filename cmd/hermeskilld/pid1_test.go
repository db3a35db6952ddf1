// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
)

// pid1Agent makes five orphans: each child forks a grandchild and exits at
// once; the grandchild waits until it has been reparented to PID 1 (that
// is hermeskilld), reports and exits, leaving a zombie that only PID 1 can
// reap. Then the agent says READY and sleeps; SIGINT (the cooperative
// signal) makes it exit 3.
const pid1Agent = `
import os, signal, socket, sys, time
r, w = os.pipe()
for _ in range(5):
    child = os.fork()
    if child == 0:
        if os.fork() == 0:
            while os.getppid() != 1:
                time.sleep(0.005)
            os.write(w, b"%d " % os.getpid())
            os._exit(0)
        os._exit(0)
    os.waitpid(child, 0)
os.close(w)
with os.fdopen(r) as f:
    orphans = f.read().split()   # EOF: every orphan has exited
print("agent: pid %d, orphans %s reparented to pid 1 and exited" % (os.getpid(), " ".join(orphans)), flush=True)
socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"READY=1", os.environ["NOTIFY_SOCKET"])
try:
    time.sleep(60)
except KeyboardInterrupt:
    print("agent: interrupted", flush=True)
    sys.exit(3)
`

// Hermeskilld as PID 1 of a new PID namespace (the
// container entrypoint case) reaps the zombies of orphans reparented to
// it, and SIGTERM to it runs the ladder, leaving a manual certificate.
//
// Containment is pgroup on purpose. Without a cgroup namespace of its own
// a hermeskilld in a PID namespace shares the host's agent cgroups, whose
// names carry owners' pids in the host's namespace: its stale-cgroup
// cleanup at start cannot find those owners in its /proc and kills the
// agents of every other hermeskilld running (the parallel tests'), and
// the host's hermeskillds take its own cgroups (owner pid 1) for stale.
func TestPID1InNamespace(t *testing.T) {
	t.Parallel()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare(1) (util-linux) is not installed: no way to start a PID namespace")
	}
	dir := t.TempDir()
	// --kill-child: should the test fail half way, killing unshare takes
	// the whole namespace down with it.
	h := startArgv(t, nil, unshare, "--pid", "--fork", "--kill-child", "--mount-proc", os.Args[0],
		"supervise", "--id", "pid1", "--containment", "pgroup", "--coop-grace", "10s", "--term-grace", "2s",
		"--certs-dir", dir, "--", python(t), agent(t, dir, pid1Agent))

	// unshare --fork has one child: hermeskilld, PID 1 inside.
	var hkPID int
	require.Eventually(t, func() bool {
		kids := childrenOf(h.cmd.Process.Pid)
		for pid := range kids {
			hkPID = pid
		}
		return len(kids) == 1
	}, 10*time.Second, 5*time.Millisecond, "unshare did not fork")
	nspid := h.expect(t, `^agent: pid (\d+), orphans ([\d ]+) reparented to pid 1 and exited$`)
	require.Len(t, strings.Fields(nspid[2]), 5)
	require.Equal(t, []string{strconv.Itoa(hkPID), "1"}, nsPIDs(t, hkPID), "hermeskilld is PID 1 of its namespace")

	// The orphans have exited; none may linger as a zombie of PID 1.
	require.Eventually(t, func() bool {
		for _, st := range childrenOf(hkPID) {
			if st == 'Z' {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "zombies of reparented orphans were not reaped: %v", childrenOf(hkPID))
	require.Len(t, childrenOf(hkPID), 1, "only the agent is left under hermeskilld")

	require.NoError(t, syscall.Kill(hkPID, syscall.SIGTERM))
	r := h.wait(t)
	require.Equal(t, 3, r.code, "the agent's own status, passed on by hermeskilld and unshare")
	require.Contains(t, r.stdout, "agent: interrupted")
	c := readCert(t, dir)
	require.Equal(t, certs.TriggerManual, c.TriggerType)
	require.Equal(t, "manual", c.TriggerCheck)
	require.Equal(t, "signal:SIGTERM", *c.Operator)
	require.Equal(t, certs.ReachedCooperative, c.Escalation.Reached)
	require.Equal(t, "coop_signal_sent", stepNames(c)[0])
	require.Equal(t, nspid[1], strconv.Itoa(c.PID), "pids are the namespace's")
}

// nsPIDs is the NSpid line of /proc/PID/status: the pid in each PID
// namespace, outermost first.
func nsPIDs(t *testing.T, pid int) []string {
	t.Helper()
	for _, line := range strings.Split(string(mustRead(t, "/proc/"+strconv.Itoa(pid)+"/status")), "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			return strings.Fields(v)
		}
	}
	require.FailNow(t, "no NSpid in /proc/PID/status")
	return nil
}
