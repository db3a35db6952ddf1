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
)

// planAgent is a Python agent on the client that runs a plan given as
// JSON: phases of client calls, each followed by a wait for the WARNING
// directive ("warning") or for the STOP directive ("stop", seen by
// checkpoint()). The waits are the handshakes: a warning comes back only
// once hermeskilld has judged every message sent before it. Every
// warning received is printed as "warning: CHECK: TEXT".
const planAgent = `
import json, sys, time
import hermeskill

hk = hermeskill.Client.from_env(on_warning=lambda w: print("warning: " + w, flush=True))
hk.ready()

def wait_for(what):
    deadline = time.monotonic() + 30
    while not (what == "warning" and hk.warnings):
        hk.checkpoint()
        if time.monotonic() > deadline:
            print("agent: no %s within 30s" % what, file=sys.stderr, flush=True)
            sys.exit(9)
        time.sleep(0.01)

try:
    for phase in json.loads(sys.argv[1]):
        for method, kwargs in phase["calls"]:
            getattr(hk, method)(**kwargs)
        wait_for(phase["until"])
except hermeskill.HermeskillTerminated as stop:
    print("agent: stopped by %s: %s" % (stop.check, stop.reason), flush=True)
    sys.exit(0)
print("agent: done", flush=True)
`

// phase is one step of planAgent's plan.
type phase struct {
	Calls [][2]any `json:"calls"`
	Until string   `json:"until"`
}

func call(method string, kwargs map[string]any) [2]any { return [2]any{method, kwargs} }

func planJSON(t *testing.T, phases ...phase) string {
	t.Helper()
	b, err := json.Marshal(phases)
	require.NoError(t, err)
	return string(b)
}

// runPlan supervises planAgent with the agent file cfg and the plan.
func runPlan(t *testing.T, dir, cfg string, phases ...phase) result {
	t.Helper()
	return hkRun(t, clientEnv(t), "supervise", "--id", "planner", "--config", writeTestFile(t, dir, "agent.yaml", cfg),
		"--certs-dir", dir, "--", python(t), agent(t, dir, planAgent), planJSON(t, phases...))
}

// A main loop stuck in wait_for_upstream (research_agent --stall, from
// step 3): its client's heartbeat thread vouches for it at most one
// heartbeat timeout after its last call, so progress_timeout fires first
// and kills it; final_state.progress is the last step reported.
func TestReportedProgressTimeout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// WATCHDOG_USEC 3s: the client beats every second, so several beats
	// land while no progress is made.
	r := hkRun(t, nil, "supervise", "--id", "stalled", "--heartbeat-timeout", "3s", "--progress-timeout", "3s",
		"--coop-grace", "5s", "--term-grace", "2s", "--certs-dir", dir, "--",
		python(t), "../../examples/agents/research_agent.py", "--stall", "--delay", "0.01")
	require.Equal(t, exitKilledClean, r.code, "the agent stops cooperatively and exits 0: supervise says it was killed")
	c := readCert(t, dir)
	require.Equal(t, "progress_timeout", c.TriggerCheck)
	require.Regexp(t, `^no progress for 3\.\d\ds \(last step 2, timeout 3s\)$`, c.TriggerReason)
	require.EqualValues(t, 2, c.FinalState.Progress, "the last step reported")
	require.True(t, c.FinalState.LastHeartbeatAt.After(c.TriggeredAt.Add(-3*time.Second)),
		"a heartbeat arrived while no progress was made (last at %s, triggered at %s)", c.FinalState.LastHeartbeatAt, c.TriggeredAt)
	require.GreaterOrEqual(t, c.FinalState.Heartbeats, int64(2))
	require.Equal(t, certs.ReachedCooperative, c.Escalation.Reached)
	require.Contains(t, r.stderr, "research_agent: stopped by hermeskilld (check progress_timeout")
}

// The same call 5 times in a row, or an A-B
// alternation repeated 5 times, is a tool_loop; 5 different calls (the
// same tool with other arguments included) are not.
func TestReportedToolLoop(t *testing.T) {
	t.Parallel()
	// steps warns at PROGRESS=2, sent after the calls: the agent's
	// handshake that every call before it was judged.
	const cfg = `
checks:
  tool_loop: {repeats: 5}
  steps: {warn: 1}
escalation: {coop_signal: none, coop_grace: 20s, term_grace: 2s}
`
	search := func(q string) [2]any {
		return call("tool_call", map[string]any{"name": "web_search", "args": map[string]any{"query": q, "max_results": 5}})
	}
	fetch := call("tool_call", map[string]any{"name": "fetch_page", "args": map[string]any{"url": "https://example.org/1"}})
	summarize := call("tool_call", map[string]any{"name": "summarize", "args": map[string]any{"max_words": 40}})

	for _, tc := range []struct {
		name   string
		calls  [][2]any
		reason string
	}{
		{"same call 5 times", [][2]any{search("a"), search("a"), search("a"), search("a"), search("a")},
			"the same tool call web_search repeated 5 times in a row"},
		{"A-B alternation", [][2]any{search("a"), fetch, search("a"), fetch, search("a"), fetch, search("a"), fetch, search("a"), fetch},
			"the tool calls web_search → fetch_page repeated as a cycle 5 times"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			r := runPlan(t, dir, cfg, phase{Calls: tc.calls, Until: "stop"})
			require.Equal(t, exitKilledClean, r.code, "the agent stopped cleanly, but it was killed")
			c := readCert(t, dir)
			require.Equal(t, "tool_loop", c.TriggerCheck)
			require.Equal(t, tc.reason, c.TriggerReason)
			require.Equal(t, tc.calls[len(tc.calls)-1][1].(map[string]any)["name"], c.FinalState.LastTool)
			require.Equal(t, certs.ReachedCooperative, c.Escalation.Reached)
			require.Contains(t, r.stdout, "agent: stopped by tool_loop: "+tc.reason)
		})
	}
	t.Run("5 different calls", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		r := runPlan(t, dir, cfg,
			phase{Calls: [][2]any{search("a"), search("b"), fetch, summarize, search("c"),
				call("progress", map[string]any{"n": 2})}, Until: "warning"})
		require.Equal(t, 0, r.code)
		require.Contains(t, r.stdout, "warning: steps: steps 2 over warning threshold 1")
		require.Contains(t, r.stdout, "agent: done")
		noCert(t, dir)
		require.NotContains(t, r.stderr, "tool_loop")
	})
}

// A budget past warn gives a warning (in the
// log, in symptoms_log, and as a WARNING directive the Python client
// receives), then past kill the death by that check.
func TestReportedBudgets(t *testing.T) {
	t.Parallel()
	errs := func(n int) [][2]any {
		var out [][2]any
		for range n {
			out = append(out, call("error", map[string]any{"err": "fetch_page: timeout after 10s"}))
		}
		return out
	}
	for _, tc := range []struct {
		check            string
		limits           string
		warn, kill       [][2]any
		warning, reason  string
		final            func(*testing.T, certs.FinalState)
		observed, thresh [2]string
	}{
		{
			check: "cost", limits: "{warn: 1.00, kill: 2.00}",
			warn:    [][2]any{call("usage", map[string]any{"tokens": 1000, "cost_usd": 1.25})},
			kill:    [][2]any{call("usage", map[string]any{"tokens": 2000, "cost_usd": 2.25})},
			warning: "cost $1.25 over warning threshold $1.00", reason: "cost $2.25 over kill threshold $2.00",
			observed: [2]string{"$1.25", "$2.25"}, thresh: [2]string{"$1.00", "$2.00"},
			final: func(t *testing.T, f certs.FinalState) { require.InDelta(t, 2.25, f.CostUSD, 1e-9) },
		},
		{
			check: "tokens", limits: "{warn: 800, kill: 1000}",
			warn:    [][2]any{call("usage", map[string]any{"tokens": 900})},
			kill:    [][2]any{call("usage", map[string]any{"tokens": 1200})},
			warning: "tokens 900 over warning threshold 800", reason: "tokens 1200 over kill threshold 1000",
			observed: [2]string{"900", "1200"}, thresh: [2]string{"800", "1000"},
			final: func(t *testing.T, f certs.FinalState) { require.EqualValues(t, 1200, f.Tokens) },
		},
		{
			check: "steps", limits: "{warn: 5, kill: 10}",
			warn:    [][2]any{call("progress", map[string]any{"n": 6})},
			kill:    [][2]any{call("progress", map[string]any{"n": 11})},
			warning: "steps 6 over warning threshold 5", reason: "steps 11 over kill threshold 10",
			observed: [2]string{"6", "11"}, thresh: [2]string{"5", "10"},
			final: func(t *testing.T, f certs.FinalState) { require.EqualValues(t, 11, f.Progress) },
		},
		{
			check: "error_streak", limits: "{warn: 3, kill: 5}",
			warn:     errs(3),
			kill:     errs(2),
			warning:  "3 errors in a row without progress (warning threshold 3; last: fetch_page: timeout after 10s)",
			reason:   "5 errors in a row without progress (kill threshold 5; last: fetch_page: timeout after 10s)",
			observed: [2]string{"3", "5"}, thresh: [2]string{"3", "5"},
			final: func(t *testing.T, f certs.FinalState) { require.EqualValues(t, 5, f.Errors) },
		},
	} {
		t.Run(tc.check, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := fmt.Sprintf("checks:\n  %s: %s\nescalation: {coop_signal: none, coop_grace: 20s, term_grace: 2s}\n", tc.check, tc.limits)
			r := runPlan(t, dir, cfg, phase{Calls: tc.warn, Until: "warning"}, phase{Calls: tc.kill, Until: "stop"})
			require.Equal(t, exitKilledClean, r.code, "the agent stopped cleanly, but it was killed")
			require.Contains(t, r.stdout, "warning: "+tc.check+": "+tc.warning, "the WARNING directive reached the Python client")
			require.Contains(t, r.stdout, "agent: stopped by "+tc.check+": "+tc.reason)
			require.Regexp(t, `WARN\s+warning symptom\s+.*"check": "`+tc.check+`"`, r.stderr, "the warning is logged")

			c := readCert(t, dir)
			require.Equal(t, tc.check, c.TriggerCheck)
			require.Equal(t, tc.reason, c.TriggerReason)
			require.Equal(t, []string{"warning " + tc.check, "terminal " + tc.check}, symptomsOf(c))
			for i, s := range c.SymptomsLog {
				require.Equal(t, tc.observed[i], s.Observed)
				require.Equal(t, tc.thresh[i], s.Threshold)
			}
			require.Equal(t, tc.warning, c.SymptomsLog[0].Message)
			require.False(t, c.SymptomsLog[0].At.After(c.SymptomsLog[1].At))
			require.Equal(t, certs.ReachedCooperative, c.Escalation.Reached)
			require.Equal(t, []string{"directive_sent", "main_exited", "coop_wait"}, stepNames(c)[1:],
				"after the dump signal, the directive alone stopped it (no coop signal)")
			tc.final(t, c.FinalState)
		})
	}
}

// In shadow mode the would-be kill is a
// certificate with mode shadow, nothing is signalled, and the agent runs
// to its own end. The agent stops beating, waits for the certificate to
// appear (its handshake) and exits 0.
func TestReportedShadowMode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := hkRun(t, clientEnv(t), "supervise", "--id", "shadowed", "--shadow", "--heartbeat-timeout", "500ms",
		"--coop-grace", "100ms", "--term-grace", "100ms", "--certs-dir", dir, "--", python(t), agent(t, dir, `
import glob, os, sys, time
import hermeskill
hk = hermeskill.Client.from_env()
hk.ready()
hk.status("no more heartbeats")
deadline = time.monotonic() + 30
while not glob.glob(os.path.join(sys.argv[1], "*.json")):
    hk.checkpoint()
    if time.monotonic() > deadline:
        sys.exit(9)
    time.sleep(0.02)
time.sleep(0.5)   # alive well past the coop and term graces of an enforced kill
hk.checkpoint()
print("agent: outlived the would-be kill", flush=True)
sys.exit(0)
`), dir)
	require.Equal(t, 0, r.code, "the agent's own exit status")
	require.Contains(t, r.stdout, "agent: outlived the would-be kill")
	c := readCert(t, dir)
	require.Equal(t, certs.ModeShadow, c.Mode)
	require.Equal(t, "heartbeat_timeout", c.TriggerCheck)
	require.Equal(t, certs.TriggerAuto, c.TriggerType)
	require.Equal(t, certs.ReachedNone, c.Escalation.Reached)
	require.Empty(t, c.ShutdownLog, "nothing was signalled")
	require.Equal(t, "no more heartbeats", c.FinalState.Status)
	require.NotEmpty(t, c.ProcessTree)
	require.Contains(t, r.stderr, "hermeskilld: shadow mode: agent shadowed would have been killed; certificate: "+dir)
	require.NotContains(t, r.stderr, "ladder step")
}

// An agent file with an unknown key or a bad
// duration is refused with file:line and exit status 125.
func TestReportedAgentFileErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown key", "checks:\n  heartbeat_timeout: 1s\n  heartbeat_timout: 2s\n", `:3: checks: unknown key "heartbeat_timout"`},
		{"unknown top-level key", "id: bot\ncheks: {}\n", `:2: unknown key "cheks"`},
		{"bad duration", "checks:\n  heartbeat_timeout: 1s\nescalation:\n  coop_grace: soon\n", `:4: escalation.coop_grace: bad duration "soon"`},
		{"duration without unit", "checks:\n  progress_timeout: 30\n", `:2: checks.progress_timeout: `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := writeTestFile(t, dir, "agent.yaml", tc.yaml)
			r := hk(t, "supervise", "--config", path, "--certs-dir", dir, "--", "true")
			require.Equal(t, 125, r.code)
			require.Regexp(t, `(?m)^hermeskilld: `+regexpQuote(path+tc.want), r.stderr)
			noCert(t, dir)
		})
	}
	t.Run("missing file", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "nope.yaml")
		r := hk(t, "supervise", "--config", path, "--", "true")
		require.Equal(t, 125, r.code)
		require.Contains(t, r.stderr, path)
		_, err := os.Stat(path)
		require.ErrorIs(t, err, os.ErrNotExist)
	})
}
