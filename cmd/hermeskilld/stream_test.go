// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/testnobody"
)

// streamAgent speaks the stream socket with the standard library alone,
// as a client in a runtime without datagram sockets would: KEY=VALUE
// lines, each message ended by an empty line, on $HERMESKILL_STREAM_SOCKET.
// It sends READY=1, then WATCHDOG=1 every 100ms ("beat"), or three times
// and then no more ("stall"). A STOP=1 that comes back on the connection
// is answered with STOPPING=1; the agent then saves its work (300ms,
// which a SIGINT would cut short) and exits 3.
const streamAgent = `
import os, socket, sys, time
mode = sys.argv[1]
path = os.environ["HERMESKILL_STREAM_SOCKET"]
print("stream", path, os.getuid(), flush=True)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(path)
def send(m):
    s.sendall((m + "\n\n").encode())
send("READY=1\nSTATUS=streaming")
s.settimeout(0.1)
buf, beats = b"", 0
while True:
    if mode == "beat" or beats < 3:
        send("WATCHDOG=1")
        beats += 1
    try:
        data = s.recv(4096)
        if not data:
            sys.exit(9)
        buf += data
    except socket.timeout:
        pass
    while b"\n\n" in buf:
        msg, buf = buf.split(b"\n\n", 1)
        lines = msg.decode().split("\n")
        print("directive", "|".join(lines), flush=True)
        if "STOP=1" in lines:
            send("STOPPING=1")
            time.sleep(0.3)
            print("saved", flush=True)
            sys.exit(3)
`

// requireAcknowledgedStop checks the certificate of a stop the agent's
// stream connection acknowledged: the cooperative signal was withheld.
func requireAcknowledgedStop(t *testing.T, c *certs.Certificate) {
	t.Helper()
	d := step(t, c, "directive_sent")
	require.Equal(t, true, d.Detail["acknowledged"], "%v", d)
	require.Equal(t, "SIGINT", d.Detail["withheld"])
	require.NotContains(t, stepNames(c), "coop_signal_sent")
	require.Equal(t, "cooperative", string(c.Escalation.Reached))
}

// supervise gives the agent HERMESKILL_STREAM_SOCKET; its beats on the
// connection keep it alive past --heartbeat-timeout; the stop comes back
// on the connection as STOP=1, the agent's STOPPING=1 acknowledges it and
// the cooperative signal is withheld.
func TestStreamSocketSupervise(t *testing.T) {
	dir := t.TempDir()
	src := agent(t, dir, streamAgent)
	r := hkRun(t, nil, "supervise", "--id", "streamer", "--heartbeat-timeout", "1s", "--max-runtime", "2s",
		"--coop-grace", "10s", "--term-grace", "1s", "--certs-dir", dir, "--", python(t), src, "beat")
	require.Equal(t, 3, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Regexp(t, `(?m)^stream /\S+/streamer\.\d+/stream\.sock 0$`, r.stdout)
	require.Contains(t, r.stdout, "directive STOP=1|CHECK=max_runtime|")
	require.Contains(t, r.stdout, "saved")
	c := readCert(t, dir)
	require.Equal(t, "max_runtime", c.TriggerCheck, "the beats on the stream kept it alive")
	requireAcknowledgedStop(t, c)
}

// An agent that stops beating on its stream connection dies of
// heartbeat_timeout.
func TestStreamSocketHeartbeatTimeout(t *testing.T) {
	dir := t.TempDir()
	src := agent(t, dir, streamAgent)
	r := hkRun(t, nil, "supervise", "--id", "staller", "--heartbeat-timeout", "1s", "--max-runtime", "20s",
		"--coop-grace", "10s", "--term-grace", "1s", "--certs-dir", dir, "--", python(t), src, "stall")
	require.Equal(t, 3, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	c := readCert(t, dir)
	require.Equal(t, "heartbeat_timeout", c.TriggerCheck)
	require.Contains(t, r.stdout, "directive STOP=1|CHECK=heartbeat_timeout|")
	requireAcknowledgedStop(t, c)
	require.Less(t, r.took, 15*time.Second, "killed at the heartbeat timeout, not at max_runtime")
}

// An agent run as another user (user: in its file) reaches its stream
// socket, owned by that user, and is stopped through it.
func TestStreamSocketSuperviseUser(t *testing.T) {
	nobody := nobodyUser(t)
	dir := testnobody.Dir(t)
	script := agent(t, dir, streamAgent)
	require.NoError(t, os.Chmod(script, 0o644))
	cfg := writeTestFile(t, dir, "agent.yaml", "user: "+nobody+"\nchecks: {heartbeat_timeout: 1s, max_runtime: 2s}\n")
	certsDir := filepath.Join(shortTemp(t), "certs")
	t.Setenv("XDG_RUNTIME_DIR", dir) // a runtime directory uid 65534 can reach
	r := hk(t, "supervise", "--config", cfg, "--coop-grace", "10s", "--term-grace", "1s", "--certs-dir", certsDir,
		"--", python(t), script, "beat")
	require.Equal(t, 3, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Regexp(t, fmt.Sprintf(`(?m)^stream %s/hermeskill/supervise-as-user/\S+/stream\.sock %d$`, dir, testnobody.UID), r.stdout)
	c := readCert(t, certsDir)
	require.Equal(t, "max_runtime", c.TriggerCheck)
	requireAcknowledgedStop(t, c)
}

// Under the daemon, whose datagram sockets share one poller, the stream
// socket works alike: beats keep the agent alive, and its stop is
// acknowledged on the connection.
func TestStreamSocketDaemon(t *testing.T) {
	m := marker(t)
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	d := startDaemon(t, "")
	src := agent(t, t.TempDir(), streamAgent)
	d.writeAgent("streamer", fmt.Sprintf(`id: streamer
command: [%s, %s, beat, %q]
escalation: {coop_grace: 10s, term_grace: 1s}
checks: {heartbeat_timeout: 1s, max_runtime: 2s}
`, python(t), src, m))
	// While it runs, its status names the socket and counts the connection.
	require.Eventually(t, func() bool {
		var st control.AgentStatus
		r := d.ctl("status", "streamer", "--json")
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &st) == nil && st.Run != nil &&
			st.Run.StreamSocket == filepath.Join(d.root, "run", "agents", "streamer", "stream.sock") &&
			st.Run.Messages.StreamAccepted >= 1 && st.Run.Messages.Accepted >= 2
	}, 30*time.Second, 50*time.Millisecond, "status never counted the stream connection")
	var first map[string]any
	require.Eventually(t, func() bool {
		cs := d.certs()
		if len(cs) > 0 {
			first = cs[0]
		}
		return first != nil
	}, 30*time.Second, 50*time.Millisecond, "no certificate; log:\n%s", d.logText())
	require.Equal(t, "max_runtime", first["trigger_check"], "the beats on the stream kept it alive")
	var directive map[string]any
	for _, s := range first["shutdown_log"].([]any) {
		if s := s.(map[string]any); s["step"] == "directive_sent" {
			directive = s["detail"].(map[string]any)
		}
	}
	require.NotNil(t, directive, "no directive_sent in %v", steps(first))
	require.Equal(t, true, directive["acknowledged"], "%v", directive)
	require.NotContains(t, steps(first), "coop_signal_sent")
	require.Contains(t, d.logText(), `"client": "stream:1"`, "the acknowledgement came from the stream connection")
}
