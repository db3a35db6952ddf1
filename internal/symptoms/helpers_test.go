// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/heartbeat"
)

// field sets one key of a test message.
type field func(*heartbeat.Message)

// msg builds a message the way the socket would after parsing.
func msg(fs ...field) *heartbeat.Message {
	m := new(heartbeat.Message)
	for _, f := range fs {
		f(m)
	}
	return m
}

func flag(f heartbeat.Field) field { return func(m *heartbeat.Message) { m.Set(f) } }

var (
	ready    = flag(heartbeat.FieldReady)    // READY=1
	watchdog = flag(heartbeat.FieldWatchdog) // WATCHDOG=1
	trigger  = flag(heartbeat.FieldTrigger)  // WATCHDOG=trigger
	stopping = flag(heartbeat.FieldStopping) // STOPPING=1
)

func progress(n uint64) field {
	return func(m *heartbeat.Message) { m.Progress = n; m.Set(heartbeat.FieldProgress) }
}

func tokens(n uint64) field {
	return func(m *heartbeat.Message) { m.Tokens = n; m.Set(heartbeat.FieldTokens) }
}

func cost(usd float64) field {
	return func(m *heartbeat.Message) { m.CostUSD = usd; m.Set(heartbeat.FieldCostUSD) }
}

func status(s string) field {
	return func(m *heartbeat.Message) { m.Status = s; m.Set(heartbeat.FieldStatus) }
}

func errorText(s string) field {
	return func(m *heartbeat.Message) { m.Error = s; m.Set(heartbeat.FieldError) }
}

// tool is TOOL=name plus, when args is not empty, TOOL_ARGS_SHA256=args.
func tool(name, args string) field {
	return func(m *heartbeat.Message) {
		m.Tool = name
		m.Set(heartbeat.FieldTool)
		if args != "" {
			m.ToolArgsSHA256 = args
			m.Set(heartbeat.FieldToolArgsSHA256)
		}
	}
}

// extend is EXTEND_TIMEOUT_USEC.
func extend(d time.Duration) field { return extendUSec(uint64(d / time.Microsecond)) }

func extendUSec(n uint64) field {
	return func(m *heartbeat.Message) { m.ExtendTimeoutUSec = n; m.Set(heartbeat.FieldExtendTimeoutUSec) }
}

// watchdogUSec is WATCHDOG_USEC.
func watchdogUSec(n uint64) field {
	return func(m *heartbeat.Message) { m.WatchdogUSec = n; m.Set(heartbeat.FieldWatchdogUSec) }
}

// requireTime compares instants (time.Time's == also compares the
// monotonic reading and the location).
func requireTime(t testing.TB, want, got time.Time, msgAndArgs ...any) {
	t.Helper()
	require.Truef(t, want.Equal(got), "at %s, want %s (off by %s) %v", got, want, got.Sub(want), msgAndArgs)
}

// requireDeadline checks the engine's next deadline.
func requireDeadline(t testing.TB, e *Engine, want time.Time) {
	t.Helper()
	at, ok := e.NextDeadline()
	require.True(t, ok, "no deadline armed, want %s", want)
	requireTime(t, want, at, "next deadline")
}

// requireNoDeadline checks that nothing is armed.
func requireNoDeadline(t testing.TB, e *Engine) {
	t.Helper()
	at, ok := e.NextDeadline()
	require.False(t, ok, "deadline armed at %s", at)
}

// one requires exactly one symptom and returns it.
func one(t testing.TB, syms []Symptom) Symptom {
	t.Helper()
	require.Len(t, syms, 1, "%+v", syms)
	return syms[0]
}

// sleepUntil advances the (virtual) clock to at.
func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }

// event is a message the agent sends, at an offset from its start.
type event struct {
	at time.Duration
	m  *heartbeat.Message
}

// beats are WATCHDOG=1 every interval from `from` to `to` inclusive.
func beats(from, to, interval time.Duration, fs ...field) []event {
	var evs []event
	for at := from; at <= to; at += interval {
		evs = append(evs, event{at, msg(append([]field{watchdog}, fs...)...)})
	}
	return evs
}

// drive is the supervisor loop in virtual time, in one goroutine: it
// delivers the events at their offsets from start and calls Tick at every
// deadline in between (a deadline that falls on an event is left to
// Observe, which evaluates deadlines first), until horizon. It returns
// every symptom, in order. Call it inside a synctest bubble.
func drive(t testing.TB, e *Engine, start time.Time, evs []event, horizon time.Duration) []Symptom {
	t.Helper()
	steps := make([]step, len(evs))
	for i, ev := range evs {
		steps[i] = step{ev.at, func(e *Engine, now time.Time) []Symptom { return e.Observe(ev.m, now) }}
	}
	return driveSteps(t, e, start, steps, horizon)
}

// step is one input of the engine at an offset from the start: a message
// (Observe), or an event of the run's LLM traffic (RequestSent,
// ResponseEnded).
type step struct {
	at    time.Duration
	apply func(e *Engine, now time.Time) []Symptom
}

// driveSteps is drive for any input: each step is applied at its offset,
// and every deadline in between is ticked (one that falls on a step is
// left to the step, whose entry point evaluates deadlines first).
func driveSteps(t testing.TB, e *Engine, start time.Time, steps []step, horizon time.Duration) []Symptom {
	t.Helper()
	var out []Symptom
	for i := 0; ; {
		next := start.Add(horizon)
		if i < len(steps) {
			require.LessOrEqual(t, steps[i].at, horizon)
			next = start.Add(steps[i].at)
		}
		if at, ok := e.NextDeadline(); ok && at.Before(next) {
			sleepUntil(at)
			syms := e.Tick(time.Now())
			require.NotEmpty(t, syms, "Tick at the next deadline %s fired nothing", at)
			out = append(out, syms...)
			continue
		}
		sleepUntil(next)
		if i == len(steps) {
			return out
		}
		out = append(out, steps[i].apply(e, time.Now())...)
		i++
	}
}

// terminals picks the terminal symptoms.
func terminals(syms []Symptom) []Symptom {
	var out []Symptom
	for _, s := range syms {
		if s.Severity == Terminal {
			out = append(out, s)
		}
	}
	return out
}
