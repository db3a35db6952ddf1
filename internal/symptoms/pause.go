// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import "time"

// Money reports whether c is a money check: one of spend, whose kill
// threshold an agent's on_budget may turn into a pause (a budget an
// operator can raise) instead of a kill.
func Money(c Check) bool {
	switch c {
	case Cost, Tokens:
		return true
	}
	return false
}

// BudgetHeld is a request the gateway holds instead of refusing it
// (on_budget: pause): its worst case did not fit in what the run's budget
// (check Cost or Tokens) leaves. The budget is spent as far as the gateway
// can promise: a terminal symptom at once, with the gateway's words
// (message). Unlike a refusal (OverBudget) it does not wait for the
// requests in flight: the held request is one of them, and it waits for
// the decision.
func (e *Engine) BudgetHeld(check Check, message string, now time.Time) []Symptom {
	out := e.Tick(now)
	if (check == Cost && e.cfg.Cost == nil) || (check == Tokens && e.cfg.Tokens == nil) || !Money(check) {
		return out
	}
	tokens, cost := e.spent()
	s := Symptom{At: now, Check: check, Severity: Terminal, Message: message}
	if check == Cost {
		s.Observed, s.Threshold = usd(cost), usd(e.cfg.Cost.Kill)
	} else {
		s.Observed, s.Threshold = count(sat(tokens)), count(e.cfg.Tokens.Kill)
	}
	return append(out, e.fire(s)...)
}

// Resume goes on after a pause for the terminal symptom of a money check
// (on_budget: pause) with cfg, its raised budget: that symptom stays in
// the log but is no longer the run's terminal one, and every money check
// may fire again, at the new thresholds. The time paused does not count
// against the liveness deadlines (startup, heartbeat, progress), which
// run again from now; max_runtime is wall-clock time and counts it. A
// budget still spent fires again at once (the caller should have refused
// such a resume).
func (e *Engine) Resume(cfg Config, now time.Time) []Symptom {
	if e.terminal == nil || !Money(e.terminal.Check) {
		return nil
	}
	e.terminal = nil
	for c := range e.fired {
		if Money(c) {
			delete(e.fired, c)
			e.rearm(c)
		}
	}
	e.overBudget = nil
	e.resumedAt = now
	e.heartbeatExtend, e.startupExtend = time.Time{}, time.Time{}
	e.setConfig(cfg, now)
	return append(e.Tick(now), e.reported(now)...)
}
