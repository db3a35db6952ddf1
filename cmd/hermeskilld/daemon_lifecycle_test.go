// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/control"
)

// stop, start and restart against a real daemon and real agents: a stop
// runs the ladder with a certificate and no quarantine, the restart
// policy then decides; start and restart give a new process; each is
// audited with the caller's uid. Along the way: ps --selector, -q and its
// JSON without zero times, kill/estop/release --json, completion of ids.
func TestDaemonStopStartRestart(t *testing.T) {
	m := marker(t)
	// Registered first, so it runs after the daemon was stopped.
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	d := startDaemon(t, "")
	d.writeAgent("bot", sleeper(t, "bot", m, "labels: {team: a}\n"))
	d.writeAgent("loyal", sleeper(t, "loyal", m, "labels: {team: b}\nrestart: {policy: always, backoff: 200ms}\n"))
	first := d.waitState("bot", control.StateRunning)
	loyal := d.waitState("loyal", control.StateRunning)
	require.Eventually(t, func() bool { return len(survivors(m)) == 2 }, 20*time.Second, 20*time.Millisecond)
	requireIgnoresSIGINT(t, first.PID)

	// stop: the ladder, a certificate naming the operator, no quarantine;
	// policy never keeps it down.
	r := d.ctl("stop", "bot", "--reason", "maintenance window")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^agent bot stopped; escalation reached sigterm; certificate: \S+\.json; now exited \(.*stopped by uid:\d+.*: maintenance window\)\n$`, r.stdout)
	require.NotContains(t, survivors(m), first.PID)
	c := d.certs()[0]
	u, err := user.Current()
	require.NoError(t, err)
	require.Equal(t, "manual", c["trigger_type"])
	require.Equal(t, "uid:"+u.Uid+"("+u.Username+")", c["operator"])
	require.Equal(t, "operator stop: maintenance window", c["operator_reason"], "the certificate says it was a stop")
	var st control.AgentStatus
	r = d.ctl("status", "bot", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Equal(t, control.StateExited, st.State)
	require.Nil(t, st.Quarantine, "a stop is not a kill")
	held, _ := os.ReadFile(filepath.Join(d.state, "held.json")) // absent while nothing is held
	require.NotContains(t, string(held), `"bot"`)

	r = d.ctl("stop", "bot")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "agent bot is not running (exited)")

	// ps: a selector, ids alone, JSON without zero times (bot has none).
	r = d.ctl("ps", "-q", "--selector", "team=a")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "bot\n", r.stdout)
	r = d.ctl("ps", "--format", "json")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, "0001-01-01")
	var rows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rows))
	require.Len(t, rows, 2)
	require.Equal(t, "bot", rows[0]["id"])
	require.NotContains(t, rows[0], "started_at", "not running: its start time is left out")
	require.Contains(t, rows[1], "started_at")
	r = d.ctl("ps", "--format", "wide", "--selector", "team=b")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^loyal\s+running\s+\d+.*\s+team=b$`, r.stdout)

	// Completion asks the daemon.
	r = hkQuiet(t, "__complete", "start", "--control-socket", d.sock, "") // the word completed comes last
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "bot\texited\nloyal\trunning\n:4\n", r.stdout)

	// start: a new process.
	r = d.ctl("start", "bot", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var res control.ActionResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	require.Equal(t, control.StateRunning, res.State)
	require.NotZero(t, res.PID)
	require.NotEqual(t, first.PID, res.PID)
	requireIgnoresSIGINT(t, res.PID) // else restart's SIGINT could end it before its handler is set
	r = d.ctl("start", "bot")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "already running")

	// restart: the ladder, then a new process at once (policy never).
	r = d.ctl("restart", "bot", "--reason", "new weights")
	require.Equal(t, 0, r.code, r.stderr)
	mm := regexp.MustCompile(`^agent bot stopped \(escalation reached sigterm; certificate: \S+\) and started again, pid (\d+)\n$`).FindStringSubmatch(r.stdout)
	require.NotNil(t, mm, r.stdout)
	pid, _ := strconv.Atoi(mm[1])
	require.NotEqual(t, res.PID, pid)
	require.False(t, pidAlive(res.PID), "the old run is gone")
	require.Equal(t, pid, d.waitState("bot", control.StateRunning).PID)
	require.Len(t, d.certs(), 2)

	// A stop under policy always: it comes back by itself, not quarantined.
	r = d.ctl("stop", "loyal", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	require.True(t, res.Stopped)
	require.Equal(t, "sigterm", res.Reached)
	require.NotEmpty(t, res.Certificate)
	var back control.AgentInfo
	require.Eventually(t, func() bool {
		back = d.agentsByID()["loyal"]
		return back.State == control.StateRunning && back.PID != 0 && back.PID != loyal.PID
	}, 30*time.Second, 50*time.Millisecond, "policy always restarts a stopped agent")

	// Every request is in the audit log with the caller's uid.
	audit := string(mustRead(t, filepath.Join(d.state, "audit.jsonl")))
	for _, path := range []string{"/v1/stop", "/v1/start", "/v1/restart"} {
		require.Regexp(t, `"type":"operator_request".*"path":"`+regexp.QuoteMeta(path)+`".*|"path":"`+regexp.QuoteMeta(path)+`".*"type":"operator_request"`, audit, path)
	}
	require.Contains(t, audit, `"uid":`+u.Uid)

	// kill, release, estop --json: the daemon's answers.
	r = d.ctl("kill", "bot", "--reason", "enough", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var kills []control.KillResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &kills))
	require.Len(t, kills, 1)
	require.Equal(t, "bot", kills[0].ID)
	require.NotEmpty(t, kills[0].Certificate)
	r = d.ctl("start", "bot")
	require.Equal(t, exitFailure, r.code, "a quarantined agent is released, not started")
	require.Contains(t, r.stderr, "hermeskilld release bot")
	r = d.ctl("release", "bot", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var rel control.ReleaseResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rel))
	require.Equal(t, "bot", rel.ID)
	require.NotEmpty(t, rel.State)
	d.waitState("bot", control.StateRunning)
	r = d.ctl("estop", "--reason", "drill", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &kills))
	require.Len(t, kills, 2)
	r = d.ctl("release", "--estop", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"estop": true}`, r.stdout)
}

// logs against a real daemon: the agent's output, its tail, everything
// kept across rotated files, -f across rotations until interrupted, and
// status ending with the last lines.
func TestDaemonLogs(t *testing.T) {
	m := marker(t)
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	d := startDaemon(t, "logs: {max_bytes: 400, keep: 100}\n")
	d.writeAgent("talker", fmt.Sprintf(`id: talker
command: [%s, -c, "import signal, sys, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ni = 0\nwhile True:\n    print('tick %%d' %% i, flush=True)\n    i += 1\n    time.sleep(0.01)", %q]
escalation: {coop_grace: 200ms, term_grace: 2s}
`, python(t), m))
	d.waitState("talker", control.StateRunning)
	logPath := filepath.Join(d.state, "logs", "talker.log")
	require.Eventually(t, func() bool { _, err := os.Stat(logPath + ".2"); return err == nil }, 30*time.Second, 20*time.Millisecond,
		"the log never rotated twice")

	ticks := func(out string) []int {
		var n []int
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			v, err := strconv.Atoi(strings.TrimPrefix(l, "tick "))
			require.NoError(t, err, "line %q", l)
			n = append(n, v)
		}
		return n
	}
	consecutive := func(n []int) {
		t.Helper()
		for i := 1; i < len(n); i++ {
			require.Equal(t, n[i-1]+1, n[i], "a line lost or repeated between tick %d and the next", n[i-1])
		}
	}

	r := d.ctl("logs", "--tail", "3", "talker")
	require.Equal(t, 0, r.code, r.stderr)
	n := ticks(r.stdout)
	require.Len(t, n, 3)
	consecutive(n)

	r = d.ctl("logs", "talker")
	require.Equal(t, 0, r.code, r.stderr)
	n = ticks(r.stdout)
	require.Equal(t, 0, n[0], "everything kept, oldest rotated file first")
	require.Greater(t, len(n), 60, "more than the live file holds")
	consecutive(n)

	// -f: follows across rotations; Ctrl-C ends it with status 0.
	h := hkStart(t, nil, "logs", "-f", "--tail", "1", "talker", "--control-socket", d.sock)
	start, _ := strconv.Atoi(h.expect(t, `^tick (\d+)$`)[1])
	h.expect(t, fmt.Sprintf(`^tick %d$`, start+150)) // ~4 rotations later
	require.NoError(t, h.cmd.Process.Signal(syscall.SIGINT))
	res := h.wait(t)
	require.Equal(t, 0, res.code, res.stderr)
	n = ticks(res.stdout)
	require.Equal(t, start, n[0])
	require.GreaterOrEqual(t, len(n), 151)
	consecutive(n)

	r = d.ctl("status", "talker")
	require.Equal(t, 0, r.code, r.stderr)
	i := strings.Index(r.stdout, "\nlast output (hermeskilld logs talker)\n")
	require.GreaterOrEqual(t, i, 0, r.stdout)
	last := strings.Split(strings.TrimSuffix(r.stdout[i:], "\n"), "\n")[2:]
	require.Len(t, last, 10)
	for j := range last {
		last[j] = strings.TrimPrefix(last[j], "  ")
	}
	consecutive(ticks(strings.Join(last, "\n")))

	r = d.ctl("logs", "nope")
	require.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "no such agent")

	// The daemon going away ends a follower with a failure.
	h = hkStart(t, nil, "logs", "-f", "--tail", "0", "talker", "--control-socket", d.sock)
	h.expect(t, `^tick \d+$`)
	d.stop(syscall.SIGTERM)
	res = h.wait(t)
	require.Equal(t, exitFailure, res.code)
	require.Contains(t, res.stderr, "the daemon closed the stream")
}

// requireIgnoresSIGINT waits until the sleeper agent pid has run its first
// line, signal.signal(SIGINT, SIG_IGN): until then a cooperative stop ends
// it at once, and the ladder stops short of SIGTERM.
func requireIgnoresSIGINT(t *testing.T, pid int) {
	t.Helper()
	require.Eventually(t, func() bool {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return false
		}
		for line := range strings.Lines(string(data)) {
			if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
				mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
				return err == nil && mask&(1<<(int(syscall.SIGINT)-1)) != 0
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "agent %d never set SIGINT to be ignored", pid)
}

// One selector, one rule, in every verb, against a real daemon: a missing
// label is never an empty one. ps, kill and revoke agree on which of
// three agents (team=a, team="", no team) each selector names, and a
// malformed selector is refused, never read as "every agent".
func TestDaemonSelectorOneRule(t *testing.T) {
	m := marker(t)
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	d := startDaemon(t, "")
	d.writeAgent("labelled", sleeper(t, "labelled", m, "labels: {team: a}\n"))
	d.writeAgent("blank", sleeper(t, "blank", m, "labels: {team: \"\"}\n"))
	d.writeAgent("plain", sleeper(t, "plain", m, ""))
	for _, id := range []string{"labelled", "blank", "plain"} {
		d.waitState(id, control.StateRunning)
	}
	ps := func(sel string) string {
		t.Helper()
		r := d.ctl("ps", "-q", "--selector", sel)
		require.Equal(t, 0, r.code, "ps --selector %s: %s", sel, r.stderr)
		return strings.Join(strings.Fields(r.stdout), " ")
	}
	require.Equal(t, "blank", ps("team="))
	require.Equal(t, "labelled", ps("team=a"))
	require.Equal(t, "blank plain", ps("team!=a"))
	require.Equal(t, "blank labelled", ps("team"))
	require.Equal(t, "plain", ps("!team"))
	require.Equal(t, "labelled", ps("team=a,team"))
	r := d.ctl("ps", "-q", "--selector", "team", "--selector", "!team")
	require.Equal(t, exitUsage, r.code, "contradictory selectors: %s", r.stdout)
	for _, bad := range []string{"", "team=a,,x", "!", "=a", "te am"} {
		for _, verb := range [][]string{{"ps"}, {"kill", "--reason", "x"}, {"revoke", "--reason", "x"}} {
			r := d.ctl(append(verb, "--selector", bad)...)
			require.Equal(t, exitUsage, r.code, "%v --selector %q: %s%s", verb, bad, r.stdout, r.stderr)
		}
	}
	for _, id := range []string{"labelled", "blank", "plain"} {
		require.Equal(t, control.StateRunning, d.agentsByID()[id].State, "%s survived every malformed selector", id)
	}

	// kill names what ps names: team= is the blank one only.
	r = d.ctl("kill", "--selector", "team=", "--reason", "one rule", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var res []control.KillResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	require.Len(t, res, 1)
	require.Equal(t, "blank", res[0].ID)
	require.Equal(t, control.StateRunning, d.agentsByID()["plain"].State)
	require.Equal(t, control.StateRunning, d.agentsByID()["labelled"].State)

	// revoke team!=a: the one without a team (blank is already down) and
	// the rule keeps it down; labelled lives.
	r = d.ctl("revoke", "--selector", "team!=a", "--reason", "one rule")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "labels team!=a")
	require.Contains(t, r.stdout, "plain")
	require.NotContains(t, r.stdout, "labelled")
	require.Eventually(t, func() bool { return d.agentsByID()["plain"].State == control.StateRevoked }, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, control.StateRunning, d.agentsByID()["labelled"].State)
}
