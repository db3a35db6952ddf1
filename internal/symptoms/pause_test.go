// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/config"
)

func TestMoneyChecks(t *testing.T) {
	for _, c := range []Check{Cost, Tokens} {
		require.True(t, Money(c), c)
	}
	for _, c := range []Check{HeartbeatTimeout, MaxRuntime, Memory, Steps, ToolLoop, Manual, InternalError} {
		require.False(t, Money(c), c)
	}
}

// A held request (on_budget: pause) fires its budget's terminal symptom
// at once, with a request in flight; while it is the terminal symptom no
// deadline is armed (the tree is frozen: it cannot beat). Resume with a
// raised budget makes the run live again: the liveness deadlines run
// from the resume, not from the last heartbeat before the pause, the
// budget fires again at its new threshold, and the first pause stays in
// the log.
func TestPauseAndResume(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	checks := config.Checks{HeartbeatTimeout: 10 * time.Second, ProgressTimeout: time.Minute, Cost: &config.CostLimit{Kill: 1.00}}
	e := New(Config{Metered: true, Checks: checks}, t0)
	require.Empty(t, e.Observe(msg(ready), t0))
	require.Empty(t, e.ObserveMetered(100, 0.90, true, "m", nil, t0))
	require.Empty(t, e.RequestSent(t0.Add(time.Second)))

	held := one(t, e.BudgetHeld(Cost, "does not fit", t0.Add(time.Second)))
	require.Equal(t, Terminal, held.Severity)
	require.Equal(t, "$0.90", held.Observed)
	require.Equal(t, "$1.00", held.Threshold)
	_, armed := e.NextDeadline()
	require.False(t, armed, "paused: nothing is armed")
	require.Empty(t, e.Tick(t0.Add(time.Hour)), "an hour frozen fires nothing")

	resumed := t0.Add(time.Hour)
	raised := checks
	raised.Cost = &config.CostLimit{Kill: 2.00}
	require.Empty(t, e.Resume(Config{Metered: true, Checks: raised}, resumed))
	_, terminal := e.Terminal()
	require.False(t, terminal, "the pause is no longer the run's end")
	require.Empty(t, e.ResponseEnded(true, resumed.Add(time.Second)))
	at, armed := e.NextDeadline()
	require.True(t, armed)
	require.Equal(t, resumed.Add(time.Second).Add(10*time.Second), at, "the heartbeat deadline counts from the resume (and the held request's end)")

	again := one(t, e.ObserveMetered(100, 1.20, true, "m", nil, resumed.Add(2*time.Second)))
	require.Equal(t, Cost, again.Check)
	require.Equal(t, "cost $2.10 over kill threshold $2.00", again.Message)
	require.Len(t, e.Log(), 2, "both the pause and the second crossing are kept")
}

// Resume applies only to a pause of a money check: a run dying of
// anything else stays dying.
func TestResumeOnlyAfterMoney(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	e := New(Config{Checks: config.Checks{HeartbeatTimeout: time.Second}}, t0)
	require.Empty(t, e.Observe(msg(watchdog), t0))
	require.Equal(t, HeartbeatTimeout, one(t, e.Tick(t0.Add(2*time.Second))).Check)
	require.Empty(t, e.Resume(Config{Checks: config.Checks{HeartbeatTimeout: time.Hour}}, t0.Add(3*time.Second)))
	s, terminal := e.Terminal()
	require.True(t, terminal)
	require.Equal(t, HeartbeatTimeout, s.Check)
}
