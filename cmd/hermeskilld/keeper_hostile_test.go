// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/landlock"
	"github.com/hermeskill/hermeskilld/internal/testnobody"
)

// keeperAttackAgent attacks supervise's keeper from inside the agent, as
// the same user: it leaves an escapee in a session of its own (the keeper
// must kill it should supervise die), then, by argv[2],
//   - proc-fd: opens every descriptor of supervise and of the keeper it
//     can through /proc/PID/fd and writes a disarm and an "end 1" into
//     each (the keeper's pipe among them, were they open to it);
//   - stop: SIGSTOPs the keeper, which then could kill nothing (refused
//     where the agent's signals are scoped by Landlock: counted in
//     "refused").
const keeperAttackAgent = `
import os, signal, sys, time
marker, attack = sys.argv[1], sys.argv[2]
SLEEP = "import time\nwhile True:\n    time.sleep(1)\n"
REPORT = "import os, sys\nfd = int(sys.argv[3])\nos.write(fd, b'%d\\n' % os.getpid())\nos.close(fd)\n"
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.set_inheritable(w, True)
        os.execv(sys.executable, [sys.executable, "-c", REPORT + SLEEP, marker, "escapee", str(w)])
    os._exit(0)
os.close(w)
escapee = int(os.fdopen(r).readline())

def ppid(pid):
    try:
        with open("/proc/%s/stat" % pid) as f:
            return int(f.read().rpartition(")")[2].split()[1])
    except OSError:
        return 0

def keeper(pid):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            return b"\0keeper\0--for\0" in f.read()
    except OSError:
        return False

sup = os.getppid()
keepers = [int(p) for p in os.listdir("/proc") if p.isdigit() and ppid(p) == sup and keeper(p)]
opened = refused = 0
if attack == "proc-fd":
    for pid in [sup] + keepers:
        try:
            fds = os.listdir("/proc/%d/fd" % pid)
        except OSError:
            continue
        for fd in fds:
            try:
                f = os.open("/proc/%d/fd/%s" % (pid, fd), os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                os.write(f, b"disarm\nend 1\n")
                opened += 1
            except OSError:
                pass
            os.close(f)
elif attack == "stop":
    for k in keepers:
        try:
            os.kill(k, signal.SIGSTOP)
        except PermissionError:
            refused += 1
print("attacked keepers=%d opened=%d refused=%d escapee=%d" % (len(keepers), opened, refused, escapee), flush=True)
while True:
    time.sleep(1)
`

// An agent of supervise's own user cannot disarm the keeper: not through
// /proc/PID/fd (hermeskilld and the keeper are not dumpable, and every
// line to the keeper carries a key only hermeskilld knows), and not by
// stopping it (a stopped keeper is replaced). After the attack, a SIGKILL
// of supervise still kills the agent's escapee.
func TestKeeperCannotBeDisarmedByItsAgent(t *testing.T) {
	bin, dir, home := nobodySupervise(t)
	script := filepath.Join(dir, "agent.py")
	require.NoError(t, os.WriteFile(script, []byte(keeperAttackAgent), 0o644))
	scoped := landlock.ABI() >= landlock.SignalsABI
	for _, attack := range []string{"proc-fd", "stop"} {
		t.Run(attack, func(t *testing.T) {
			m := marker(t)
			cmd := command(t, []string{"XDG_RUNTIME_DIR=" + home}, bin, "supervise", "--id", "hostile-"+attack,
				"--containment", "pgroup", "--heartbeat-timeout", "0s", "--certs-dir", filepath.Join(home, "certs"), "--",
				python(t), script, m, attack)
			cmd.Dir = home
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: testnobody.Credential()}
			h := startCmd(t, cmd)
			got := h.expect(t, `attacked keepers=(\d+) opened=(\d+) refused=(\d+) escapee=(\d+)`)
			escapee, _ := strconv.Atoi(got[4])
			killAtEnd(t, escapee)
			require.Equal(t, "1", got[1], "the agent found supervise's keeper")
			require.Equal(t, "0", got[2], "no descriptor of supervise or its keeper opened through /proc")
			// Longer than the stopped keeper's check and its restart.
			time.Sleep(1500 * time.Millisecond)
			require.True(t, pidAlive(escapee))
			require.NoError(t, h.cmd.Process.Signal(syscall.SIGKILL))
			_ = h.cmd.Wait()
			require.Eventually(t, func() bool { return !pidAlive(escapee) }, failClosedBound, 5*time.Millisecond,
				"the escapee outlived its SIGKILLed supervise after the %s attack; stderr:\n%s", attack, h.stderr.String())
			if attack == "stop" && scoped {
				require.Equal(t, "1", got[3], "the SIGSTOP of the keeper is refused")
				require.NotContains(t, h.stderr.String(), "the keeper was stopped")
			} else if attack == "stop" {
				require.Contains(t, h.stderr.String(), "the keeper was stopped")
			}
			requireNoSurvivors(t, m)
		})
	}
}

// HERMESKILL_KEEPER=1 in the environment (inherited, or set by mistake)
// does not turn supervise into a keeper that never runs the command: it
// is removed, and supervise runs the agent, whose environment lacks it.
func TestKeeperVariableAloneMakesNoKeeper(t *testing.T) {
	dir := t.TempDir()
	r := hkRun(t, []string{"HERMESKILL_KEEPER=1"}, "supervise", "--heartbeat-timeout", "0s", "--certs-dir", dir, "--",
		"/bin/sh", "-c", `echo "ran keeper=${HERMESKILL_KEEPER:-unset}"`)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "ran keeper=unset\n", r.stdout)
}
