// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const wedgedAgent = `
import os, signal, socket, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(b"READY=1", os.environ["NOTIFY_SOCKET"])
s.sendto(b"WATCHDOG=1", os.environ["NOTIFY_SOCKET"])
print("wedging now", file=sys.stderr, flush=True)
while True:
    pass
`

// The wedged agent dies through the whole ladder, exit 137,
// nothing left, a complete certificate, the one-line summary.
func TestSuperviseKillsWedgedAgent(t *testing.T) {
	dir := t.TempDir()
	m := marker(t)
	r := hk(t, "supervise", "--id", "wedged", "--heartbeat-timeout", "1s", "--coop-grace", "300ms",
		"--term-grace", "300ms", "--certs-dir", dir, "--", python(t), agent(t, dir, wedgedAgent), m)
	requireNoSurvivors(t, m)
	require.Equal(t, 137, r.code)
	require.Less(t, r.took, 20*time.Second, "generous bound; the figure is in the benchmark")
	c := cert(t, dir)
	require.Equal(t, "hermeskill.death-certificate.v1", c["schema"])
	require.Equal(t, "heartbeat_timeout", c["trigger_check"])
	require.Equal(t, "auto", c["trigger_type"])
	require.Equal(t, "sigkill", c["escalation"].(map[string]any)["reached"])
	require.Subset(t, steps(c), []string{"coop_signal_sent", "sigterm_sent", "sigkill_sent", "reaped"})
	require.Equal(t, "SIGKILL", c["exit"].(map[string]any)["signal"])
	require.Nil(t, c["exit"].(map[string]any)["code"])
	fs := c["final_state"].(map[string]any)
	require.EqualValues(t, 1, fs["heartbeats"])
	require.NotNil(t, fs["last_heartbeat_at"])
	require.GreaterOrEqual(t, fs["procs_killed"], 1.0)
	require.Contains(t, c["last_output"].(map[string]any)["stderr"], "wedging now")
	require.NotEmpty(t, c["process_tree"])
	require.Regexp(t, `hermeskilld: agent wedged killed \(heartbeat_timeout: no heartbeat for .*\); escalation reached sigkill after [0-9.]+s; certificate: `+regexpQuote(dir), r.stderr)
	require.NotContains(t, string(mustRead(t, filepath.Join(dir, mustGlob(t, dir)))), "PATH=", "the environment is never recorded")
}

// An agent that handles SIGINT by exiting 3 is stopped in
// the cooperative stage with its own status.
func TestSuperviseCooperativeStop(t *testing.T) {
	dir := t.TempDir()
	r := hk(t, "supervise", "--heartbeat-timeout", "500ms", "--coop-grace", "10s", "--term-grace", "5s",
		"--certs-dir", dir, "--", python(t), agent(t, dir, `
import os, socket, sys, time
socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"READY=1", os.environ["NOTIFY_SOCKET"])
try:
    time.sleep(60)
except KeyboardInterrupt:
    sys.exit(3)
`))
	require.Equal(t, 3, r.code)
	c := cert(t, dir)
	require.Equal(t, "cooperative", c["escalation"].(map[string]any)["reached"])
	require.EqualValues(t, 3, c["exit"].(map[string]any)["code"])
	require.Less(t, r.took, 9*time.Second, "left the 10s grace as soon as the agent exited")
}

// Agents that keep heartbeating — raw socket code, and
// systemd-notify from a shell agent — are never killed and their exit
// status is passed through.
func TestSuperviseHealthyAgentsLive(t *testing.T) {
	t.Run("raw socket", func(t *testing.T) {
		dir := t.TempDir()
		r := hk(t, "supervise", "--heartbeat-timeout", "1s", "--progress-timeout", "2s", "--certs-dir", dir, "--",
			python(t), "../../examples/agents/steady_agent.py", "--steps", "15", "--interval", "0.2", "--exit", "5")
		require.Equal(t, 5, r.code)
		noCert(t, dir)
	})
	t.Run("systemd-notify", func(t *testing.T) {
		if _, err := os.Stat("/bin/systemd-notify"); err != nil {
			t.Skip("systemd-notify is not installed (.ci/run installs the systemd package)")
		}
		dir := t.TempDir()
		r := hk(t, "supervise", "--heartbeat-timeout", "2s", "--certs-dir", dir, "--",
			"/bin/sh", "../../examples/agents/notify_agent.sh", "8")
		require.Equal(t, 0, r.code)
		noCert(t, dir)
	})
}

// SIGTERM to hermeskilld runs the ladder and leaves a manual
// certificate naming the signal; a second Ctrl-C goes straight to SIGKILL.
func TestSuperviseSignalToSupervisor(t *testing.T) {
	for _, tc := range []struct {
		name      string
		signals   []syscall.Signal
		termGrace string
	}{
		{"SIGTERM", []syscall.Signal{syscall.SIGTERM}, "300ms"},
		{"second Ctrl-C", []syscall.Signal{syscall.SIGINT, syscall.SIGINT}, "60s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			m := marker(t)
			cmd := hkCmd(t, "supervise", "--coop-grace", "300ms", "--term-grace", tc.termGrace, "--certs-dir", dir, "--",
				python(t), agent(t, dir, `
import os, signal, socket, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"READY=1", os.environ["NOTIFY_SOCKET"])
print("ready", flush=True)
while True:
    time.sleep(1)
`), m)
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			errp, err := cmd.StderrPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			line, _ := bufio.NewReader(out).ReadString('\n')
			require.Equal(t, "ready\n", line, "the agent's stdout is passed through")
			logs := bufio.NewScanner(errp)
			began := time.Now()
			require.NoError(t, cmd.Process.Signal(tc.signals[0]))
			if len(tc.signals) > 1 {
				// Standard signals do not queue: wait until the first was
				// acted on (the ladder has begun) before the second.
				for logs.Scan() && !strings.Contains(logs.Text(), "coop_signal_sent") {
				}
				require.NoError(t, cmd.Process.Signal(tc.signals[1]))
			}
			go func() {
				for logs.Scan() {
				}
			}()
			_ = cmd.Wait()
			requireNoSurvivors(t, m)
			require.Equal(t, 137, cmd.ProcessState.ExitCode())
			require.Less(t, time.Since(began), 30*time.Second, "no 60s grace was waited")
			c := cert(t, dir)
			require.Equal(t, "manual", c["trigger_type"])
			require.Equal(t, "manual", c["trigger_check"])
			require.Equal(t, "signal:"+unixSignalName(tc.signals[0]), c["operator"])
			require.Equal(t, "sigkill", c["escalation"].(map[string]any)["reached"])
		})
	}
}

// A grandchild left behind when the main process exits is
// killed and reaped; no zombie remains.
func TestSuperviseKillsLeftovers(t *testing.T) {
	dir := t.TempDir()
	m := marker(t)
	r := hk(t, "supervise", "--term-grace", "300ms", "--certs-dir", dir, "--", python(t), agent(t, dir, `
import os, subprocess, sys
# a grandchild in its own session that ignores SIGTERM, then the main exits 0
subprocess.Popen([sys.executable, "-c", "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: time.sleep(1)", sys.argv[1]], start_new_session=True)
sys.exit(0)
`), m)
	require.Equal(t, 0, r.code, "the agent's own status")
	requireNoSurvivors(t, m)
	require.Contains(t, r.stderr, "stopping what it left behind")
	noCert(t, dir)
}

// Datagrams from a process outside the agent's tree are
// not heartbeats: the agent still dies of heartbeat_timeout.
func TestSuperviseIgnoresForeignHeartbeats(t *testing.T) {
	dir := t.TempDir()
	cmd := hkCmd(t, "supervise", "--heartbeat-timeout", "1s", "--coop-grace", "100ms", "--term-grace", "100ms",
		"--certs-dir", dir, "--", python(t), agent(t, dir, `
import os, socket, time
socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"READY=1", os.environ["NOTIFY_SOCKET"])
print(os.environ["HERMESKILL_SOCKET"], flush=True)
time.sleep(60)
`))
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	path, _ := bufio.NewReader(out).ReadString('\n')
	path = strings.TrimSpace(path)
	require.NotEmpty(t, path)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	di, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), di.Mode().Perm())

	// This test process is root, so only tree membership can stop it.
	conn, err := net.Dial("unixgram", path)
	require.NoError(t, err)
	defer conn.Close()
	stop := make(chan struct{})
	beats := make(chan int)
	go func() {
		n := 0
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				beats <- n
				return
			case <-tick.C:
				if _, err := conn.Write([]byte("WATCHDOG=1")); err == nil {
					n++
				}
			}
		}
	}()
	_ = cmd.Wait()
	close(stop)
	require.Greater(t, <-beats, 5, "the forger sent heartbeats while the agent lived")
	c := cert(t, dir)
	require.Equal(t, "heartbeat_timeout", c["trigger_check"])
	require.EqualValues(t, 0, c["final_state"].(map[string]any)["heartbeats"], "no forged heartbeat was counted")
}

// A command that does not exist exits 127 with a clear
// message; bad flags exit 125.
func TestSuperviseStartFailures(t *testing.T) {
	r := hk(t, "supervise", "--certs-dir", t.TempDir(), "--", "/nonexistent")
	require.Equal(t, 127, r.code)
	require.Contains(t, r.stderr, "/nonexistent")
	require.Contains(t, r.stderr, "no such file or directory")

	r = hk(t, "supervise", "--", "no-such-agent-command")
	require.Equal(t, 127, r.code)
	require.Contains(t, r.stderr, "no-such-agent-command: command not found")

	r = hk(t, "supervise", "--", "/etc/hostname")
	require.Equal(t, 126, r.code)

	r = hk(t, "supervise", "--heartbeat-timeout", "soon", "--", "true")
	require.Equal(t, 125, r.code)
	require.Contains(t, r.stderr, "--heartbeat-timeout")

	r = hk(t, "supervise", "--max-cost-rate", "0.50", "--", "true")
	require.Equal(t, 125, r.code)
	require.Contains(t, r.stderr, "--max-cost-rate")
	require.Contains(t, r.stderr, "want AMOUNT/DURATION such as 0.50/1m")

	r = hk(t, "supervise", "--max-requests-rate", "30/10ms", "--", "true")
	require.Equal(t, 125, r.code)
	require.Contains(t, r.stderr, "checks.requests_rate.per: must be at least 1s, got 10ms")

	r = hk(t, "supervise", "--no-such-flag", "--", "true")
	require.Equal(t, 125, r.code)

	r = hk(t, "supervise")
	require.Equal(t, 125, r.code)

	r = hk(t, "supervise", "--coop-signal", "SIGNOPE", "--", "true")
	require.Equal(t, 125, r.code)
}

func TestVersionAndHelp(t *testing.T) {
	r := hk(t, "version")
	require.Equal(t, 0, r.code)
	require.True(t, strings.HasPrefix(r.stdout, "hermeskilld "))
	r = hk(t, "supervise", "--help")
	require.Equal(t, 0, r.code)
	for _, flag := range []string{"--heartbeat-timeout", "--coop-grace", "--term-grace", "--certs-dir", "--shadow", "Exit status"} {
		require.Contains(t, r.stdout, flag)
	}
}

// A flood of datagrams is dropped and counted past the rate limit and
// never delays the heartbeat deadline.
func TestSuperviseFloodDoesNotDelayDeadline(t *testing.T) {
	dir := t.TempDir()
	r := hk(t, "supervise", "--heartbeat-timeout", "1s", "--coop-grace", "100ms", "--term-grace", "100ms",
		"--certs-dir", dir, "--", python(t), agent(t, dir, `
import os, socket, threading
a = os.environ["HERMESKILL_SOCKET"]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(b"READY=1", a)
def flood():
    f = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    while True:
        try:
            f.sendto(b"STATUS=flooding", a)
        except OSError:
            pass
for _ in range(2):
    threading.Thread(target=flood, daemon=True).start()
threading.Event().wait()
`))
	require.NotEqual(t, 0, r.code)
	c := cert(t, dir)
	require.Equal(t, "heartbeat_timeout", c["trigger_check"])
	trig, err := time.Parse(time.RFC3339Nano, c["triggered_at"].(string))
	require.NoError(t, err)
	last, err := time.Parse(time.RFC3339Nano, c["final_state"].(map[string]any)["last_heartbeat_at"].(string))
	require.NoError(t, err)
	late := trig.Sub(last) - time.Second
	require.GreaterOrEqual(t, late, time.Duration(0))
	require.Less(t, late, 500*time.Millisecond, "the flood delayed the deadline by %s", late)
}
