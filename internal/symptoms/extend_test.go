// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// every is the message made of fs, every interval from `from` to `to`
// inclusive (no WATCHDOG=1 unless fs has it).
func every(from, to, interval time.Duration, fs ...field) []event {
	var evs []event
	for at := from; at <= to; at += interval {
		evs = append(evs, event{at, msg(fs...)})
	}
	return evs
}

// startThen is the event ev at offset 0 followed by evs.
func startThen(ev *event, evs ...event) []event { return append([]event{*ev}, evs...) }

// extendChecks: a 3s heartbeat, a 10s startup timeout, a 1m cap.
var extendChecks = config.Checks{StartupTimeout: 10 * time.Second, HeartbeatTimeout: 3 * time.Second,
	MaxExtension: time.Minute}

func TestExtendWhileRunning(t *testing.T) {
	cfg := Config{Checks: extendChecks}
	readyAt0 := &event{0, msg(ready)}
	runDeadlineCases(t, []deadlineCase{
		{name: "extends the heartbeat deadline from now", cfg: cfg,
			evs:   startThen(readyAt0, event{2 * time.Second, msg(extend(20 * time.Second))}),
			check: HeartbeatTimeout, at: 22 * time.Second},
		{name: "a shorter extension does not shorten it", cfg: cfg,
			evs:   startThen(readyAt0, event{2 * time.Second, msg(watchdog)}, event{3 * time.Second, msg(extend(time.Second))}),
			check: HeartbeatTimeout, at: 5 * time.Second},
		{name: "a heartbeat ends the extension", cfg: cfg,
			evs:   startThen(readyAt0, event{2 * time.Second, msg(extend(20 * time.Second))}, event{5 * time.Second, msg(watchdog)}),
			check: HeartbeatTimeout, at: 8 * time.Second},
		{name: "a heartbeat and an extension in one datagram extend from the beat", cfg: cfg,
			evs:   startThen(readyAt0, event{2 * time.Second, msg(watchdog, extend(20*time.Second))}),
			check: HeartbeatTimeout, at: 22 * time.Second},
		{name: "extensions chain", cfg: cfg,
			evs: startThen(readyAt0,
				event{1 * time.Second, msg(extend(10 * time.Second))},
				event{9 * time.Second, msg(extend(10 * time.Second))}),
			check: HeartbeatTimeout, at: 19 * time.Second},
		{name: "WATCHDOG_USEC restarts the clock and ends the extension", cfg: cfg,
			evs: startThen(readyAt0,
				event{1 * time.Second, msg(extend(30 * time.Second))},
				event{5 * time.Second, msg(watchdogUSec(2e6))}),
			check: HeartbeatTimeout, at: 7 * time.Second},
		{name: "progress_timeout is not extended",
			cfg:   Config{Checks: config.Checks{HeartbeatTimeout: 3 * time.Second, ProgressTimeout: 5 * time.Second}},
			evs:   []event{{0, msg(ready, progress(1))}, {1 * time.Second, msg(extend(time.Minute))}},
			check: ProgressTimeout, at: 5 * time.Second},
		{name: "max_runtime is not extended",
			cfg:   Config{Checks: config.Checks{HeartbeatTimeout: 3 * time.Second, MaxRuntime: 30 * time.Second}},
			evs:   []event{{0, msg(ready)}, {1 * time.Second, msg(extend(time.Minute))}},
			check: MaxRuntime, at: 30 * time.Second},
		{name: "while stopping the stop deadline is extended, not the heartbeat's",
			cfg: Config{Checks: extendChecks, StopTimeout: 5 * time.Second},
			evs: startThen(readyAt0, event{1 * time.Second, msg(extend(20 * time.Second))},
				event{2 * time.Second, msg(stopping)}, event{3 * time.Second, msg(extend(10 * time.Second))}),
			check: StopTimeout, at: 13 * time.Second},
	})
}

// TestExtendCap: extensions in a row never push a deadline more than
// max_extension beyond the unextended one, however large or frequent.
func TestExtendCap(t *testing.T) {
	cfg := Config{Checks: extendChecks, StopTimeout: 5 * time.Second}
	const maxExt = time.Minute
	running := []event{{0, msg(ready)}, {1 * time.Second, msg(watchdog)}}
	then := func(evs ...event) []event { return append(append([]event(nil), running...), evs...) }
	runDeadlineCases(t, []deadlineCase{
		{name: "heartbeat: a huge N is clamped to the last beat + timeout + cap", cfg: cfg,
			evs:   then(event{2 * time.Second, msg(extend(time.Hour))}),
			check: HeartbeatTimeout, at: 1*time.Second + 3*time.Second + maxExt},
		{name: "heartbeat: USEC_INFINITY is clamped", cfg: cfg,
			evs:   then(event{2 * time.Second, msg(extendUSec(math.MaxUint64))}),
			check: HeartbeatTimeout, at: 4*time.Second + maxExt},
		{name: "heartbeat: EXTEND_TIMEOUT_USEC in a loop without beats dies at the cap", cfg: cfg,
			evs:   then(every(2*time.Second, 10*time.Minute, time.Second, extend(2*time.Second))...),
			check: HeartbeatTimeout, at: 4*time.Second + maxExt},
		{name: "heartbeat: a beat starts a new row", cfg: cfg,
			evs: then(append(every(2*time.Second, 50*time.Second, time.Second, extend(2*time.Second)),
				event{51 * time.Second, msg(watchdog)}, event{52 * time.Second, msg(extend(time.Hour))})...),
			check: HeartbeatTimeout, at: 54*time.Second + maxExt},
		{name: "startup: clamped to start + startup timeout + cap", cfg: cfg,
			evs:   []event{{1 * time.Second, msg(extend(time.Hour))}},
			check: StartupTimeout, at: 10*time.Second + maxExt},
		{name: "startup: EXTEND_TIMEOUT_USEC in a loop dies at the cap", cfg: cfg,
			evs:   every(time.Second, 10*time.Minute, time.Second, extend(5*time.Second)),
			check: StartupTimeout, at: 10*time.Second + maxExt},
		{name: "stop: clamped to STOPPING + stop timeout + cap", cfg: cfg,
			evs:   then(event{2 * time.Second, msg(stopping)}, event{3 * time.Second, msg(extend(time.Hour))}),
			check: StopTimeout, at: 7*time.Second + maxExt},
		{name: "stop: EXTEND_TIMEOUT_USEC in a loop dies at the cap", cfg: cfg,
			evs:   then(append([]event{{2 * time.Second, msg(stopping)}}, every(3*time.Second, 10*time.Minute, time.Second, extend(2*time.Second))...)...),
			check: StopTimeout, at: 7*time.Second + maxExt},
		{name: "max_extension 0 is the default",
			cfg:     Config{Checks: config.Checks{HeartbeatTimeout: 3 * time.Second}},
			evs:     []event{{0, msg(ready)}, {1 * time.Second, msg(extendUSec(math.MaxUint64))}},
			horizon: time.Hour,
			check:   HeartbeatTimeout, at: 3*time.Second + config.DefaultMaxExtension},
	})
}

// TestExtendLoopsVersusMaxRuntime: an agent that keeps itself alive with
// EXTEND_TIMEOUT_USEC or WATCHDOG_USEC instead of heartbeats cannot live
// past max_runtime, nor loosen its heartbeat timeout.
func TestExtendLoopsVersusMaxRuntime(t *testing.T) {
	// The cap is longer than the runtime limit: max_runtime must end it.
	long := Config{Checks: config.Checks{HeartbeatTimeout: 3 * time.Second, MaxRuntime: 2 * time.Minute,
		MaxExtension: time.Hour}}
	runDeadlineCases(t, []deadlineCase{
		{name: "EXTEND_TIMEOUT_USEC in a loop", cfg: long,
			evs:   append([]event{{0, msg(ready)}}, every(time.Second, 10*time.Minute, time.Second, extend(time.Hour))...),
			check: MaxRuntime, at: 2 * time.Minute},
		{name: "WATCHDOG_USEC in a loop", cfg: long,
			evs:   append([]event{{0, msg(ready)}}, every(time.Second, 10*time.Minute, 2*time.Second, watchdogUSec(math.MaxUint64))...),
			check: MaxRuntime, at: 2 * time.Minute},
		{name: "EXTEND_TIMEOUT_USEC and WATCHDOG_USEC in turns", cfg: long,
			evs: append([]event{{0, msg(ready)}},
				every(time.Second, 10*time.Minute, time.Second, watchdogUSec(36e8), extend(time.Hour))...),
			check: MaxRuntime, at: 2 * time.Minute},
		{name: "WATCHDOG_USEC asking for more is clamped to the configured timeout", cfg: long,
			evs:   []event{{0, msg(ready)}, {1 * time.Second, msg(watchdogUSec(36e8))}},
			check: HeartbeatTimeout, at: 4 * time.Second},
		{name: "WATCHDOG_USEC in a loop, stopped: the clamped timeout applies", cfg: long,
			evs:   append([]event{{0, msg(ready)}}, every(time.Second, 30*time.Second, 2*time.Second, watchdogUSec(36e8))...),
			check: HeartbeatTimeout, at: 32 * time.Second},
	})
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := New(long, start)
		require.Empty(t, e.Observe(msg(ready), start))
		for range 10 {
			time.Sleep(time.Second)
			e.Observe(msg(watchdogUSec(math.MaxUint64)), time.Now())
			require.Equal(t, 3*time.Second, e.State().HeartbeatTimeout, "never loosened")
		}
	})
}

// TestExtendClampWarning: a clamp is a warning, once per deadline, that
// says what was asked and what applied; the terminal symptom then says
// the deadline was extended.
func TestExtendClampWarning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := New(Config{Checks: extendChecks}, start)

		time.Sleep(time.Second)
		w := one(t, e.Observe(msg(extend(time.Hour)), time.Now()))
		require.Equal(t, Symptom{At: time.Now(), Check: StartupTimeout, Severity: Warning, Observed: "1h0m0s", Threshold: "1m0s",
			Message: "EXTEND_TIMEOUT_USEC asked for 1h0m0s; clamped to max_extension 1m0s past start + startup timeout"}, w)
		require.Empty(t, e.Observe(msg(extend(time.Hour)), time.Now()), "once per deadline")
		requireDeadline(t, e, start.Add(10*time.Second+time.Minute))

		require.Empty(t, e.Observe(msg(ready), time.Now()))
		require.Empty(t, e.Observe(msg(extend(time.Minute)), time.Now()), "within the cap: no warning")
		requireDeadline(t, e, time.Now().Add(time.Minute))

		time.Sleep(time.Second)
		w = one(t, e.Observe(msg(extend(2*time.Minute)), time.Now()))
		require.Equal(t, HeartbeatTimeout, w.Check)
		require.Equal(t, "EXTEND_TIMEOUT_USEC asked for 2m0s; clamped to max_extension 1m0s past last heartbeat + heartbeat timeout", w.Message)
		require.Empty(t, e.Observe(msg(extend(2*time.Minute)), time.Now()), "once per deadline")
		lastBeat := start.Add(time.Second)
		requireDeadline(t, e, lastBeat.Add(3*time.Second+time.Minute))

		sleepUntil(lastBeat.Add(3*time.Second + time.Minute))
		s := one(t, e.Tick(time.Now()))
		require.Equal(t, "no heartbeat for 63.00s (timeout 3s, extended by 1m0s)", s.Message)
		require.Equal(t, "3s", s.Threshold)
		require.Equal(t, 2, e.State().Warnings)
	})
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := New(Config{Checks: config.Checks{MaxExtension: time.Minute}}, start)
		require.Empty(t, e.Observe(msg(ready), start))
		require.Empty(t, e.Observe(msg(extend(time.Hour)), start), "no heartbeat deadline: nothing to clamp")
		requireNoDeadline(t, e)
	})
}
