// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/control"
)

// supervise --on-budget pause, resumed from another terminal: the agent
// (no client, five requests of $0.12 that name no output bound) crosses
// its $0.30 budget at its third; the fourth is held, the tree frozen, and
// `hermeskilld status` through supervise's own control socket says
// paused. `hermeskilld resume` finds that socket by the id: a budget not
// raised is refused (the agent stays paused); a raised one lets it go
// on, until it crosses that one and pauses again; and the agent, which
// never knew, exits 0 after its five requests. The pause records and the
// audit log say what happened.
func TestSupervisePauseResume(t *testing.T) {
	t.Parallel()
	upstream, _ := usageUpstream(t)
	dir := t.TempDir()
	script := writeTestFile(t, dir, "agent.py", usageAgent)
	prices := writeTestFile(t, dir, "prices.yaml", usagePrices)
	runtime, err := os.MkdirTemp("", "hkp") // short: sun_path is 108 bytes
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(runtime) })
	env := []string{"XDG_RUNTIME_DIR=" + runtime}
	certsDir, auditLog := filepath.Join(dir, "certs"), filepath.Join(dir, "audit.jsonl")
	sup := hkStart(t, env, "supervise", "--id", "pause-e2e", "--certs-dir", certsDir, "--audit-log", auditLog,
		"--llm-upstream", "openai="+upstream, "--llm-prices", prices, "--max-cost", "0.30", "--on-budget", "pause",
		"--pause-timeout", "1m", "--", python(t), script, "5", "exit")

	ctl := func(args ...string) result {
		return hkRun(t, env, args...)
	}
	sock := filepath.Join(runtime, "hermeskill", "supervise", "pause-e2e.control.sock")
	waitPaused := func(n int) control.AgentStatus {
		var st control.AgentStatus
		cl := control.NewClient(sock) // what `hermeskilld status --control-socket` asks
		defer cl.Close()
		require.Eventually(t, func() bool {
			var err error
			st, err = cl.Status(context.Background(), "pause-e2e")
			return err == nil && st.State == control.StatePaused
		}, 20*time.Second, 20*time.Millisecond, "pause %d; supervise's stderr: %s", n, sup.stderr.String())
		require.NotNil(t, st.Run)
		require.NotNil(t, st.Run.Pause)
		return st
	}
	st := waitPaused(1)
	assert.Equal(t, "cost", st.Run.Pause.Check)
	assert.NotEmpty(t, st.Run.Pause.Frozen)

	same := ctl("resume", "pause-e2e", "--max-cost", "0.30")
	require.Equal(t, exitFailure, same.code, same.stderr)
	assert.Contains(t, same.stderr, "stays paused")
	assert.Contains(t, same.stderr, "is not above the budget, $0.3000")

	// $0.50 admits the fourth request ($0.48 in all); the fifth, alone
	// while the budget is not spent, crosses it and pauses the run again.
	mid := ctl("resume", "pause-e2e", "--max-cost", "0.50")
	require.Equal(t, 0, mid.code, mid.stderr)
	// The state it reads back is running, or paused again already when
	// the agent's fifth request came first.
	assert.Regexp(t, `^agent pause-e2e resumed; state (running|paused)\n$`, mid.stdout)
	waitPaused(2)

	ok := ctl("resume", "pause-e2e", "--max-cost", "20")
	require.Equal(t, 0, ok.code, ok.stderr)

	r := sup.wait(t)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "called 5")
	assert.Regexp(t, `(?m)^hermeskilld: agent pause-e2e exited 0 after \d+\.\ds: 5 LLM requests`, r.stderr)

	files, err := filepath.Glob(filepath.Join(certsDir, "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 2, "two pause records, and no certificate: the run ended by itself")
	for _, f := range files {
		rec, _, err := certs.Read(f)
		require.NoError(t, err)
		assert.Equal(t, certs.ModePaused, rec.Mode)
		assert.Equal(t, "cost", rec.TriggerCheck)
		require.NotEmpty(t, rec.Pauses)
		assert.EqualValues(t, 60000, rec.Pauses[len(rec.Pauses)-1].TimeoutMS)
	}

	paused, resumed := auditRecords(t, auditLog, "agent_paused"), auditRecords(t, auditLog, "agent_resumed")
	require.Len(t, paused, 2)
	require.Len(t, resumed, 2)
	assert.Equal(t, "resumed", resumed[1]["ended"])
	assert.Equal(t, "cost $20.0000", resumed[1]["budget"])
	requests := auditRecords(t, auditLog, "operator_request")
	require.Len(t, requests, 3, "every resume is audited, the refused one too")
	_, err = os.Stat(filepath.Join(runtime, "hermeskill", "supervise", "pause-e2e.control.sock"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the control socket is gone with the run")
}

// Under the daemon: an agent whose budget pauses it shows "paused" in
// ps and its pause in status; `hermeskilld resume` through the daemon's
// socket lets it go on to its exit. A second one, paused when the daemon
// is stopped, is not lost: thawed, it goes through the ladder, and its
// certificate (operator daemon-shutdown) lists the pause, ended "killed".
func TestDaemonPauseResume(t *testing.T) {
	t.Parallel()
	upstream, _ := usageUpstream(t)
	root := shortTemp(t)
	prices := writeTestFile(t, root, "prices.yaml", usagePrices)
	script := writeTestFile(t, root, "agent.py", usageAgent)
	d := startDaemonIn(t, root, fmt.Sprintf("gateway:\n  upstreams: [openai=%s]\n  prices: %s\n", upstream, prices))
	agentFile := func(id string) string {
		return fmt.Sprintf("id: %s\ncommand: [%s, %s, '5', exit]\non_budget: pause\npause_timeout: 1m\n"+
			"checks: {cost: {kill: 0.30}}\nescalation: {coop_grace: 300ms, term_grace: 300ms}\n", id, python(t), script)
	}
	cl := control.NewClient(d.sock) // what `ps --json` asks, without a process a poll
	defer cl.Close()
	waitState := func(id, state string) {
		var st control.AgentStatus
		require.Eventually(t, func() bool {
			var err error
			st, err = cl.Status(context.Background(), id)
			return err == nil && st.State == state
		}, 30*time.Second, 20*time.Millisecond, "agent %s never became %s (%s)", id, state, st.State)
	}
	d.writeAgent("paid-bot", agentFile("paid-bot"))
	d.writeAgent("held-bot", agentFile("held-bot"))
	waitState("paid-bot", control.StatePaused)
	waitState("held-bot", control.StatePaused)

	r := d.ctl("ps")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^paid-bot\s+paused\s+\d+`, r.stdout)
	r = d.ctl("status", "paid-bot", "--lines", "0")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^  check\s+cost$`, r.stdout)
	assert.Regexp(t, `(?m)^  resume\s+hermeskilld resume paid-bot`, r.stdout)

	r = d.ctl("resume", "paid-bot", "--max-cost", "20")
	require.Equal(t, 0, r.code, r.stderr)
	waitState("paid-bot", control.StateExited)
	r = d.ctl("resume", "paid-bot", "--max-cost", "30")
	require.Equal(t, exitFailure, r.code, "not paused: %s", r.stderr)

	d.stop(syscall.SIGTERM)
	var killed map[string]any
	for _, c := range d.certs() {
		if c["agent_id"] == "held-bot" && c["mode"] == certs.ModeEnforce {
			killed = c
		}
	}
	require.NotNil(t, killed, "the paused agent's certificate; daemon log:\n%s", d.logText())
	assert.Equal(t, "daemon-shutdown", killed["operator"])
	pauses := killed["pauses"].([]any)
	require.Len(t, pauses, 1)
	assert.Equal(t, certs.PauseKilled, pauses[0].(map[string]any)["ended"])
}
