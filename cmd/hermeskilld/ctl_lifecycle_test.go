// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/control"
)

// stop, start and restart against a fake daemon: what they print, --json,
// the exit statuses, and what never reaches the daemon.
func TestCtlStopStartRestart(t *testing.T) {
	b := fleet(time.Now())
	sock := serveFake(t, b, control.ServerOptions{})

	for _, args := range [][]string{{"stop"}, {"stop", "a", "b"}, {"start"}, {"restart", "a", "b"}} {
		r := ctlRun(t, append(args, "--control-socket", sock)...)
		assert.Equal(t, exitUsage, r.code, args)
		assert.Contains(t, r.stderr, "agent", args)
	}
	assert.Empty(t, b.Calls(), "bad invocations never reach the daemon")

	r := ctlRun(t, "stop", "ops-bot", "--reason", "maintenance", "--control-socket", sock)
	require.Equal(t, 0, r.code, r.stderr)
	me := control.CallerName(os.Getuid())
	assert.Equal(t, "agent ops-bot stopped; escalation reached sigterm; certificate: /certs/ops-bot.json; now exited (stopped by "+me+")\n", r.stdout)
	assert.Equal(t, control.StateExited, b.Agent("ops-bot").State)

	r = ctlRun(t, "stop", "ops-bot", "--control-socket", sock)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "agent ops-bot is not running")
	r = ctlRun(t, "stop", "nope", "--control-socket", sock)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "no such agent: nope")

	r = ctlRun(t, "start", "ops-bot", "--control-socket", sock)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `^agent ops-bot started, pid \d+\n$`, r.stdout)
	r = ctlRun(t, "start", "loopy", "--control-socket", sock)
	assert.Equal(t, exitFailure, r.code, "quarantined: start is not release")

	r = ctlRun(t, "restart", "ops-bot", "--json", "--control-socket", sock)
	require.Equal(t, 0, r.code, r.stderr)
	var res control.ActionResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	assert.True(t, res.Stopped)
	assert.Equal(t, control.StateRunning, res.State)
	assert.NotZero(t, res.PID)
	r = ctlRun(t, "restart", "ops-bot", "--control-socket", sock)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `^agent ops-bot stopped \(escalation reached sigterm; certificate: /certs/ops-bot.json\) and started again, pid \d+\n$`, r.stdout)

	r = ctlRun(t, "stop", "ops-bot", "--no-wait", "--json", "--control-socket", sock)
	require.Equal(t, 0, r.code, r.stderr)
	var stopped control.ActionResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &stopped))
	assert.Equal(t, control.ActionResult{ID: "ops-bot", Stopped: true, State: control.StateExited, Note: "stopped by " + me}, stopped)
	assert.NotContains(t, r.stdout, "0001-01-01", "no zero time")

	r = ctlRun(t, "start", "ops-bot", "--json", "--control-socket", sock)
	require.Equal(t, 0, r.code, r.stderr)
	var started control.ActionResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &started))
	assert.NotZero(t, started.PID)

	assert.Equal(t, []string{
		"audit POST /v1/stop", "stop", "audit POST /v1/stop", "stop", "audit POST /v1/stop", "stop",
		"audit POST /v1/start", "start", "audit POST /v1/start", "start",
		"audit POST /v1/restart", "restart", "audit POST /v1/restart", "restart",
		"audit POST /v1/stop", "stop", "audit POST /v1/start", "start",
	}, b.Calls())
}

// kill, estop and release --json print the daemon's answer as it is.
func TestCtlKillEstopReleaseJSON(t *testing.T) {
	b := fleet(time.Now())
	sock := serveFake(t, b, control.ServerOptions{})

	r := ctlRun(t, "kill", "research-bot", "--reason", "x", "--json", "--control-socket", sock)
	require.Equal(t, 0, r.code, r.stderr)
	var kills []control.KillResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &kills))
	assert.Equal(t, []control.KillResult{{ID: "research-bot", Reached: "sigterm", Certificate: "/certs/research-bot.json"}}, kills)

	r = ctlRun(t, "kill", "--selector", "team=nobody", "--reason", "x", "--json", "--control-socket", sock)
	assert.Equal(t, exitFailure, r.code, "nothing matched is still a failure")
	assert.Equal(t, "[]\n", r.stdout)
	assert.Empty(t, r.stderr)

	r = ctlRun(t, "estop", "--reason", "drill", "--json", "--control-socket", sock)
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &kills))
	assert.Equal(t, []control.KillResult{{ID: "ops-bot", Reached: "sigterm", Certificate: "/certs/ops-bot.json"}}, kills)
	assert.NotContains(t, r.stdout, "e-stop engaged", "JSON alone")

	r = ctlRun(t, "release", "--estop", "--json", "--control-socket", sock)
	require.Equal(t, 0, r.code, r.stderr)
	assert.JSONEq(t, `{"estop": true}`, r.stdout)
	r = ctlRun(t, "release", "research-bot", "--json", "--control-socket", sock)
	require.Equal(t, 0, r.code, r.stderr)
	assert.JSONEq(t, `{"id": "research-bot", "state": "running"}`, r.stdout)
}

// ps --selector, -q, --format wide|json, --no-trunc.
func TestCtlPSFlags(t *testing.T) {
	now := time.Now()
	b := fleet(now)
	long := control.AgentStatus{AgentInfo: control.AgentInfo{ID: "wordy", State: control.StateFailed,
		Labels: map[string]string{"team": "research"}, Restarts: 3,
		Note: "crash loop: 3 restarts within 1m; edit the agent file or `hermeskilld release wordy` to try again"}}
	b.AddAgent(long)
	sock := serveFake(t, b, control.ServerOptions{})

	r := ctlRun(t, "ps", "-q", "--control-socket", sock)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "loopy\nops-bot\nresearch-bot\nwordy\n", r.stdout)
	r = ctlRun(t, "ps", "-q", "--selector", "team=research", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	assert.Equal(t, "research-bot\nwordy\n", r.stdout)
	r = ctlRun(t, "ps", "-q", "--selector", "team=research,model=qwen", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	assert.Equal(t, "research-bot\n", r.stdout, "every label must match")
	r = ctlRun(t, "ps", "-q", "--selector", "team=none", "--control-socket", sock)
	require.Equal(t, 0, r.code, "an empty list is not an error")
	assert.Empty(t, r.stdout)

	r = ctlRun(t, "ps", "--selector", "team=research", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 3)
	assert.Regexp(t, `^wordy\s+failed\s+-\s+-\s+-\s+0\s+\$0\.00\s+0\s+crash loop: 3 restarts within 1m; edit the agent file or `+"`"+`h…$`, lines[2],
		"the note is cut at 60 characters")
	r = ctlRun(t, "ps", "--no-trunc", "--selector", "team=research", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "`hermeskilld release wordy` to try again\n")

	r = ctlRun(t, "ps", "--format", "wide", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	lines = strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 5)
	assert.Regexp(t, `^ID\s+STATE\s+PID\s+UPTIME\s+HEARTBEAT\s+PROGRESS\s+TOKENS\s+COST\s+WARN\s+RESTARTS\s+LABELS\s+NOTE$`, lines[0])
	assert.Regexp(t, `^research-bot\s+running\s+4242\s+\S+\s+\S+ ago\s+17\s+1200\s+\$0\.42\s+1\s+0\s+model=qwen,team=research\s+"indexing`, lines[3])
	assert.Regexp(t, `^loopy\s+quarantined\s+-\s+-\s+-\s+0\s+0\s+\$0\.00\s+0\s+0\s+-\s+killed by`, lines[1])

	for _, args := range [][]string{{"--format", "json"}, {"--json"}} {
		r = ctlRun(t, append([]string{"ps", "--selector", "team=research", "--control-socket", sock}, args...)...)
		require.Equal(t, 0, r.code)
		var list []control.AgentInfo
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
		require.Len(t, list, 2)
		assert.NotContains(t, r.stdout, "0001-01-01", "times that are not known are left out")
		assert.NotContains(t, r.stdout, `"started_at"`+": \"0")
		var raw []map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &raw))
		assert.NotContains(t, raw[1], "started_at", "wordy is not running: no start time")
		assert.NotContains(t, raw[1], "last_heartbeat_at")
		assert.Contains(t, raw[0], "started_at")
	}
	r = ctlRun(t, "ps", "-q", "--selector", "team=nobody", "--format", "json", "--control-socket", sock)
	assert.Equal(t, exitUsage, r.code)
	r = ctlRun(t, "ps", "--selector", "team=nobody", "--format", "json", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	assert.Equal(t, "[]\n", r.stdout, "an empty list is [] in JSON")
	for _, bad := range [][]string{{"--format", "yaml"}, {"--json", "--format", "wide"}, {"--selector", "=x"}} {
		r = ctlRun(t, append([]string{"ps", "--control-socket", sock}, bad...)...)
		assert.Equal(t, exitUsage, r.code, bad)
	}
}

// logs prints the agent's output; -f follows until interrupted; on a
// terminal control characters are made inert.
func TestCtlLogs(t *testing.T) {
	b := fleet(time.Now())
	b.AppendLog("research-bot", []byte("one\ntwo\x1b[2J\nthree\n"))
	sock := serveFake(t, b, control.ServerOptions{})

	r := ctlRun(t, "logs", "research-bot", "--control-socket", sock)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "one\ntwo\x1b[2J\nthree\n", r.stdout, "not a terminal: the bytes as written")
	r = ctlRun(t, "logs", "--tail", "1", "research-bot", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	assert.Equal(t, "three\n", r.stdout)
	r = ctlRun(t, "logs", "-n", "2", "research-bot", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	assert.Equal(t, "two\x1b[2J\nthree\n", r.stdout)
	r = ctlRun(t, "logs", "nope", "--control-socket", sock)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "no such agent: nope")
	for _, bad := range [][]string{{"logs"}, {"logs", "--tail", "-3", "x"}, {"logs", "--tail", "many", "x"}} {
		r = ctlRun(t, append(bad, "--control-socket", sock)...)
		assert.Equal(t, exitUsage, r.code, bad)
	}

	// -f: the tail, then what comes; Ctrl-C is the normal end.
	out, errb := newSyncBuffer(), newSyncBuffer()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- ctlExec(ctx, out, errb, "logs", "-f", "--tail", "1", "research-bot", "--control-socket", sock)
	}()
	out.waitFor(t, "three\n")
	b.AppendLog("research-bot", []byte("four\n"))
	out.waitFor(t, "four\n")
	cancel()
	assert.Equal(t, 0, <-done)
	assert.Equal(t, "three\nfour\n", out.String())
	assert.Empty(t, errb.String())
}

func TestInertLines(t *testing.T) {
	var b bytes.Buffer
	w := &inertLines{w: &b}
	for _, chunk := range []string{"a\tb\x1b[31m\n", "par", "tial\r\n", "\n"} {
		n, err := w.Write([]byte(chunk))
		require.NoError(t, err)
		assert.Equal(t, len(chunk), n)
	}
	assert.Equal(t, "a\tb\\x1b[31m\npartial\\r\n\n", b.String(), "tabs and newlines kept, every other control escaped")
}

// status ends with the agent's last lines of output (made inert).
func TestCtlStatusLastOutput(t *testing.T) {
	b := fleet(time.Now())
	var log strings.Builder
	for i := range 15 {
		log.WriteString("line " + string(rune('a'+i)) + "\n")
	}
	log.WriteString("evil\x1b[2J\n")
	b.AppendLog("research-bot", []byte(log.String()))
	sock := serveFake(t, b, control.ServerOptions{})
	r := ctlRun(t, "status", "research-bot", "--control-socket", sock)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)\nlast output \(hermeskilld logs research-bot\)\n  line g\n(  line [h-o]\n){8}  evil\\x1b\[2J\n$`, r.stdout,
		"the last 10 lines, at the very end")
	r = ctlRun(t, "status", "research-bot", "--lines", "2", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	assert.True(t, strings.HasSuffix(r.stdout, "last output (hermeskilld logs research-bot)\n  line o\n  evil\\x1b[2J\n"), r.stdout)
	r = ctlRun(t, "status", "research-bot", "--lines", "0", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	assert.NotContains(t, r.stdout, "last output")
	r = ctlRun(t, "status", "ops-bot", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	assert.True(t, strings.HasSuffix(r.stdout, "last output (hermeskilld logs ops-bot)\n  (none)\n"), r.stdout)
	r = ctlRun(t, "status", "research-bot", "--json", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	assert.NotContains(t, r.stdout, "line a", "--json is the API's object alone")
}

// complete runs cobra's completion entry point as the shell scripts do.
func complete(t *testing.T, args ...string) (values []string, directive string) {
	t.Helper()
	r := ctlRun(t, append([]string{"__complete"}, args...)...)
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.NotEmpty(t, lines)
	return lines[:len(lines)-1], lines[len(lines)-1]
}

// Agent ids, labels and enum values complete; without a daemon agent ids
// complete to nothing, silently.
func TestCtlCompletion(t *testing.T) {
	sock := serveFake(t, fleet(time.Now()), control.ServerOptions{})
	for _, cmd := range []string{"status", "logs", "stop", "start", "restart", "kill", "release", "revoke"} {
		got, dir := complete(t, cmd, "--control-socket", sock, "")
		assert.Equal(t, []string{"loopy\tquarantined", "ops-bot\trunning", "research-bot\trunning"}, got, cmd)
		assert.Equal(t, ":4", dir, cmd+": no file names")
	}
	got, _ := complete(t, "stop", "--control-socket", sock, "re")
	assert.Equal(t, []string{"research-bot\trunning"}, got)
	got, _ = complete(t, "stop", "--control-socket", sock, "research-bot", "")
	assert.Empty(t, got, "one agent only")
	got, _ = complete(t, "events", "--control-socket", sock, "--agent", "o")
	assert.Equal(t, []string{"ops-bot\trunning"}, got)
	got, _ = complete(t, "certs", "ls", "--control-socket", sock, "--agent", "l")
	assert.Equal(t, []string{"loopy\tquarantined"}, got)
	got, dir := complete(t, "kill", "--control-socket", sock, "--selector", "team=ops,mo")
	assert.Equal(t, []string{"team=ops,model=qwen"}, got)
	assert.Equal(t, ":6", dir, "no space after a selector: another pair may follow")
	got, _ = complete(t, "ps", "--control-socket", sock, "--selector", "")
	assert.Equal(t, []string{"model=qwen", "team=ops", "team=research"}, got)

	// No daemon: nothing, no error.
	absent := filepath.Join(socketDir(t), "control.sock")
	got, dir = complete(t, "status", "--control-socket", absent, "")
	assert.Empty(t, got)
	assert.Equal(t, ":4", dir)

	// Enum flags, on every command that has them.
	got, _ = complete(t, "ps", "--format", "")
	assert.Equal(t, []string{"table\taligned columns (the default)", "wide\tmore columns: tokens, restarts, labels", "json\tthe API's objects"}, got)
	got, _ = complete(t, "supervise", "--containment", "")
	assert.Len(t, got, 3)
	assert.True(t, strings.HasPrefix(got[0], "auto\t"))
	got, _ = complete(t, "supervise", "--log-format", "")
	assert.Equal(t, []string{"console", "json"}, got)
	got, _ = complete(t, "daemon", "--log-level", "")
	assert.Equal(t, []string{"debug", "info", "warn", "error"}, got)
	got, _ = complete(t, "supervise", "--coop-signal", "")
	assert.Contains(t, got, "SIGTERM")
	assert.Contains(t, got, "none")
	got, _ = complete(t, "certs", "label", "--verdict", "")
	assert.Len(t, got, 2)
	got, _ = complete(t, "logs", "--tail", "")
	assert.Contains(t, got, "all\teverything kept")
}
