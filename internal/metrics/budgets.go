// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package metrics

// BudgetSample is one budget across runs at a scrape: its name (bounded
// by the daemon file), its window (day, month), what the matching runs
// spent in the current window, its amounts (0: not set) and its state
// (ok, warned, tripped, lifted).
type BudgetSample struct {
	Name, Per, State string
	SpentUSD         float64
	WarnUSD, KillUSD float64
}

// BudgetStates are the states of a budget, each a series of
// hermeskill_budget_state.
var BudgetStates = []string{"ok", "warned", "tripped", "lifted"}

var (
	famBudgetSpent = family{namespace + "_budget_spent_usd", "gauge",
		"Spend in USD of the runs a budget across runs matches, in its current window (day or month, UTC), by budget and per."}
	famBudgetLimit = family{namespace + "_budget_limit_usd", "gauge",
		"A budget's amounts in USD, by budget and threshold (warn, kill); an amount not set has no series."}
	famBudgetState = family{namespace + "_budget_state", "gauge",
		"1 for a budget's state (ok, warned, tripped: its runs stopped and held, lifted by an operator), 0 for the others."}
)

// SetBudgetSource sets where the budgets across runs are read at each
// scrape. The series appear once it has been called.
func (m *Metrics) SetBudgetSource(f func() []BudgetSample) {
	m.state.mu.Lock()
	defer m.state.mu.Unlock()
	m.state.budgets = f
}

func writeBudgets(e *expo, f func() []BudgetSample) {
	if f == nil {
		return
	}
	bs := f()
	e.begin(famBudgetSpent)
	for _, b := range bs {
		e.sample(famBudgetSpent.name, b.SpentUSD, "budget", b.Name, "per", b.Per)
	}
	e.begin(famBudgetLimit)
	for _, b := range bs {
		if b.WarnUSD > 0 {
			e.sample(famBudgetLimit.name, b.WarnUSD, "budget", b.Name, "threshold", "warn")
		}
		if b.KillUSD > 0 {
			e.sample(famBudgetLimit.name, b.KillUSD, "budget", b.Name, "threshold", "kill")
		}
	}
	e.begin(famBudgetState)
	for _, b := range bs {
		for _, s := range BudgetStates {
			v := 0.0
			if s == b.State {
				v = 1
			}
			e.sample(famBudgetState.name, v, "budget", b.Name, "state", s)
		}
	}
}
