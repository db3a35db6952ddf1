// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// sent is a request of the run reaching the gateway; ended its end.
func sent(at time.Duration) step {
	return step{at, func(e *Engine, now time.Time) []Symptom { return e.RequestSent(now) }}
}

func ended(at time.Duration, answered bool) step {
	return step{at, func(e *Engine, now time.Time) []Symptom { return e.ResponseEnded(answered, now) }}
}

// told is a message from the agent's own client.
func told(at time.Duration, fs ...field) step {
	m := msg(fs...)
	return step{at, func(e *Engine, now time.Time) []Symptom { return e.Observe(m, now) }}
}

// calls are requests every interval from `from` to `to` inclusive, each
// taking took, answered or failed.
func calls(from, to, interval, took time.Duration, answered bool) []step {
	var out []step
	for at := from; at <= to; at += interval {
		out = append(out, sent(at), ended(at+took, answered))
	}
	return out
}

func join(parts ...[]step) []step {
	var out []step
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// wireCase is a run's traffic (and messages) and the first terminal
// symptom they lead to, in virtual time.
type wireCase struct {
	name    string
	cfg     Config
	steps   []step
	horizon time.Duration // default 10 minutes
	check   Check         // "" = nothing fires within horizon
	at      time.Duration
}

func runWireCases(t *testing.T, cases []wireCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				e := New(tc.cfg, start)
				horizon := tc.horizon
				if horizon == 0 {
					horizon = 10 * time.Minute
				}
				requireFirstTerminal(t, start, terminals(driveSteps(t, e, start, tc.steps, horizon)), tc.check, tc.at)
			})
		})
	}
}

// An agent with no client, behind the gateway, under the timeouts of a
// normalized agent file (startup_timeout: the 10s floor): its traffic is
// its heartbeat, its answered requests its steps.
func TestWireLiveness(t *testing.T) {
	const ms = time.Millisecond
	hb := Config{Metered: true, Checks: config.Checks{StartupTimeout: 10 * time.Second, HeartbeatTimeout: 3 * time.Second}}
	both := hb
	both.ProgressTimeout = 3 * time.Second
	runWireCases(t, []wireCase{
		{name: "a loop calling its model every 0.5s lives", cfg: both,
			steps: calls(500*ms, 10*time.Minute-time.Second, 500*ms, 100*ms, true)},
		{name: "calls just inside the timeout live", cfg: hb,
			steps: calls(time.Second, 10*time.Minute, 3*time.Second-1, 0, true)},
		{name: "no request, no beat: startup_timeout", cfg: both,
			check: StartupTimeout, at: 10 * time.Second},
		{name: "the first request is READY: the startup is over", cfg: hb,
			steps: []step{sent(2 * time.Second), ended(2*time.Second+100*ms, true)},
			check: HeartbeatTimeout, at: 5*time.Second + 100*ms},
		{name: "a request sent is a heartbeat", cfg: hb,
			steps:   []step{sent(2 * time.Second), ended(2*time.Second+100*ms, true), sent(5 * time.Second)},
			horizon: 7 * time.Second},
		{name: "a request sent at the deadline is too late", cfg: hb,
			steps: []step{sent(2 * time.Second), ended(2*time.Second+100*ms, true), sent(5*time.Second + 100*ms)},
			check: HeartbeatTimeout, at: 5*time.Second + 100*ms},
		{name: "the loop stops (a spin, a hung await): heartbeat_timeout, not progress_timeout", cfg: both,
			steps: calls(500*ms, 2*time.Second, 500*ms, 100*ms, true),
			check: HeartbeatTimeout, at: 5*time.Second + 100*ms},
		{name: "a request in flight holds the heartbeat: a ten-minute answer lives", cfg: both,
			steps:   []step{sent(time.Second), ended(601*time.Second, true)},
			horizon: 603 * time.Second},
		{name: "the heartbeat runs again from the end of the flight", cfg: hb,
			steps: []step{sent(time.Second), ended(601*time.Second, true)}, horizon: 11 * time.Minute,
			check: HeartbeatTimeout, at: 604 * time.Second},
		{name: "overlapping requests: held until the last one ends", cfg: hb,
			steps: []step{sent(time.Second), sent(2 * time.Second), ended(3*time.Second, true), ended(20*time.Second, true)},
			check: HeartbeatTimeout, at: 23 * time.Second},
		{name: "a flight the gateway ends (upstream timeout): no heartbeat after it", cfg: hb,
			steps: []step{sent(time.Second), ended(301*time.Second, false)},
			check: HeartbeatTimeout, at: 304 * time.Second},
		{name: "a failed flight past the progress deadline: progress_timeout as it ends", cfg: both,
			steps: []step{sent(time.Second), ended(301*time.Second, false)},
			check: ProgressTimeout, at: 301 * time.Second},
		{name: "failed requests are heartbeats, not steps: a retry loop dies of progress_timeout", cfg: both,
			steps: calls(500*ms, time.Minute, 500*ms, 100*ms, false),
			check: ProgressTimeout, at: 3*time.Second + 500*ms},
		{name: "an answer after failures is a step", cfg: both,
			steps: join(calls(500*ms, 2*time.Second, 500*ms, 100*ms, false), calls(2500*ms, 5*time.Second, 500*ms, 100*ms, true)),
			check: HeartbeatTimeout, at: 8*time.Second + 100*ms},
		{name: "max_runtime is not held", cfg: Config{Metered: true, Checks: config.Checks{MaxRuntime: 5 * time.Second, HeartbeatTimeout: 3 * time.Second}},
			steps: []step{sent(time.Second), ended(time.Minute, true)},
			check: MaxRuntime, at: 5 * time.Second},
		{name: "steps counts answered requests", cfg: Config{Metered: true, Checks: config.Checks{Steps: &config.Limit{Kill: 5}}},
			steps: join(calls(time.Second, 10*time.Second, time.Second, 100*ms, false), calls(11*time.Second, time.Minute, time.Second, 100*ms, true)),
			check: Steps, at: 16*time.Second + 100*ms},
		{name: "an agent's own beats count beside the wire's", cfg: hb,
			steps: join([]step{told(time.Second, ready)}, []step{told(3*time.Second, watchdog), told(5*time.Second, watchdog)},
				calls(7*time.Second, 20*time.Second, time.Second, 100*ms, true), []step{told(22*time.Second, watchdog)}),
			check: HeartbeatTimeout, at: 25 * time.Second},
		{name: "an agent's own PROGRESS: answered requests are no steps", cfg: both,
			steps: join([]step{told(time.Second, ready, progress(1))}, calls(1500*ms, time.Minute, 500*ms, 100*ms, true)),
			check: ProgressTimeout, at: 4 * time.Second},
		{name: "an agent's own PROGRESS: a request in flight does not hold it", cfg: both,
			steps: []step{told(time.Second, ready, progress(1)), sent(2 * time.Second), ended(time.Minute, true)},
			check: ProgressTimeout, at: 4 * time.Second},
		{name: "an agent's own PROGRESS after wire steps: its counter from 0", cfg: both,
			steps: join(calls(500*ms, 2*time.Second, 500*ms, 100*ms, true), []step{told(2500*ms, progress(1))},
				calls(3*time.Second, time.Minute, 500*ms, 100*ms, true)),
			check: ProgressTimeout, at: 5500 * ms},
		{name: "STOPPING pauses the heartbeat, wire or not", cfg: Config{Metered: true, StopTimeout: 5 * time.Second,
			Checks: config.Checks{HeartbeatTimeout: 3 * time.Second}},
			steps: []step{sent(time.Second), ended(time.Second+100*ms, true), told(2*time.Second, stopping)},
			check: StopTimeout, at: 7 * time.Second},
	})
}

// What the wire leaves in the state, for ps and the certificate: READY
// at the first request, the requests and those in flight, and the
// progress it counted until the agent's own PROGRESS replaced it.
func TestWireState(t *testing.T) {
	e := New(Config{Metered: true, Checks: config.Checks{Steps: &config.Limit{Kill: 3}}}, t0)
	require.Empty(t, e.RequestSent(at(1)))
	require.Empty(t, e.RequestSent(at(2)))
	st := e.State()
	require.True(t, st.Ready)
	requireTime(t, at(1), st.ReadyAt)
	requireTime(t, at(2), st.LastHeartbeat)
	require.EqualValues(t, 2, st.WireRequests)
	require.Equal(t, 2, st.InFlight)
	require.Zero(t, st.Heartbeats, "Heartbeats counts the agent's own WATCHDOG=1")

	require.Empty(t, e.ResponseEnded(true, at(3)))
	require.Empty(t, e.ResponseEnded(false, at(4)))
	st = e.State()
	require.Equal(t, 0, st.InFlight)
	require.EqualValues(t, 1, st.Progress, "one answered")
	requireTime(t, at(3), st.LastProgressAt)
	require.False(t, st.OwnProgress)
	require.Empty(t, e.ResponseEnded(true, at(5)), "an end with nothing in flight (a lost arrival) is counted, not negative")
	require.Equal(t, 0, st.InFlight)

	require.Empty(t, e.Observe(msg(progress(1)), at(6)), "the agent's own counter, from 0: 1 is not over 3")
	st = e.State()
	require.True(t, st.OwnProgress)
	require.EqualValues(t, 1, st.Progress)
	requireTime(t, at(6), st.LastProgressAt)
	for i := range 10 {
		require.Empty(t, e.RequestSent(at(7+i)))
		require.Empty(t, e.ResponseEnded(true, at(7+i)), "answered requests are no steps now")
	}
	require.EqualValues(t, 1, e.State().Progress)
	require.Equal(t, Steps, one(t, e.Observe(msg(progress(4)), at(20))).Check)
}

// The messages of a wire run's timeouts say what was missing.
func TestWireMessages(t *testing.T) {
	cfg := Config{Metered: true, Checks: config.Checks{StartupTimeout: 10 * time.Second, HeartbeatTimeout: 3 * time.Second,
		ProgressTimeout: 5 * time.Second}}
	e := New(cfg, t0)
	require.Equal(t, "no READY, heartbeat or LLM request 10.00s after start (startup timeout 10s)",
		one(t, e.Tick(at(10))).Message)

	e = New(cfg, t0)
	require.Empty(t, e.RequestSent(at(1)))
	require.Empty(t, e.ResponseEnded(true, at(2)))
	require.Equal(t, "no heartbeat or LLM traffic for 3.00s (timeout 3s)", one(t, e.Tick(at(5))).Message)

	e = New(cfg, t0)
	require.Empty(t, e.RequestSent(at(1)))
	require.Empty(t, e.ResponseEnded(true, at(2)))
	for i := range 3 {
		require.Empty(t, e.RequestSent(at(3+i)))
		require.Empty(t, e.ResponseEnded(false, at(3+i)))
	}
	require.Equal(t, "no progress for 5.00s (last step 1, timeout 5s; a step is an answered LLM request)",
		one(t, e.RequestSent(at(7))).Message)
}

// An agent's first PROGRESS= ends the hold a request in flight put on the
// progress deadline: one that passed meanwhile (the counter starts from
// 0, no increase) fires in the same Observe, and no deadline in the past
// is left armed.
func TestWireOwnProgressEndsTheHold(t *testing.T) {
	e := New(Config{Metered: true, Checks: config.Checks{HeartbeatTimeout: 3 * time.Second, ProgressTimeout: time.Second}}, t0)
	require.Empty(t, e.RequestSent(t0.Add(100*time.Millisecond)))
	now := t0.Add(1700 * time.Millisecond)
	s := one(t, e.Observe(msg(progress(0)), now))
	require.Equal(t, ProgressTimeout, s.Check)
	requireTime(t, now, s.At)
	requireNoDeadline(t, e)
}
