// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// progress applies PROGRESS=n: an increase resets the no-progress clock and
// the error streak; steps compares it with its thresholds.
func (e *Engine) progress(n uint64, now time.Time) []Symptom {
	if n > e.st.Progress {
		e.st.LastProgressAt = now
		if e.st.ErrorStreak > 0 {
			e.st.ErrorStreak = 0
			e.rearm(ErrorStreak)
		}
	}
	e.st.Progress = n
	return e.budgetInt(Steps, "steps", sat(n), e.cfg.Steps, now)
}

// budgetInt checks a cumulative counter against warn/kill: the symptom fires
// when the value goes over the threshold.
func (e *Engine) budgetInt(c Check, what string, v int64, l *config.Limit, now time.Time) []Symptom {
	if l == nil {
		return nil
	}
	if l.Kill > 0 && v > l.Kill {
		return e.fire(Symptom{At: now, Check: c, Severity: Terminal, Observed: count(v), Threshold: count(l.Kill),
			Message: fmt.Sprintf("%s %s over kill threshold %s", what, count(v), count(l.Kill))})
	}
	if l.Warn > 0 && v > l.Warn {
		return e.warn(Symptom{At: now, Check: c, Severity: Warning, Observed: count(v), Threshold: count(l.Warn),
			Message: fmt.Sprintf("%s %s over warning threshold %s", what, count(v), count(l.Warn))})
	}
	return nil
}

// spent is what the budgets count: metered figures with the gateway,
// the agent's own reports without.
func (e *Engine) spent() (tokens uint64, costUSD float64) {
	if e.cfg.Metered {
		return e.st.MeteredTokens, e.st.MeteredCostUSD
	}
	return e.st.Tokens, e.st.CostUSD
}

func (e *Engine) cost(now time.Time) []Symptom {
	l := e.cfg.Cost
	if l == nil {
		return nil
	}
	_, v := e.spent()
	if l.Kill > 0 && v > l.Kill {
		return e.fire(Symptom{At: now, Check: Cost, Severity: Terminal, Observed: usd(v), Threshold: usd(l.Kill),
			Message: fmt.Sprintf("cost %s over kill threshold %s", usd(v), usd(l.Kill))})
	}
	if l.Warn > 0 && v > l.Warn {
		return e.warn(Symptom{At: now, Check: Cost, Severity: Warning, Observed: usd(v), Threshold: usd(l.Warn),
			Message: fmt.Sprintf("cost %s over warning threshold %s", usd(v), usd(l.Warn))})
	}
	return nil
}

// reported checks what the agent reported so far against the current
// thresholds (after Reconfigure: they apply at once, not at the next report).
func (e *Engine) reported(now time.Time) []Symptom {
	var out []Symptom
	tokens, _ := e.spent()
	out = append(out, e.budgetInt(Tokens, "tokens", sat(tokens), e.cfg.Tokens, now)...)
	out = append(out, e.cost(now)...)
	out = append(out, e.budgetInt(Steps, "steps", sat(e.st.Progress), e.cfg.Steps, now)...)
	out = append(out, e.errorStreak(now)...)
	out = append(out, e.toolLoop(now)...)
	return out
}

// errorSeen applies ERROR=text: N errors with no progress between them.
func (e *Engine) errorSeen(text string, now time.Time) []Symptom {
	e.st.Errors++
	e.st.ErrorStreak++
	e.st.LastError = text
	return e.errorStreak(now)
}

func (e *Engine) errorStreak(now time.Time) []Symptom {
	l := e.cfg.ErrorStreak
	if l == nil {
		return nil
	}
	n, last := int64(e.st.ErrorStreak), e.st.LastError
	if l.Kill > 0 && n >= l.Kill {
		return e.fire(Symptom{At: now, Check: ErrorStreak, Severity: Terminal, Observed: count(n), Threshold: count(l.Kill),
			Message: fmt.Sprintf("%d errors in a row without progress (kill threshold %d; last: %s)", n, l.Kill, last)})
	}
	if l.Warn > 0 && n >= l.Warn {
		return e.warn(Symptom{At: now, Check: ErrorStreak, Severity: Warning, Observed: count(n), Threshold: count(l.Warn),
			Message: fmt.Sprintf("%d errors in a row without progress (warning threshold %d; last: %s)", n, l.Warn, last)})
	}
	return nil
}

// ObserveMetered applies one LLM request the gateway metered: tokens (all
// kinds) and its cost, or, for a model with no price, a warning once —
// spend that cannot be priced is never silently $0. A tool call seen in
// the response counts for tool_loop as a client's TOOL would without the
// gateway (with it, TOOL reports count for nothing: Config.Metered). Deadlines
// are evaluated at now first, as in Observe.
func (e *Engine) ObserveMetered(tokens uint64, costUSD float64, priced bool, model string, tools []ToolCall, now time.Time) []Symptom {
	out := e.Tick(now)
	e.st.MeteredTokens += tokens
	e.st.MeteredCostUSD += costUSD
	if !priced && !e.st.CostUnknown {
		e.st.CostUnknown = true
		s := Symptom{At: now, Check: Cost, Severity: Warning, Observed: "unknown", Threshold: "",
			Message: fmt.Sprintf("model %q has no price: its tokens are counted, its cost is not (add it, or default_price, to the price file)", model)}
		e.record(s)
		out = append(out, s)
	}
	if e.cfg.Metered {
		out = append(out, e.budgetInt(Tokens, "tokens", sat(e.st.MeteredTokens), e.cfg.Tokens, now)...)
		out = append(out, e.cost(now)...)
		out = append(out, e.rateSpent(tokens, costUSD, now)...)
	}
	for _, t := range tools {
		e.st.LastTool = t.Name
		out = append(out, e.toolCall(t.Name, t.ArgsSHA256, now)...)
	}
	return out
}

// OverBudget is a request the gateway refused before forwarding it: its
// worst case did not fit in what the run's budget (check Cost or Tokens)
// leaves. The budget is then spent as far as the gateway can promise, so
// the run is stopped as if it had crossed it: a terminal symptom, with the
// gateway's words (message). Requests in flight are already paid for: the
// symptom waits for the last of them to end (ResponseEnded), so that their
// answers reach the agent and their spend the certificate, then fires:
// WireSettled says when, once each request's end and spend are applied.
// It waits OverBudgetSettle at most: a stream that stalls (or an answer
// that never comes) does not hold the kill of a run out of budget; Tick
// fires it then, and NextDeadline includes that moment.
func (e *Engine) OverBudget(check Check, message string, now time.Time) []Symptom {
	out := e.Tick(now)
	if (check == Cost && e.cfg.Cost == nil) || (check == Tokens && e.cfg.Tokens == nil) || (check != Cost && check != Tokens) {
		return out
	}
	if e.overBudget == nil {
		e.overBudget = &Symptom{Check: check, Severity: Terminal, Message: message}
		e.overBudgetSince = now
	}
	return out
}

// OverBudgetSettle bounds how long a budget's refusal (OverBudget) waits
// for the requests in flight before it fires. Their spend cannot pass the
// budget meanwhile: each holds its reservation, and a stream is cut at
// what the budget leaves it.
const OverBudgetSettle = 30 * time.Second

// overBudgetDue fires the refusal that waited OverBudgetSettle for
// requests still in flight, saying how many.
func (e *Engine) overBudgetDue(now time.Time) []Symptom {
	if e.overBudget == nil || now.Before(e.overBudgetSince.Add(OverBudgetSettle)) {
		return nil
	}
	e.overBudget.Message += fmt.Sprintf("; %d requests still in flight after %s", e.st.InFlight, OverBudgetSettle)
	return e.settle(now)
}

// WireSettled fires a budget's refusal (OverBudget) once no request is in
// flight; call it after a request's end (ResponseEnded) and its spend
// (ObserveMetered) are applied.
func (e *Engine) WireSettled(now time.Time) []Symptom {
	if e.overBudget == nil || e.st.InFlight > 0 {
		return nil
	}
	return e.settle(now)
}

// settle fires the waiting refusal.
func (e *Engine) settle(now time.Time) []Symptom {
	s := *e.overBudget
	e.overBudget = nil
	s.At = now
	tokens, cost := e.spent()
	if s.Check == Cost {
		s.Observed, s.Threshold = usd(cost), usd(e.cfg.Cost.Kill)
	} else {
		s.Observed, s.Threshold = count(sat(tokens)), count(e.cfg.Tokens.Kill)
	}
	return e.fire(s)
}

// UsageUnknown is a metered request whose usage was never read (a stream
// aborted or cut before its usage, a body over its bound): the gateway
// charged it at its reservation, costUSD, which ObserveMetered then counts.
// The first of a run raises a warning, check cost, observed
// "usage_unknown": its spend is an estimate, never a silent $0.
func (e *Engine) UsageUnknown(model, path string, costUSD float64, now time.Time) []Symptom {
	if e.st.UsageUnknown {
		return nil
	}
	e.st.UsageUnknown = true
	s := Symptom{At: now, Check: Cost, Severity: Warning, Observed: "usage_unknown", Threshold: "",
		Message: fmt.Sprintf("the usage of a %s response (model %q) was never read: it is charged at its reservation, %s", path, model, usd(costUSD))}
	e.record(s)
	return []Symptom{s}
}

// ToolCall is one tool call seen on the wire.
type ToolCall struct{ Name, ArgsSHA256 string }

func (e *Engine) toolCall(name, argsHash string, now time.Time) []Symptom {
	e.tools.add(toolKey{name, argsHash})
	return e.toolLoop(now)
}

func (e *Engine) toolLoop(now time.Time) []Symptom {
	period, ok := e.tools.loop()
	if !ok {
		return nil
	}
	n := e.tools.repeats
	var msg string
	if period == 1 {
		msg = fmt.Sprintf("the same tool call %s repeated %d times in a row", e.tools.cycle(1), n)
	} else {
		msg = fmt.Sprintf("the tool calls %s repeated as a cycle %d times", e.tools.cycle(period), n)
	}
	return e.fire(Symptom{At: now, Check: ToolLoop, Severity: Terminal,
		Observed: fmt.Sprintf("%d repeats", n), Threshold: strconv.Itoa(n), Message: msg})
}

func count(v int64) string { return strconv.FormatInt(v, 10) }

// sat converts a reported counter for comparison with an int64 threshold;
// a value past MaxInt64 is over every threshold, not negative.
func sat(v uint64) int64 { return int64(min(v, math.MaxInt64)) }

// usd formats dollars with cents, or with more digits for tiny amounts.
func usd(v float64) string {
	if v > 0 && v < 0.01 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}
