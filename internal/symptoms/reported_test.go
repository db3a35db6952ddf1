// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
)

// t0 is the start of the tests that need no timers: pure decisions take now.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// at is the i-th second after t0.
func at(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }

// want is an expected symptom; At is the step it fires at.
type want struct {
	check     Check
	severity  Severity
	observed  string
	threshold string
	message   string
}

func (w want) symptom(at time.Time) Symptom {
	return Symptom{At: at, Check: w.check, Severity: w.severity, Observed: w.observed,
		Threshold: w.threshold, Message: w.message}
}

func TestBudgets(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   config.Checks
		steps []field
		want  map[int]want // by step; every other step produces nothing
	}{
		{
			name:  "tokens warn then kill",
			cfg:   config.Checks{Tokens: &config.Limit{Warn: 100, Kill: 200}},
			steps: []field{tokens(50), tokens(100), tokens(101), tokens(150), tokens(200), tokens(201), tokens(300)},
			want: map[int]want{
				2: {Tokens, Warning, "101", "100", "tokens 101 over warning threshold 100"},
				5: {Tokens, Terminal, "201", "200", "tokens 201 over kill threshold 200"},
			},
		},
		{
			name:  "tokens straight over kill: no warning",
			cfg:   config.Checks{Tokens: &config.Limit{Warn: 100, Kill: 200}},
			steps: []field{tokens(1000)},
			want:  map[int]want{0: {Tokens, Terminal, "1000", "200", "tokens 1000 over kill threshold 200"}},
		},
		{
			name:  "tokens past MaxInt64 are over, not negative",
			cfg:   config.Checks{Tokens: &config.Limit{Kill: 200}},
			steps: []field{tokens(math.MaxUint64)},
			want: map[int]want{0: {Tokens, Terminal, "9223372036854775807", "200",
				"tokens 9223372036854775807 over kill threshold 200"}},
		},
		{
			name:  "tokens warn only",
			cfg:   config.Checks{Tokens: &config.Limit{Warn: 100}},
			steps: []field{tokens(101), tokens(1e9)},
			want:  map[int]want{0: {Tokens, Warning, "101", "100", "tokens 101 over warning threshold 100"}},
		},
		{
			name:  "cost warn then kill",
			cfg:   config.Checks{Cost: &config.CostLimit{Warn: 1, Kill: 2}},
			steps: []field{cost(0.5), cost(1), cost(1.5), cost(1.75), cost(2), cost(2.25), cost(3)},
			want: map[int]want{
				2: {Cost, Warning, "$1.50", "$1.00", "cost $1.50 over warning threshold $1.00"},
				5: {Cost, Terminal, "$2.25", "$2.00", "cost $2.25 over kill threshold $2.00"},
			},
		},
		{
			name:  "cost in fractions of a cent",
			cfg:   config.Checks{Cost: &config.CostLimit{Warn: 0.005}},
			steps: []field{cost(0.004), cost(0.0061)},
			want:  map[int]want{1: {Cost, Warning, "$0.0061", "$0.0050", "cost $0.0061 over warning threshold $0.0050"}},
		},
		{
			name:  "steps warn then kill",
			cfg:   config.Checks{Steps: &config.Limit{Warn: 10, Kill: 20}},
			steps: []field{progress(5), progress(10), progress(11), progress(20), progress(21)},
			want: map[int]want{
				2: {Steps, Warning, "11", "10", "steps 11 over warning threshold 10"},
				4: {Steps, Terminal, "21", "20", "steps 21 over kill threshold 20"},
			},
		},
		{
			name:  "checks off",
			cfg:   config.Checks{},
			steps: []field{tokens(1e12), cost(1e9), progress(1e12), errorText("x"), tool("a", "")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := New(Config{Checks: tc.cfg}, t0)
			var log []Symptom
			warnings := 0
			for i, f := range tc.steps {
				got := e.Observe(msg(f), at(i))
				w, ok := tc.want[i]
				if !ok {
					require.Empty(t, got, "step %d", i)
					continue
				}
				s := w.symptom(at(i))
				require.Equal(t, []Symptom{s}, got, "step %d", i)
				log = append(log, s)
				if s.Severity == Warning {
					warnings++
				}
			}
			require.Equal(t, log, e.Log())
			require.Equal(t, warnings, e.State().Warnings)
		})
	}
}

func TestErrorStreak(t *testing.T) {
	e := New(Config{Checks: config.Checks{ErrorStreak: &config.Limit{Warn: 2, Kill: 4}}}, t0)
	warning := func(n int, last string) []Symptom {
		return []Symptom{{At: at(n), Check: ErrorStreak, Severity: Warning, Observed: "2", Threshold: "2",
			Message: "2 errors in a row without progress (warning threshold 2; last: " + last + ")"}}
	}
	require.Empty(t, e.Observe(msg(errorText("timeout")), at(0)))
	require.Equal(t, warning(1, "rate limited"), e.Observe(msg(errorText("rate limited")), at(1)))
	require.Empty(t, e.Observe(msg(errorText("again")), at(2)), "warned once")

	// The same PROGRESS is no progress; an increase resets the streak and
	// re-arms its warning.
	require.Empty(t, e.Observe(msg(progress(0)), at(3)))
	require.Equal(t, 3, e.State().ErrorStreak)
	require.Empty(t, e.Observe(msg(progress(1)), at(4)))
	require.Equal(t, 0, e.State().ErrorStreak)
	require.Empty(t, e.Observe(msg(errorText("a")), at(5)))
	require.Equal(t, warning(6, "b"), e.Observe(msg(errorText("b")), at(6)))
	require.Empty(t, e.Observe(msg(errorText("c")), at(7)))

	// An ERROR and a PROGRESS increase in one message: the streak restarts
	// at that error.
	require.Empty(t, e.Observe(msg(progress(2), errorText("d")), at(8)))
	require.Equal(t, 1, e.State().ErrorStreak)
	require.Equal(t, warning(9, "e"), e.Observe(msg(errorText("e")), at(9)))
	require.Empty(t, e.Observe(msg(errorText("f")), at(10)))
	require.Equal(t, []Symptom{{At: at(11), Check: ErrorStreak, Severity: Terminal, Observed: "4", Threshold: "4",
		Message: "4 errors in a row without progress (kill threshold 4; last: g)"}},
		e.Observe(msg(errorText("g")), at(11)))
	require.Empty(t, e.Observe(msg(errorText("h")), at(12)), "fires once")

	st := e.State()
	require.Equal(t, uint64(11), st.Errors)
	require.Equal(t, 5, st.ErrorStreak)
	require.Equal(t, "h", st.LastError)
	require.Equal(t, 3, st.Warnings)
	term, ok := e.Terminal()
	require.True(t, ok)
	require.Equal(t, ErrorStreak, term.Check)
}

func TestToolLoop(t *testing.T) {
	hash := func(s string) string { return strings.Repeat(s, 64) }
	a, b, c := tool("search", hash("a")), tool("fetch", hash("b")), tool("write", hash("c"))
	repeat := func(n int, fs ...field) []field {
		var out []field
		for range n {
			out = append(out, fs...)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		calls   []field
		fireAt  int // index of the call that fires; -1 = none
		message string
	}{
		{"the same call 5 times", repeat(5, a), 4,
			"the same tool call search repeated 5 times in a row"},
		{"the same call 4 times", repeat(4, a), -1, ""},
		{"the same call 5 times after others", append(repeat(3, b, c), repeat(5, a)...), 10,
			"the same tool call search repeated 5 times in a row"},
		{"the same tool with different arguments", []field{
			tool("search", hash("1")), tool("search", hash("2")), tool("search", hash("3")),
			tool("search", hash("4")), tool("search", hash("5")), tool("search", hash("6")),
		}, -1, ""},
		{"the same tool without argument hashes is the same call",
			repeat(5, tool("search", "")), 4, "the same tool call search repeated 5 times in a row"},
		{"A-B 5 times", repeat(5, a, b), 9,
			"the tool calls search → fetch repeated as a cycle 5 times"},
		{"A-B 4 times and A", append(repeat(4, a, b), a), -1, ""},
		{"A-B-C 5 times", repeat(5, a, b, c), 14,
			"the tool calls search → fetch → write repeated as a cycle 5 times"},
		{"A-A-B 5 times", repeat(5, a, a, b), 14,
			"the tool calls search → search → fetch repeated as a cycle 5 times"},
		{"5 different calls", []field{a, b, c, tool("read", hash("d")), tool("list", hash("e"))}, -1, ""},
		{"A-A-B-B is no cycle of 2", repeat(10, a, a, b, b), -1, ""},
		{"4 the same, one other, 4 the same", append(append(repeat(4, a), b), repeat(4, a)...), -1, ""},
		{"A-B-C-D cycles are too long", repeat(10, a, b, c, tool("read", hash("d"))), -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := New(Config{Checks: config.Checks{ToolLoop: &config.ToolLoop{Repeats: 5}}}, t0)
			for i, f := range tc.calls {
				got := e.Observe(msg(f), at(i))
				if i != tc.fireAt {
					require.Empty(t, got, "call %d", i)
					continue
				}
				require.Equal(t, []Symptom{{At: at(i), Check: ToolLoop, Severity: Terminal,
					Observed: "5 repeats", Threshold: "5", Message: tc.message}}, got)
			}
			_, fired := e.Terminal()
			require.Equal(t, tc.fireAt >= 0, fired)
		})
	}
}

func TestToolLoopReconfigure(t *testing.T) {
	loop := func(n int) Config { return Config{Checks: config.Checks{ToolLoop: &config.ToolLoop{Repeats: n}}} }
	a := tool("search", strings.Repeat("a", 64))

	t.Run("fewer repeats count the calls already seen", func(t *testing.T) {
		e := New(loop(5), t0)
		for i := range 3 {
			require.Empty(t, e.Observe(msg(a), at(i)))
		}
		s := one(t, e.Reconfigure(loop(3), at(3)))
		require.Equal(t, Symptom{At: at(3), Check: ToolLoop, Severity: Terminal, Observed: "3 repeats", Threshold: "3",
			Message: "the same tool call search repeated 3 times in a row"}, s)
		require.Empty(t, e.Observe(msg(a), at(4)), "fires once")
	})
	t.Run("more repeats", func(t *testing.T) {
		e := New(loop(5), t0)
		for i := range 4 {
			require.Empty(t, e.Observe(msg(a), at(i)))
		}
		require.Empty(t, e.Reconfigure(loop(8), at(4)))
		for i := 4; i < 7; i++ {
			require.Empty(t, e.Observe(msg(a), at(i)))
		}
		require.Equal(t, "8 repeats", one(t, e.Observe(msg(a), at(7))).Observed)
	})
	t.Run("off forgets the history", func(t *testing.T) {
		e := New(loop(5), t0)
		for i := range 4 {
			require.Empty(t, e.Observe(msg(a), at(i)))
		}
		require.Empty(t, e.Reconfigure(Config{}, at(4)))
		require.Empty(t, e.Observe(msg(a), at(5)))
		require.Empty(t, e.Reconfigure(loop(5), at(6)))
		for i := 7; i < 11; i++ {
			require.Empty(t, e.Observe(msg(a), at(i)))
		}
		require.Equal(t, ToolLoop, one(t, e.Observe(msg(a), at(11))).Check)
	})
	t.Run("repeats below 2 is off", func(t *testing.T) {
		for _, n := range []int{-3, 0, 1} {
			e := New(loop(n), t0)
			for i := range 20 {
				require.Empty(t, e.Observe(msg(a), at(i)), "repeats %d", n)
			}
		}
	})
	t.Run("the last tool is kept", func(t *testing.T) {
		e := New(Config{}, t0)
		require.Empty(t, e.Observe(msg(a), t0))
		require.Equal(t, "search", e.State().LastTool)
	})
}

func TestSelfReported(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fs      []field
		message string
	}{
		{"with STATUS", []field{status("stuck in a refund loop"), trigger},
			"agent asked to be killed (WATCHDOG=trigger): stuck in a refund loop"},
		{"without STATUS", []field{trigger},
			"agent asked to be killed (WATCHDOG=trigger)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := New(Config{}, t0) // no check configured: the agent may always ask
			s := one(t, e.Observe(msg(tc.fs...), at(1)))
			require.Equal(t, Symptom{At: at(1), Check: SelfReported, Severity: Terminal,
				Observed: "WATCHDOG=trigger", Message: tc.message}, s)
			term, ok := e.Terminal()
			require.True(t, ok)
			require.Equal(t, s, term)
			require.Empty(t, e.Observe(msg(trigger), at(2)), "fires once")
		})
	}
}

func TestManual(t *testing.T) {
	e := New(Config{}, t0)
	s, first := e.Manual("alice", "runaway spend", at(1))
	require.True(t, first)
	require.Equal(t, Symptom{At: at(1), Check: Manual, Severity: Terminal, Observed: "alice",
		Message: "killed by alice: runaway spend", Operator: "alice", Reason: "runaway spend"}, s)
	term, ok := e.Terminal()
	require.True(t, ok)
	require.Equal(t, s, term)

	s2, first := e.Manual("signal:SIGTERM", "", at(2))
	require.False(t, first, "another terminal symptom already fired")
	require.Equal(t, "killed by signal:SIGTERM", s2.Message)
	require.Equal(t, "signal:SIGTERM", s2.Operator)
	require.Empty(t, s2.Reason)
	term, _ = e.Terminal()
	require.Equal(t, s, term, "the first one stays")
	require.Equal(t, []Symptom{s, s2}, e.Log(), "later ones are logged")

	// After another check fired, a manual kill is logged, not the trigger.
	e = New(Config{}, t0)
	one(t, e.Observe(msg(trigger), at(1)))
	_, first = e.Manual("bob", "", at(2))
	require.False(t, first)
	term, _ = e.Terminal()
	require.Equal(t, SelfReported, term.Check)
	require.Len(t, e.Log(), 2)
}

// TestState: what the agent reported is kept for ps and the certificate.
func TestState(t *testing.T) {
	e := New(Config{}, t0)
	m := msg(ready, status("warming up"), progress(3), tokens(1200), cost(0.5), tool("search", ""), errorText("oops"))
	m.MainPID, m.Errno, m.DumpSignal = 4242, 11, "SIGUSR1"
	m.Set(heartbeat.FieldMainPID)
	m.Set(heartbeat.FieldErrno)
	m.Set(heartbeat.FieldDumpSignal)
	require.Empty(t, e.Observe(m, at(1)))
	require.Empty(t, e.Observe(msg(watchdog), at(2)))
	st := e.State()
	errno := 11
	require.Equal(t, State{Started: t0, Ready: true, ReadyAt: at(1), Status: "warming up", MainPID: 4242, Errno: &errno,
		Progress: 3, LastProgressAt: at(1), OwnProgress: true, Tokens: 1200, CostUSD: 0.5, LastTool: "search", ReportedTool: "search",
		ReportedTools: 1, LastHeartbeat: at(2),
		Heartbeats: 1, Messages: 2, Errors: 1, LastError: "oops", ErrorStreak: 1, DumpSignal: "SIGUSR1"}, st)
}

// TestLogKeepsTheTerminal: the log is bounded, but the symptom that killed
// the agent is always in it (the certificate is built from the log).
func TestLogKeepsTheTerminal(t *testing.T) {
	e := New(Config{Checks: config.Checks{ErrorStreak: &config.Limit{Warn: 1}}}, t0)
	const warnings = 2 * maxLog
	for i := range warnings {
		one(t, e.Observe(msg(errorText(fmt.Sprint(i))), at(2*i)))
		require.Empty(t, e.Observe(msg(progress(uint64(i+1))), at(2*i+1)))
	}
	s := one(t, e.Observe(msg(trigger), at(2*warnings)))
	log := e.Log()
	require.Len(t, log, maxLog)
	require.Equal(t, s, log[maxLog-1])
	require.Equal(t, Warning, log[maxLog-2].Severity)
	require.Equal(t, warnings, e.State().Warnings, "every warning is counted")

	_, first := e.Manual("alice", "", at(2*warnings+1))
	require.False(t, first)
	require.Len(t, e.Log(), maxLog)
	term, _ := e.Terminal()
	require.Equal(t, s, term)
}
