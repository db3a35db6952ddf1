// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// With the gateway, the budgets count what was metered on the wire: a
// dishonest agent that reports nothing (or too little) still dies of its
// spend, and what it reported stays in the state beside the truth.
func TestMeteredBudgets(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	e := New(Config{Metered: true, Checks: config.Checks{
		Tokens: &config.Limit{Kill: 10_000},
		Cost:   &config.CostLimit{Warn: 0.50, Kill: 1.00},
	}}, now)
	require.Empty(t, e.Observe(msg(tokens(1), cost(0.001)), now), "self-reported figures decide nothing")

	require.Empty(t, e.ObserveMetered(2000, 0.40, true, "gpt-4.1-mini", nil, now))
	w := one(t, e.ObserveMetered(2000, 0.40, true, "gpt-4.1-mini", nil, now))
	require.Equal(t, Cost, w.Check)
	require.Equal(t, Warning, w.Severity)
	require.Equal(t, "$0.80", w.Observed)
	k := one(t, e.ObserveMetered(2000, 0.40, true, "gpt-4.1-mini", nil, now))
	require.Equal(t, Terminal, k.Severity)
	require.Equal(t, "cost $1.20 over kill threshold $1.00", k.Message)

	st := e.State()
	require.EqualValues(t, 6000, st.MeteredTokens)
	require.InDelta(t, 1.20, st.MeteredCostUSD, 1e-9)
	require.EqualValues(t, 1, st.Tokens, "the agent's own report is kept")
	require.InDelta(t, 0.001, st.CostUSD, 1e-9)
}

// Without the gateway nothing changes: the agent's reports decide.
func TestReportedBudgetsWithoutGateway(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	e := New(Config{Checks: config.Checks{Cost: &config.CostLimit{Kill: 1.00}}}, now)
	require.Equal(t, Cost, one(t, e.Observe(msg(cost(2)), now)).Check)
}

// A model with no price: its tokens count, and a warning says the cost
// is unknown — once — never a silent $0.
func TestMeteredUnpricedModel(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	e := New(Config{Metered: true, Checks: config.Checks{Tokens: &config.Limit{Kill: 1500}}}, now)
	w := one(t, e.ObserveMetered(1000, 0, false, "mystery-model", nil, now))
	require.Equal(t, Cost, w.Check)
	require.Equal(t, Warning, w.Severity)
	require.Contains(t, w.Message, `model "mystery-model" has no price`)
	require.True(t, e.State().CostUnknown)
	k := one(t, e.ObserveMetered(1000, 0, false, "mystery-model", nil, now))
	require.Equal(t, Tokens, k.Check, "tokens still counted; the warning was once")
	require.Equal(t, 1, e.State().Warnings)
}

// Tool calls seen on the wire feed tool_loop exactly as TOOL does.
func TestMeteredToolLoop(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	e := New(Config{Metered: true, Checks: config.Checks{ToolLoop: &config.ToolLoop{Repeats: 3}}}, now)
	call := []ToolCall{{Name: "web_search", ArgsSHA256: "ab"}}
	require.Empty(t, e.ObserveMetered(10, 0.01, true, "m", call, now))
	require.Empty(t, e.ObserveMetered(10, 0.01, true, "m", call, now))
	s := one(t, e.ObserveMetered(10, 0.01, true, "m", call, now))
	require.Equal(t, ToolLoop, s.Check)
	require.Equal(t, "web_search", e.State().LastTool)
}

// With the gateway, the wire is the truth for tool_loop: an agent that
// also reports each call it runs (TOOL= through a client) is not counted
// twice — its reports are kept in the state and feed nothing.
func TestMeteredToolReportsNotCountedTwice(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	e := New(Config{Metered: true, Checks: config.Checks{ToolLoop: &config.ToolLoop{Repeats: 3}}}, now)
	call := []ToolCall{{Name: "web_search", ArgsSHA256: "ab"}}
	for i := range 2 {
		require.Empty(t, e.ObserveMetered(10, 0.01, true, "m", call, now), "call %d asked for", i+1)
		require.Empty(t, e.Observe(msg(tool("web_search", "ab")), now), "call %d run and reported", i+1)
	}
	st := e.State()
	require.Equal(t, "web_search", st.ReportedTool, "the agent's report is recorded")
	require.EqualValues(t, 2, st.ReportedTools)
	s := one(t, e.ObserveMetered(10, 0.01, true, "m", call, now))
	require.Equal(t, ToolLoop, s.Check, "the third call on the wire")
	require.Equal(t, "the same tool call web_search repeated 3 times in a row", s.Message)
}

// Reports alone, with the gateway on, decide nothing; the wire's calls
// are not broken up by reports of other tools either.
func TestMeteredToolReportsDecideNothing(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	e := New(Config{Metered: true, Checks: config.Checks{ToolLoop: &config.ToolLoop{Repeats: 2}}}, now)
	for range 5 {
		require.Empty(t, e.Observe(msg(tool("local_grep", "cd")), now))
	}
	require.Empty(t, e.State().LastTool, "last_tool is the wire's")
	call := []ToolCall{{Name: "web_search", ArgsSHA256: "ab"}}
	require.Empty(t, e.ObserveMetered(10, 0.01, true, "m", call, now))
	require.Empty(t, e.Observe(msg(tool("other", "ef")), now))
	require.Equal(t, ToolLoop, one(t, e.ObserveMetered(10, 0.01, true, "m", call, now)).Check)
	require.Equal(t, "web_search", e.State().LastTool)
	require.Equal(t, "other", e.State().ReportedTool)
}

// Without the gateway, the client's reports are what tool_loop counts.
func TestReportedToolLoopWithoutGateway(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	e := New(Config{Checks: config.Checks{ToolLoop: &config.ToolLoop{Repeats: 2}}}, now)
	require.Empty(t, e.Observe(msg(tool("web_search", "ab")), now))
	require.Equal(t, ToolLoop, one(t, e.Observe(msg(tool("web_search", "ab")), now)).Check)
	require.Equal(t, "web_search", e.State().LastTool)
	require.Equal(t, "web_search", e.State().ReportedTool)
}

// A request whose usage was never read is charged at its reservation:
// the first raises a warning (check cost, observed usage_unknown), once,
// and the reserved charges count for the cost budget.
func TestMeteredUsageUnknown(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	e := New(Config{Metered: true, Checks: config.Checks{Cost: &config.CostLimit{Kill: 0.05}}}, now)
	w := one(t, e.UsageUnknown("gpt-test", "chat/completions", 0.0103, now))
	require.Equal(t, Cost, w.Check)
	require.Equal(t, Warning, w.Severity)
	require.Equal(t, "usage_unknown", w.Observed)
	require.Contains(t, w.Message, "charged at its reservation, $0.01")
	require.True(t, e.State().UsageUnknown)
	require.Empty(t, e.UsageUnknown("gpt-test", "chat/completions", 0.0103, now), "once a run")
	for range 4 {
		require.Empty(t, e.ObserveMetered(525, 0.0103, true, "gpt-test", nil, now))
	}
	k := one(t, e.ObserveMetered(525, 0.0103, true, "gpt-test", nil, now))
	require.Equal(t, Terminal, k.Severity)
	require.Equal(t, Cost, k.Check)
	require.Equal(t, 1, e.State().Warnings)
}

// A request the gateway refused for the budget stops the run (terminal,
// check cost or tokens), but only once the requests still in flight have
// ended and their spend is counted: their answers are paid for.
func TestOverBudgetWaitsForRequestsInFlight(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	e := New(Config{Metered: true, Checks: config.Checks{Cost: &config.CostLimit{Kill: 0.10}}}, now)
	for range 3 {
		require.Empty(t, e.RequestSent(now)) // two forwarded, the third refused
	}
	require.Empty(t, e.ResponseEnded(false, now)) // the refusal's end
	require.Empty(t, e.OverBudget(Cost, "worst case does not fit", now))
	require.Empty(t, e.WireSettled(now), "two requests in flight")

	require.Empty(t, e.ResponseEnded(true, now))
	require.Empty(t, e.ObserveMetered(1500, 0.03, true, "m", nil, now))
	require.Empty(t, e.WireSettled(now), "one still in flight")

	require.Empty(t, e.ResponseEnded(true, now))
	require.Empty(t, e.ObserveMetered(1500, 0.03, true, "m", nil, now))
	k := one(t, e.WireSettled(now))
	require.Equal(t, Cost, k.Check)
	require.Equal(t, Terminal, k.Severity)
	require.Equal(t, "$0.06", k.Observed, "the spend of every answered request")
	require.Equal(t, "$0.10", k.Threshold)
	require.Equal(t, "worst case does not fit", k.Message)
	require.Empty(t, e.WireSettled(now), "once")
}

// A request in flight that never ends (a stalled stream, an answer that
// never comes) does not hold the kill of a run out of budget: the refusal
// fires OverBudgetSettle after it, by the clock (NextDeadline, Tick).
func TestOverBudgetDoesNotWaitForeverForRequestsInFlight(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	e := New(Config{Metered: true, Checks: config.Checks{Cost: &config.CostLimit{Kill: 0.10}}}, now)
	require.Empty(t, e.RequestSent(now)) // forwarded, then stalls
	require.Empty(t, e.RequestSent(now)) // refused
	require.Empty(t, e.ResponseEnded(false, now))
	require.Empty(t, e.OverBudget(Cost, "worst case does not fit", now))
	require.Empty(t, e.WireSettled(now), "one request in flight")

	at, ok := e.NextDeadline()
	require.True(t, ok)
	require.Equal(t, now.Add(OverBudgetSettle), at)
	require.Empty(t, e.Tick(at.Add(-time.Millisecond)))
	k := one(t, e.Tick(at))
	require.Equal(t, Cost, k.Check)
	require.Equal(t, Terminal, k.Severity)
	require.Equal(t, "worst case does not fit; 1 requests still in flight after 30s", k.Message)
	require.Empty(t, e.Tick(at.Add(time.Minute)), "once")
	require.Empty(t, e.ResponseEnded(true, at), "the stalled request's end fires nothing more")
	require.Empty(t, e.WireSettled(at))
}

// A refusal for a budget the run no longer has (lifted by a reload) or
// for no budget check stops nothing.
func TestOverBudgetWithoutThatBudget(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	e := New(Config{Metered: true, Checks: config.Checks{Cost: &config.CostLimit{Kill: 1}}}, now)
	require.Empty(t, e.OverBudget(Tokens, "x", now))
	require.Empty(t, e.OverBudget(Check("bogus"), "x", now))
	require.Empty(t, e.WireSettled(now))
}
