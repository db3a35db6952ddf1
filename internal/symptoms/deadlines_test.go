// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
)

// deadlineCase is an agent's messages and the first terminal symptom they
// lead to, in virtual time.
type deadlineCase struct {
	name    string
	cfg     Config
	evs     []event
	horizon time.Duration
	check   Check         // "" = nothing fires within horizon
	at      time.Duration // when it fires, from the start
}

func runDeadlineCases(t *testing.T, cases []deadlineCase) {
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
				s, fired := requireFirstTerminal(t, start, terminals(drive(t, e, start, tc.evs, horizon)), tc.check, tc.at)
				if !fired {
					return
				}
				term, ok := e.Terminal()
				require.True(t, ok)
				require.Equal(t, s, term)
				requireNoDeadline(t, e)
			})
		})
	}
}

// requireFirstTerminal requires the first of ts to be check at start+at,
// or ts to be empty when check is "" (fired false).
func requireFirstTerminal(t *testing.T, start time.Time, ts []Symptom, check Check, at time.Duration) (s Symptom, fired bool) {
	t.Helper()
	if check == "" {
		require.Empty(t, ts)
		return Symptom{}, false
	}
	require.NotEmpty(t, ts, "nothing fired")
	s = ts[0]
	require.Equal(t, check, s.Check, "%+v", s)
	requireTime(t, start.Add(at), s.At, s.Message)
	return s, true
}

func TestStartupTimeout(t *testing.T) {
	cfg := Config{Checks: config.Checks{StartupTimeout: 10 * time.Second, HeartbeatTimeout: 3 * time.Second}}
	runDeadlineCases(t, []deadlineCase{
		{name: "no READY: fires at start+timeout", cfg: cfg,
			check: StartupTimeout, at: 10 * time.Second},
		{name: "STATUS is no READY", cfg: cfg,
			evs:   []event{{5 * time.Second, msg(status("loading model"))}},
			check: StartupTimeout, at: 10 * time.Second},
		{name: "READY disarms it and arms the heartbeat deadline", cfg: cfg,
			evs:   []event{{4 * time.Second, msg(ready)}},
			check: HeartbeatTimeout, at: 7 * time.Second},
		{name: "a first WATCHDOG=1 disarms it", cfg: cfg,
			evs:   []event{{9 * time.Second, msg(watchdog)}},
			check: HeartbeatTimeout, at: 12 * time.Second},
		{name: "READY at the deadline is too late", cfg: cfg,
			evs:   []event{{10 * time.Second, msg(ready)}},
			check: StartupTimeout, at: 10 * time.Second},
		{name: "READY a nanosecond before the deadline is in time", cfg: cfg,
			evs:   []event{{10*time.Second - 1, msg(ready)}},
			check: HeartbeatTimeout, at: 13*time.Second - 1},
		{name: "EXTEND_TIMEOUT_USEC extends it from now", cfg: cfg,
			evs:   []event{{8 * time.Second, msg(extend(20 * time.Second))}},
			check: StartupTimeout, at: 28 * time.Second},
		{name: "a shorter extension does not shorten it", cfg: cfg,
			evs:   []event{{1 * time.Second, msg(extend(2 * time.Second))}},
			check: StartupTimeout, at: 10 * time.Second},
		{name: "extensions chain", cfg: cfg,
			evs: []event{
				{8 * time.Second, msg(extend(5 * time.Second))},
				{12 * time.Second, msg(extend(5 * time.Second))},
			},
			check: StartupTimeout, at: 17 * time.Second},
		{name: "READY within the extension", cfg: cfg,
			evs: []event{
				{8 * time.Second, msg(extend(20 * time.Second))},
				{20 * time.Second, msg(ready)},
			},
			check: HeartbeatTimeout, at: 23 * time.Second},
		{name: "an extension after READY is the heartbeat deadline's", cfg: cfg,
			evs: []event{
				{1 * time.Second, msg(ready)},
				{2 * time.Second, msg(extend(time.Minute))},
			},
			check: HeartbeatTimeout, at: 62 * time.Second},
		{name: "an infinite extension (USEC_INFINITY) is not negative: it is capped", cfg: cfg,
			evs:     []event{{1 * time.Second, msg(extendUSec(math.MaxUint64))}},
			horizon: time.Hour,
			check:   StartupTimeout, at: 10*time.Second + config.DefaultMaxExtension},
		{name: "WATCHDOG_USEC is no heartbeat", cfg: cfg,
			evs:   []event{{2 * time.Second, msg(watchdogUSec(1e6))}},
			check: StartupTimeout, at: 10 * time.Second},
		{name: "WATCHDOG_USEC before READY applies after it", cfg: cfg,
			evs: []event{
				{2 * time.Second, msg(watchdogUSec(1e6))},
				{5 * time.Second, msg(ready)},
			},
			check: HeartbeatTimeout, at: 6 * time.Second},
		{name: "no startup timeout (not normalized): nothing before the first beat",
			cfg: Config{Checks: config.Checks{HeartbeatTimeout: 3 * time.Second}}},
	})
}

func TestHeartbeatTimeout(t *testing.T) {
	cfg := Config{Checks: config.Checks{StartupTimeout: 10 * time.Second, HeartbeatTimeout: 3 * time.Second}}
	runDeadlineCases(t, []deadlineCase{
		{name: "a steady beat never fires", cfg: cfg,
			evs: beats(time.Second, 10*time.Minute, time.Second), horizon: 10 * time.Minute},
		{name: "beats just inside the timeout never fire", cfg: cfg,
			evs: beats(time.Second, 10*time.Minute, 3*time.Second-1), horizon: 10 * time.Minute},
		{name: "stopped beats fire timeout after the last one", cfg: cfg,
			evs:   beats(time.Second, 20*time.Second, time.Second),
			check: HeartbeatTimeout, at: 23 * time.Second},
		{name: "a beat exactly at the deadline is too late", cfg: cfg,
			evs:   beats(time.Second, 30*time.Second, 3*time.Second),
			check: HeartbeatTimeout, at: 4 * time.Second},
		{name: "READY then silence", cfg: cfg,
			evs:   []event{{2 * time.Second, msg(ready)}},
			check: HeartbeatTimeout, at: 5 * time.Second},
		{name: "READY again is no heartbeat", cfg: cfg,
			evs:   []event{{1 * time.Second, msg(ready)}, {3 * time.Second, msg(ready)}},
			check: HeartbeatTimeout, at: 4 * time.Second},
	})
}

// TestLateHeartbeatDoesNotRescue: when the loop was busy and its timer
// could not run, a heartbeat read after the deadline still loses: Observe
// evaluates the deadlines at now before it applies the message.
func TestLateHeartbeatDoesNotRescue(t *testing.T) {
	cfg := Config{Checks: config.Checks{HeartbeatTimeout: 3 * time.Second}}
	for _, tc := range []struct {
		name  string
		after time.Duration // since READY
		fires bool
	}{
		{"a nanosecond before", 3*time.Second - 1, false},
		{"at the deadline", 3 * time.Second, true},
		{"a millisecond late", 3*time.Second + time.Millisecond, true},
		{"an hour late", time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				e := New(cfg, start)
				require.Empty(t, e.Observe(msg(ready), start))
				time.Sleep(tc.after)
				syms := e.Observe(msg(watchdog), time.Now())
				if !tc.fires {
					require.Empty(t, syms)
					requireDeadline(t, e, time.Now().Add(3*time.Second))
					return
				}
				s := one(t, syms)
				require.Equal(t, HeartbeatTimeout, s.Check)
				requireTime(t, time.Now(), s.At) // detected late, and said so
				require.Equal(t, fmtSeconds(tc.after), s.Observed)
				term, ok := e.Terminal()
				require.True(t, ok)
				require.Equal(t, s, term)
				require.Equal(t, uint64(1), e.State().Heartbeats, "the late beat is still recorded")
			})
		})
	}
}

// TestTickAtDeadline: each timeout fires at its deadline to the
// nanosecond, with At equal to the deadline, and not a nanosecond earlier.
func TestTickAtDeadline(t *testing.T) {
	base := config.Checks{StartupTimeout: 10 * time.Second, HeartbeatTimeout: 3 * time.Second,
		ProgressTimeout: 5 * time.Second, MaxRuntime: time.Minute}
	for _, tc := range []struct {
		name      string
		cfg       Config
		evs       []event
		deadline  time.Duration
		check     Check
		observed  string
		threshold string
		message   string
	}{
		{name: "startup_timeout", cfg: Config{Checks: base},
			deadline: 10 * time.Second, check: StartupTimeout, observed: "10.00s", threshold: "10s",
			message: "no READY or heartbeat 10.00s after start (startup timeout 10s)"},
		{name: "heartbeat_timeout", cfg: Config{Checks: base},
			evs:      []event{{1 * time.Second, msg(ready)}, {2 * time.Second, msg(watchdog, progress(1))}},
			deadline: 5 * time.Second, check: HeartbeatTimeout, observed: "3.00s", threshold: "3s",
			message: "no heartbeat for 3.00s (timeout 3s)"},
		{name: "progress_timeout",
			cfg: Config{Checks: base},
			evs: append([]event{{1 * time.Second, msg(ready, progress(7))}},
				beats(2*time.Second, 5*time.Second, time.Second, progress(7))...),
			deadline: 6 * time.Second, check: ProgressTimeout, observed: "5.00s", threshold: "5s",
			message: "no progress for 5.00s (last step 7, timeout 5s)"},
		{name: "max_runtime",
			cfg:      Config{Checks: config.Checks{MaxRuntime: time.Minute}},
			evs:      []event{{1 * time.Second, msg(ready)}},
			deadline: time.Minute, check: MaxRuntime, observed: "60.00s", threshold: "1m0s",
			message: "ran for 60.00s, over the runtime limit 1m0s"},
		{name: "stop_timeout",
			cfg:      Config{Checks: base, StopTimeout: 5 * time.Second},
			evs:      []event{{1 * time.Second, msg(ready)}, {2 * time.Second, msg(watchdog, stopping)}},
			deadline: 7 * time.Second, check: StopTimeout, observed: "5.00s", threshold: "5s",
			message: "announced STOPPING 5.00s ago and is still running (stop timeout 5s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				e := New(tc.cfg, start)
				last := time.Duration(0)
				if n := len(tc.evs); n > 0 {
					last = tc.evs[n-1].at
				}
				require.Empty(t, drive(t, e, start, tc.evs, last))
				deadline := start.Add(tc.deadline)
				requireDeadline(t, e, deadline)

				sleepUntil(deadline.Add(-1))
				require.Empty(t, e.Tick(time.Now()), "a nanosecond early")
				time.Sleep(1)
				s := one(t, e.Tick(time.Now()))
				require.Equal(t, Symptom{At: s.At, Check: tc.check, Severity: Terminal,
					Observed: tc.observed, Threshold: tc.threshold, Message: tc.message}, s)
				requireTime(t, deadline, s.At)
				require.Empty(t, e.Tick(time.Now()), "fires once")
				require.Equal(t, []Symptom{s}, e.Log())
			})
		})
	}
}

func TestWatchdogUSec(t *testing.T) {
	clamped := config.Checks{HeartbeatTimeout: 10 * time.Second,
		HeartbeatTimeoutMin: time.Second, HeartbeatTimeoutMax: 10 * time.Second}
	for _, tc := range []struct {
		name   string
		checks config.Checks
		usec   uint64
		want   time.Duration // 0 = no heartbeat deadline
	}{
		{"tightened", clamped, 2e6, 2 * time.Second},
		{"clamped to the min", clamped, 1e5, time.Second},
		{"clamped to the max", clamped, 60e6, 10 * time.Second},
		{"0 (systemd: off) cannot disable it", clamped, 0, 10 * time.Second},
		{"USEC_INFINITY is no negative timeout", clamped, math.MaxUint64, 10 * time.Second},
		{"just past the largest duration", clamped, math.MaxInt64/1000 + 1, 10 * time.Second},
		{"the max defaults to the timeout",
			config.Checks{HeartbeatTimeout: 10 * time.Second}, 60e6, 10 * time.Second},
		{"no min: any tightening",
			config.Checks{HeartbeatTimeout: 10 * time.Second}, 1, time.Microsecond},
		{"no timeout and no max: the agent cannot arm one", config.Checks{}, 2e6, 0},
		{"a max without a timeout lets the agent arm one",
			config.Checks{HeartbeatTimeoutMax: 30 * time.Second}, 5e6, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				e := New(Config{Checks: tc.checks}, start)
				require.Empty(t, e.Observe(msg(ready), start))
				time.Sleep(2 * time.Second)
				require.Empty(t, e.Observe(msg(watchdogUSec(tc.usec)), time.Now()))
				require.Equal(t, tc.want, e.State().HeartbeatTimeout)
				if tc.want == 0 {
					requireNoDeadline(t, e)
					return
				}
				// It restarts the heartbeat clock, as systemd does.
				requireDeadline(t, e, time.Now().Add(tc.want))
			})
		})
	}
}

func TestProgressTimeout(t *testing.T) {
	cfg := Config{Checks: config.Checks{StartupTimeout: time.Minute, HeartbeatTimeout: 3 * time.Second,
		ProgressTimeout: 5 * time.Second}}
	var increasing []event
	for i := 1; i <= 30; i++ {
		increasing = append(increasing, event{time.Duration(i) * time.Second, msg(watchdog, progress(uint64(i)))})
	}
	runDeadlineCases(t, []deadlineCase{
		{name: "beats continue, progress does not", cfg: cfg,
			evs: append([]event{{0, msg(ready, progress(7))}},
				beats(time.Second, time.Minute, time.Second, progress(7))...),
			check: ProgressTimeout, at: 5 * time.Second},
		{name: "beats without PROGRESS at all", cfg: cfg,
			evs:   append([]event{{2 * time.Second, msg(ready)}}, beats(3*time.Second, time.Minute, time.Second)...),
			check: ProgressTimeout, at: 7 * time.Second},
		{name: "each increase resets the clock", cfg: cfg,
			evs:   append(increasing, beats(31*time.Second, time.Minute, time.Second, progress(30))...),
			check: ProgressTimeout, at: 35 * time.Second},
		{name: "a decrease is no progress", cfg: cfg,
			evs: []event{
				{0, msg(ready, progress(10))},
				{2 * time.Second, msg(watchdog, progress(9))},
				{4 * time.Second, msg(watchdog, progress(9))},
			},
			check: ProgressTimeout, at: 5 * time.Second},
		{name: "the startup deadline governs before READY", cfg: cfg,
			evs:   append([]event{{30 * time.Second, msg(ready)}}, beats(31*time.Second, time.Minute, time.Second)...),
			check: ProgressTimeout, at: 35 * time.Second},
		{name: "without a startup deadline it runs from the start",
			cfg:   Config{Checks: config.Checks{ProgressTimeout: 5 * time.Second}},
			check: ProgressTimeout, at: 5 * time.Second},
	})
}

func TestMaxRuntime(t *testing.T) {
	runDeadlineCases(t, []deadlineCase{
		{name: "a healthy agent still ends at the limit",
			cfg: Config{Checks: config.Checks{HeartbeatTimeout: 3 * time.Second, ProgressTimeout: 5 * time.Second,
				MaxRuntime: time.Minute}},
			evs:   append([]event{{0, msg(ready)}}, increasingBeats(time.Second, 2*time.Minute)...),
			check: MaxRuntime, at: time.Minute},
		{name: "it runs while stopping",
			cfg:   Config{Checks: config.Checks{MaxRuntime: time.Minute}, StopTimeout: time.Hour},
			evs:   []event{{50 * time.Second, msg(stopping)}},
			check: MaxRuntime, at: time.Minute},
	})
}

// increasingBeats are WATCHDOG=1 with an increasing PROGRESS every second.
func increasingBeats(from, to time.Duration) []event {
	var evs []event
	for at := from; at <= to; at += time.Second {
		evs = append(evs, event{at, msg(watchdog, progress(uint64(at/time.Second)))})
	}
	return evs
}

func TestStopping(t *testing.T) {
	cfg := Config{Checks: config.Checks{StartupTimeout: 10 * time.Second, HeartbeatTimeout: 3 * time.Second,
		ProgressTimeout: 5 * time.Second}, StopTimeout: 5 * time.Second}
	running := append([]event{{0, msg(ready)}}, increasingBeats(time.Second, 10*time.Second)...)
	then := func(evs ...event) []event { return append(append([]event(nil), running...), evs...) }
	runDeadlineCases(t, []deadlineCase{
		{name: "pauses the heartbeat and progress checks, arms stop_timeout", cfg: cfg,
			evs:   then(event{10 * time.Second, msg(stopping)}),
			check: StopTimeout, at: 15 * time.Second},
		{name: "EXTEND_TIMEOUT_USEC extends it", cfg: cfg,
			evs:   then(event{10 * time.Second, msg(stopping)}, event{12 * time.Second, msg(extend(10 * time.Second))}),
			check: StopTimeout, at: 22 * time.Second},
		{name: "extended in the same datagram", cfg: cfg,
			evs:   then(event{10 * time.Second, msg(stopping, extend(10*time.Second))}),
			check: StopTimeout, at: 20 * time.Second},
		{name: "a shorter extension does not shorten it", cfg: cfg,
			evs:   then(event{10 * time.Second, msg(stopping, extend(time.Second))}),
			check: StopTimeout, at: 15 * time.Second},
		{name: "an extension before STOPPING does not carry over", cfg: cfg,
			evs:   then(event{10 * time.Second, msg(watchdog, extend(time.Minute))}, event{11 * time.Second, msg(stopping)}),
			check: StopTimeout, at: 16 * time.Second},
		{name: "beats while stopping do not matter", cfg: cfg,
			evs:   then(append([]event{{10 * time.Second, msg(stopping)}}, beats(11*time.Second, 30*time.Second, time.Second)...)...),
			check: StopTimeout, at: 15 * time.Second},
		{name: "during startup", cfg: cfg,
			evs:   []event{{2 * time.Second, msg(stopping)}},
			check: StopTimeout, at: 7 * time.Second},
		{name: "without a stop timeout nothing is armed",
			cfg: Config{Checks: cfg.Checks},
			evs: then(event{10 * time.Second, msg(stopping)})},
	})
}

func TestNextDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		requireNoDeadline(t, New(Config{}, start))

		e := New(Config{Checks: config.Checks{StartupTimeout: 10 * time.Second, HeartbeatTimeout: 3 * time.Second,
			ProgressTimeout: 5 * time.Second, MaxRuntime: 20 * time.Second}}, start)
		requireDeadline(t, e, start.Add(10*time.Second)) // startup; progress waits for READY

		time.Sleep(time.Second)
		require.Empty(t, e.Observe(msg(ready, progress(1)), time.Now()))
		requireDeadline(t, e, start.Add(4*time.Second)) // heartbeat

		for range 3 { // beats without progress: the progress deadline comes first
			time.Sleep(time.Second)
			require.Empty(t, e.Observe(msg(watchdog), time.Now()))
		}
		requireDeadline(t, e, start.Add(6*time.Second))
	})
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := New(Config{Checks: config.Checks{HeartbeatTimeout: 3 * time.Second, MaxRuntime: 20 * time.Second}}, start)
		require.Empty(t, e.Observe(msg(ready), start))
		for range 18 {
			time.Sleep(time.Second)
			require.Empty(t, e.Observe(msg(watchdog), time.Now()))
		}
		requireDeadline(t, e, start.Add(20*time.Second)) // max_runtime before the heartbeat at 21s
		time.Sleep(2 * time.Second)
		require.Equal(t, MaxRuntime, one(t, e.Tick(time.Now())).Check)
		requireNoDeadline(t, e)
	})
}

// TestLateTickEarliestWins: a Tick that finds several deadlines passed
// reports the earliest one, detected now.
func TestLateTickEarliestWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := New(Config{Checks: config.Checks{StartupTimeout: 10 * time.Second, MaxRuntime: 5 * time.Second}}, start)
		time.Sleep(20 * time.Second)
		s := one(t, e.Tick(time.Now()))
		require.Equal(t, MaxRuntime, s.Check)
		requireTime(t, time.Now(), s.At)
		require.Equal(t, "ran for 20.00s, over the runtime limit 5s", s.Message)
		require.Empty(t, e.Tick(time.Now()), "startup_timeout is not reported after the terminal one")
	})
}

// TestFirstTerminalWins: later terminal symptoms are returned and logged
// but Terminal keeps the first; each check fires at most once.
func TestFirstTerminalWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := New(Config{Checks: config.Checks{HeartbeatTimeout: 3 * time.Second,
			Tokens: &config.Limit{Kill: 100}, Cost: &config.CostLimit{Kill: 1}}}, start)
		require.Empty(t, e.Observe(msg(ready), start))

		time.Sleep(5 * time.Second) // the timer did not run in time
		all := msg(watchdog, tokens(200), cost(2), status("giving up"), trigger)
		syms := e.Observe(all, time.Now())
		var checks []Check
		for _, s := range syms {
			require.Equal(t, Terminal, s.Severity)
			checks = append(checks, s.Check)
		}
		require.Equal(t, []Check{HeartbeatTimeout, Tokens, Cost, SelfReported}, checks)
		term, ok := e.Terminal()
		require.True(t, ok)
		require.Equal(t, syms[0], term)
		require.Equal(t, syms, e.Log())
		requireNoDeadline(t, e)

		time.Sleep(time.Hour)
		require.Empty(t, e.Observe(all, time.Now()), "each check fires at most once")
		require.Empty(t, e.Tick(time.Now()))
		m, first := e.Manual("alice", "too late", time.Now())
		require.False(t, first)
		term2, _ := e.Terminal()
		require.Equal(t, term, term2)
		require.Equal(t, append(syms, m), e.Log())
	})
}

// TestTimerDrivenCaller is the supervisor's pattern: one goroutine owns
// the engine and one timer armed at NextDeadline, re-armed after every
// event; heartbeats arrive from another goroutine through a channel. In
// virtual time the detection is exactly at the deadline: no lateness, and
// no reset-vs-expiry race (a beat just before the deadline always wins).
func TestTimerDrivenCaller(t *testing.T) {
	const timeout = 3 * time.Second
	for _, tc := range []struct {
		name     string
		interval time.Duration // between beats
		beats    int
	}{
		{"one beat", time.Second, 1},
		{"steady beats then silence", time.Second, 50},
		{"beats a nanosecond inside the timeout", timeout - 1, 20},
		{"beats 100ms inside the timeout", timeout - 100*time.Millisecond, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				e := New(Config{Checks: config.Checks{StartupTimeout: 10 * time.Second, HeartbeatTimeout: timeout}}, start)

				msgs := make(chan *heartbeat.Message)
				sent := make(chan time.Time, 1) // when the last beat was sent
				go func() {                     // the agent
					defer close(msgs)
					var last time.Time
					for i := range tc.beats {
						time.Sleep(tc.interval)
						last = time.Now()
						if i == 0 {
							msgs <- msg(ready)
						} else {
							msgs <- msg(watchdog)
						}
					}
					sent <- last
				}()

				type result struct {
					sym      Symptom
					deadline time.Time // the timer's deadline when it fired
					ticks    int
				}
				done := make(chan result)
				go func() { // the owner: engine and timer
					timer := time.NewTimer(time.Hour)
					defer timer.Stop()
					var armed time.Time
					ticks := 0
					for {
						if at, ok := e.NextDeadline(); ok {
							armed = at
							timer.Reset(time.Until(at))
						} else {
							timer.Stop()
						}
						select {
						case m, ok := <-msgs:
							if !ok {
								msgs = nil
								continue
							}
							assert.Empty(t, e.Observe(m, time.Now()))
						case <-timer.C:
							ticks++
							syms := e.Tick(time.Now())
							if s, ok := e.Terminal(); ok {
								assert.Equal(t, []Symptom{s}, syms)
								done <- result{s, armed, ticks}
								return
							}
							assert.Empty(t, syms)
						}
					}
				}()

				r := <-done
				last := <-sent
				require.Equal(t, HeartbeatTimeout, r.sym.Check)
				requireTime(t, last.Add(timeout), r.sym.At, "fires timeout after the last beat")
				requireTime(t, r.deadline, r.sym.At, "zero lateness")
				require.Equal(t, fmtSeconds(timeout), r.sym.Observed)
				require.Equal(t, 1, r.ticks, "the timer never fired for a deadline a beat had moved")
			})
		})
	}
}
