// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
)

// buildGoAgent builds examples/agents/goagent, a Go agent on pkg/client,
// into a temp dir.
func buildGoAgent(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command is needed to build the Go example agent")
	out := filepath.Join(t.TempDir(), "goagent")
	cmd := exec.Command(gobin, "build", "-o", out, "./examples/agents/goagent")
	cmd.Dir = "../.."
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build goagent:\n%s", b)
	return out
}

// A Go agent on pkg/client repeating one tool call
// is stopped by the STOP directive alone (--coop-signal none): its
// context's cause is a *client.StopError naming tool_loop, which the
// example agent logs before it exits 0 by itself, well within the grace.
func TestClientGoStopDirective(t *testing.T) {
	t.Parallel()
	bin := buildGoAgent(t)
	dir := t.TempDir()
	r := hkRun(t, nil, "supervise", "--id", "goagent", "--tool-loop", "5", "--heartbeat-timeout", "10s",
		"--coop-signal", "none", "--coop-grace", "30s", "--term-grace", "2s", "--certs-dir", dir, "--",
		bin, "-loop", "-delay", "20ms")
	require.Equal(t, exitKilledClean, r.code, "the agent exited 0 by itself after a check killed it: an automatic kill is never a success")
	require.Less(t, r.took, 25*time.Second, "it did not wait out the 30s grace")
	require.Regexp(t, `goagent: .*stopped by hermeskilld: check=tool_loop reason="the same tool call web_search repeated 5 times in a row" grace=30s`,
		r.stderr, "context.Cause is a *client.StopError{Check: tool_loop}")
	c := readCert(t, dir)
	require.Equal(t, "tool_loop", c.TriggerCheck)
	require.Equal(t, certs.ReachedCooperative, c.Escalation.Reached)
	require.Equal(t, "none", c.Escalation.CoopSignal)
	require.Contains(t, stepNames(c), "directive_sent")
	require.NotContains(t, stepNames(c), "coop_signal_sent")
	require.NotContains(t, stepNames(c), "sigterm_sent")
	require.EqualValues(t, 0, *c.Exit.Code)
	require.Equal(t, "web_search", c.FinalState.LastTool)
}

// The Python research agent on the client loops on
// one web_search; checkpoint() raises HermeskillTerminated at its next
// step, it saves its partial results and exits 0 in the cooperative stage.
func TestClientPythonCheckpointSavesWork(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(t.TempDir(), "results.json")
	r := hkRun(t, nil, "supervise", "--id", "research", "--tool-loop", "4", "--coop-signal", "none",
		"--coop-grace", "30s", "--term-grace", "2s", "--certs-dir", dir, "--",
		python(t), "../../examples/agents/research_agent.py", "--loop", "--steps", "1000", "--delay", "0.01", "--out", out)
	require.Equal(t, exitKilledClean, r.code, "the agent saved its work and exited 0, after a check killed it")
	require.Less(t, r.took, 25*time.Second)

	var saved struct {
		Finished  bool `json:"finished"`
		Completed int  `json:"steps_completed"`
		StoppedBy struct {
			Check  string `json:"check"`
			Reason string `json:"reason"`
		} `json:"stopped_by"`
	}
	require.NoError(t, json.Unmarshal(mustRead(t, out), &saved))
	require.False(t, saved.Finished)
	require.Equal(t, "tool_loop", saved.StoppedBy.Check, "the saved work names the check")
	require.Equal(t, "the same tool call web_search repeated 4 times in a row", saved.StoppedBy.Reason)
	require.GreaterOrEqual(t, saved.Completed, 5, "steps 3-6 were the loop")

	c := readCert(t, dir)
	require.Equal(t, "tool_loop", c.TriggerCheck)
	require.Equal(t, certs.ReachedCooperative, c.Escalation.Reached)
	require.Equal(t, []string{"dump_signal_sent", "directive_sent", "main_exited", "coop_wait"}, stepNames(c))
	require.Contains(t, c.LastOutput.Stderr, "research_agent: stopped by hermeskilld (check tool_loop")
}

// A Python agent on the client wedged in `while True: pass`, ignoring
// SIGINT and SIGTERM. Its heartbeat thread runs (the GIL is released
// between bytecodes) but stops vouching for a loop that no longer passes
// through the client, so it dies of a missed heartbeat or of
// progress_timeout. Before the ladder hermeskilld sends the announced
// DUMP_SIGNAL (SIGUSR2, faulthandler), so the certificate's
// last_output.stderr shows where the main thread spun.
func TestClientPythonLastWords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := marker(t)
	r := hkRun(t, clientEnv(t), "supervise", "--id", "spinner", "--heartbeat-timeout", "5s", "--progress-timeout", "1s",
		"--coop-grace", "200ms", "--term-grace", "200ms", "--certs-dir", dir, "--", python(t), agent(t, dir, `
import signal
import hermeskill

def plan_next_step_forever():
    while True:
        pass

hk = hermeskill.Client.from_env()
hk.ready()
hk.start_heartbeat(0.1)
hk.progress(1)
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("planning", flush=True)
plan_next_step_forever()
`), m)
	requireNoSurvivors(t, m)
	require.Equal(t, 137, r.code)
	c := readCert(t, dir)
	require.Equal(t, "progress_timeout", c.TriggerCheck)
	require.Equal(t, certs.ReachedSigkill, c.Escalation.Reached)
	names := stepNames(c)
	require.Equal(t, "dump_signal_sent", names[0], "last words come before the ladder")
	require.Equal(t, "SIGUSR2", c.ShutdownLog[0].Detail["signal"])
	require.Subset(t, names, []string{"directive_sent", "coop_signal_sent", "sigterm_sent", "sigkill_sent", "reaped"})
	require.NotNil(t, c.LastOutput)
	require.Regexp(t, `(?s)Current thread 0x[0-9a-f]+ \(most recent call first\):\n\s+File ".*agent\.py", line \d+ in plan_next_step_forever\n\s+File ".*agent\.py", line \d+ in <module>`,
		c.LastOutput.Stderr, "faulthandler's traceback names the wedged function")
	require.Contains(t, c.LastOutput.Stdout, "planning")
	require.GreaterOrEqual(t, c.FinalState.Heartbeats, int64(5), "the heartbeat thread beat while the main thread spun")
}
