// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/control"
)

// A budget across runs against a real daemon, its gateway and a fake
// upstream: two agents of team a, each calling its model five times at
// $0.12 a call with an output bound (a worst case of about $0.121), would
// spend $1.20 together against the team's $1.00 a day. The budget is a
// cap: the eight calls that fit are answered, the ninth is refused at the
// gateway and trips the budget, so the team spends $0.96 and never more
// than $1.00. Both agents are stopped for check budget, the certificates
// say by which budget and how much; a third agent of the team is refused.
// The trip survives a restart of the daemon; `budgets lift` lets the
// agents start again.
func TestDaemonBudgetAcrossRuns(t *testing.T) {
	t.Parallel()
	upstream, _ := usageUpstream(t)
	root := shortTemp(t)
	prices := writeTestFile(t, root, "prices.yaml", usagePrices)
	script := writeTestFile(t, root, "agent.py", usageAgent)
	cfg := fmt.Sprintf("gateway:\n  upstreams: [openai=%s]\n  prices: %s\n"+
		"budgets:\n  - {name: team-a, selector: team=a, per: day, warn: 0.5, kill: 1.00}\n", upstream, prices)
	agent := func(id string, calls int) string {
		return fmt.Sprintf("id: %s\nlabels: {team: a}\nenv: {TEST_BOUNDED: '1'}\ncommand: [%s, %s, '%d', wait]\nescalation: {coop_grace: 200ms, term_grace: 1s}\n",
			id, python(t), script, calls)
	}
	d := startDaemonIn(t, root, cfg)
	d.writeAgent("a1", agent("a1", 5))
	d.writeAgent("a2", agent("a2", 5))
	// The reason says what was spent when the ninth call was refused: $0.96,
	// or $0.84 when the eighth was still in flight then (held, not yet
	// spent); the table below, read once both runs ended, has all of it.
	for _, id := range []string{"a1", "a2"} {
		info := d.waitState(id, control.StateRevoked)
		assert.Regexp(t, `^budget team-a: spent \$0\.(84|96) of \$1\.00 today; the next request's worst case did not fit in the rest; held until \d{4}-\d\d-\d\dT00:00:00Z \(or hermeskilld budgets lift team-a\)$`, info.Note)
	}
	require.Eventually(t, func() bool { return len(d.certs()) == 2 }, 30*time.Second, 50*time.Millisecond)
	for _, c := range d.certs() {
		assert.Equal(t, "auto", c["trigger_type"], c["agent_id"])
		assert.Equal(t, "budget", c["trigger_check"], c["agent_id"])
		assert.Regexp(t, `^budget team-a: spent \$0\.(84|96) of \$1\.00 today; the next request's worst case did not fit in the rest$`, c["trigger_reason"])
	}
	r := d.ctl("budgets")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^NAME\s+SELECTOR\s+WINDOW\s+SPENT\s+WARN\s+KILL\s+STATE$`, r.stdout)
	assert.Regexp(t, `(?m)^team-a\s+team=a\s+day \d{4}-\d\d-\d\d\s+\$0\.96\s+\$0\.50\s+\$1\.00\s+tripped$`, r.stdout)

	d.writeAgent("a3", agent("a3", 0))
	info := d.waitState("a3", control.StateRevoked)
	assert.Contains(t, info.Note, "budget team-a")
	warned := auditRecords(t, d.state+"/audit.jsonl", "budget_warning")
	require.Len(t, warned, 1)
	tripped := auditRecords(t, d.state+"/audit.jsonl", "budget_tripped")
	require.Len(t, tripped, 1)
	assert.Equal(t, "team-a", tripped[0]["budget"])

	d.stop(syscall.SIGTERM)
	d = startDaemonIn(t, root, cfg)
	d.waitState("a3", control.StateRevoked)
	r = d.ctl("budgets", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var list []control.Budget
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Len(t, list, 1)
	assert.Equal(t, "tripped", list[0].State, "the trip survived the restart")
	assert.InDelta(t, 0.96, list[0].SpentUSD, 1e-9, "eight calls answered, the ninth refused: no overshoot")
	assert.Equal(t, "team=a", list[0].Selector.String())

	r = d.ctl("budgets", "lift", "team-a")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "budget team-a lifted until its window rolls over\n", r.stdout)
	d.waitState("a3", control.StateRunning)
	r = d.ctl("budgets", "lift", "team-a")
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.stderr, "budget team-a is not tripped")
}
