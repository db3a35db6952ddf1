// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/landlock"
	"github.com/hermeskill/hermeskilld/internal/testnobody"
)

// supervisorAttackAgent, as supervise's own user, tries to stop, kill and
// trace supervise and its keeper: SIGSTOP, SIGKILL, PTRACE_SEIZE (which
// would not stop the tracee), opening /proc/PID/mem. It SIGKILLs a child
// of its own, prints one line, and then ignores SIGINT and SIGTERM.
const supervisorAttackAgent = `
import ctypes, errno, os, signal, subprocess, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
libc = ctypes.CDLL(None, use_errno=True)

def name(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]

def ptrace(pid):
    if libc.ptrace(ctypes.c_long(0x4206), ctypes.c_int(pid), None, None) == 0:  # PTRACE_SEIZE
        return "ok"
    return errno.errorcode[ctypes.get_errno()]

def keeper(pid):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            return b"\0keeper\0--for\0%d\0" % os.getppid() in f.read()
    except OSError:
        return False

sup = os.getppid()
targets = [("supervise", sup)] + [("keeper", int(p)) for p in os.listdir("/proc") if p.isdigit() and keeper(p)]
out = []
for who, pid in targets:
    out.append("%s: stop=%s kill=%s ptrace=%s mem=%s" % (who,
        name(lambda: os.kill(pid, signal.SIGSTOP)), name(lambda: os.kill(pid, signal.SIGKILL)),
        ptrace(pid), name(lambda: open("/proc/%d/mem" % pid, "rb").close())))
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
os.kill(child.pid, signal.SIGKILL)
out.append("own child: %d" % child.wait())
print("; ".join(out), flush=True)
while True:
    time.sleep(1)
`

// An agent of supervise's own user — root, or another — cannot stop,
// kill or trace supervise or its keeper: its signals are scoped to its own
// Landlock domain, and the ptrace(2) checks behind /proc/PID/mem refuse a
// process outside it too. Its own child it kills as ever, and supervise's
// ladder still reaches it: a SIGTERM to supervise ends in the SIGKILL of
// the agent, which ignores the gentler signals.
func TestAgentCannotTouchItsSupervisor(t *testing.T) {
	if abi := landlock.ABI(); abi < landlock.SignalsABI {
		t.Skipf("the kernel's Landlock ABI is %d (0: none): signal scoping needs %d", abi, landlock.SignalsABI)
	}
	for _, as := range []string{"root", "nobody"} {
		t.Run(as, func(t *testing.T) {
			bin, home := os.Args[0], t.TempDir()
			if as == "nobody" {
				bin, _, home = nobodySupervise(t)
			}
			script := filepath.Join(home, "agent.py")
			require.NoError(t, os.WriteFile(script, []byte(supervisorAttackAgent), 0o644))
			certsDir := filepath.Join(home, "certs")
			cmd := command(t, []string{"XDG_RUNTIME_DIR=" + home}, bin, "supervise", "--id", "reach-"+as,
				"--containment", "pgroup", "--heartbeat-timeout", "0s", "--coop-grace", "100ms", "--term-grace", "100ms",
				"--certs-dir", certsDir, "--", python(t), script)
			cmd.Dir = home
			if as == "nobody" {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: testnobody.Credential()}
			}
			h := startCmd(t, cmd)
			got := h.expect(t, `supervise: .*`)
			refused := "stop=EPERM kill=EPERM ptrace=EPERM mem=EACCES"
			require.Equal(t, "supervise: "+refused+"; keeper: "+refused+"; own child: -9", got[0], h.stderr.String())

			require.NoError(t, h.cmd.Process.Signal(syscall.SIGTERM))
			r := h.wait(t)
			require.Equal(t, 128+int(syscall.SIGKILL), r.code, r.stderr)
			c := readCert(t, certsDir)
			require.Equal(t, "sigkill", c.Escalation.Reached)
			require.Equal(t, "signals", c.Confinement)
		})
	}
}
