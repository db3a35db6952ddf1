// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"fmt"
	"time"
)

// deadline is one armed timeout.
type deadline struct {
	check Check
	at    time.Time
	// since is what the clock counts from, for the message; at is
	// since + timeout, or later when EXTEND_TIMEOUT_USEC extended it.
	since   time.Time
	timeout time.Duration
}

// maxDeadlines is how many deadlines can be armed at once: max_runtime and
// stop_timeout, or max_runtime, startup or heartbeat, and progress.
const maxDeadlines = 3

// deadlines lists the timeouts currently armed, in buf (so that the hot
// path does not allocate). Once a terminal symptom fired none is armed:
// nothing more will be acted on; in shadow mode every check that has not
// fired yet stays armed, until an operator's kill.
func (e *Engine) deadlines(buf *[maxDeadlines]deadline) []deadline {
	ds := buf[:0]
	if e.terminal != nil && (!e.cfg.Shadow || e.manual) {
		return ds
	}
	c := e.cfg
	if c.MaxRuntime > 0 {
		ds = append(ds, deadline{MaxRuntime, e.st.Started.Add(c.MaxRuntime), e.st.Started, c.MaxRuntime})
	}
	if e.st.Stopping {
		if c.StopTimeout > 0 {
			at := e.extended(e.stoppingAt.Add(c.StopTimeout), e.stopExtend)
			ds = append(ds, deadline{StopTimeout, at, e.stoppingAt, c.StopTimeout})
		}
		return e.unfired(ds) // heartbeat and progress checks pause while stopping
	}
	// After a pause (Resume) the liveness clocks run from its end.
	starting := !e.beatSeen && c.StartupTimeout > 0
	if starting {
		since := later(e.st.Started, e.resumedAt)
		at := e.extended(since.Add(c.StartupTimeout), e.startupExtend)
		ds = append(ds, deadline{StartupTimeout, at, since, c.StartupTimeout})
	} else if t := e.st.HeartbeatTimeout; e.beatSeen && t > 0 && !e.inFlight() {
		since := later(e.st.LastHeartbeat, e.resumedAt)
		at := e.extended(since.Add(t), e.heartbeatExtend)
		ds = append(ds, deadline{HeartbeatTimeout, at, since, t})
	}
	// The startup deadline governs until READY or the first heartbeat (a
	// slow start is no wedged main loop); without one, an agent that never
	// reports must still die, so the progress clock runs from the start.
	// A request in flight holds the heartbeat deadline, and the progress
	// deadline of a run whose steps are its answered requests (wire.go).
	if c.ProgressTimeout > 0 && !starting && !e.progressHeld() {
		since := later(e.st.LastProgressAt, e.resumedAt)
		ds = append(ds, deadline{ProgressTimeout, since.Add(c.ProgressTimeout), since, c.ProgressTimeout})
	}
	return e.unfired(ds)
}

// unfired drops the deadlines of checks that already fired (shadow mode:
// each check fires at most once), in place.
func (e *Engine) unfired(ds []deadline) []deadline {
	if e.terminal == nil {
		return ds // nothing fired yet
	}
	n := 0
	for _, d := range ds {
		if !e.fired[d.check] {
			ds[n] = d
			n++
		}
	}
	return ds[:n]
}

// NextDeadline is the earliest armed deadline; ok is false when none is.
// The caller arms one timer for it and calls Tick when it fires.
func (e *Engine) NextDeadline() (at time.Time, ok bool) {
	var buf [maxDeadlines]deadline
	for _, d := range e.deadlines(&buf) {
		if !ok || d.at.Before(at) {
			at, ok = d.at, true
		}
	}
	if e.overBudget != nil {
		if due := e.overBudgetSince.Add(OverBudgetSettle); !ok || due.Before(at) {
			at, ok = due, true
		}
	}
	return at, ok
}

// Tick evaluates the armed deadlines at now (monotonic comparison) and
// returns the terminal symptom of the earliest one that passed, if any. In
// shadow mode, where checks stay armed after a terminal symptom, it returns
// one for every deadline that passed, earliest first.
func (e *Engine) Tick(now time.Time) []Symptom {
	out := e.overBudgetDue(now)
	for {
		d, ok := e.passed(now)
		if !ok {
			return out
		}
		out = append(out, e.fire(e.timeoutSymptom(d, now))...)
	}
}

// passed returns the earliest armed deadline at or before now.
func (e *Engine) passed(now time.Time) (deadline, bool) {
	var buf [maxDeadlines]deadline
	first := -1
	ds := e.deadlines(&buf)
	for i, d := range ds {
		if now.Before(d.at) {
			continue
		}
		if first < 0 || d.at.Before(ds[first].at) {
			first = i
		}
	}
	if first < 0 {
		return deadline{}, false
	}
	return ds[first], true
}

func (e *Engine) timeoutSymptom(d deadline, now time.Time) Symptom {
	elapsed := now.Sub(d.since)
	s := Symptom{At: now, Check: d.check, Severity: Terminal,
		Observed: fmtSeconds(elapsed), Threshold: d.timeout.String()}
	var ext string
	if by := d.at.Sub(d.since) - d.timeout; by > 0 {
		ext = fmt.Sprintf(", extended by %s", by)
	}
	switch d.check {
	case StartupTimeout:
		what := "READY or heartbeat"
		if e.cfg.Metered {
			what = "READY, heartbeat or LLM request"
		}
		s.Message = fmt.Sprintf("no %s %s after start (startup timeout %s%s)", what, fmtSeconds(elapsed), d.timeout, ext)
	case HeartbeatTimeout:
		what := "heartbeat"
		if e.st.WireRequests > 0 {
			what = "heartbeat or LLM traffic"
		}
		s.Message = fmt.Sprintf("no %s for %s (timeout %s%s)", what, fmtSeconds(elapsed), d.timeout, ext)
	case ProgressTimeout:
		var steps string
		if !e.st.OwnProgress && e.st.WireRequests > 0 {
			steps = "; a step is an answered LLM request"
		}
		s.Message = fmt.Sprintf("no progress for %s (last step %d, timeout %s%s)", fmtSeconds(elapsed), e.st.Progress, d.timeout, steps)
	case MaxRuntime:
		s.Message = fmt.Sprintf("ran for %s, over the runtime limit %s", fmtSeconds(elapsed), d.timeout)
	case StopTimeout:
		s.Message = fmt.Sprintf("announced STOPPING %s ago and is still running (stop timeout %s%s)", fmtSeconds(elapsed), d.timeout, ext)
	}
	return s
}

func fmtSeconds(d time.Duration) string {
	return fmt.Sprintf("%.2fs", d.Seconds())
}
