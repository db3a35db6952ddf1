// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The budgets across runs are read from their source at each scrape: the
// spend of the window, the amounts set, one state series at 1.
func TestBudgetGauges(t *testing.T) {
	m := New(Options{})
	n, err := gatherAndCount(m, "hermeskill_budget_spent_usd")
	require.NoError(t, err)
	assert.Zero(t, n, "no series before a source")
	m.SetBudgetSource(func() []BudgetSample {
		return []BudgetSample{{Name: "team-a", Per: "day", State: "tripped", SpentUSD: 10.5, WarnUSD: 8, KillUSD: 10},
			{Name: "all", Per: "month", State: "ok", SpentUSD: 3, KillUSD: 100}}
	})
	assert.NoError(t, gatherAndCompare(m, `
# HELP hermeskill_budget_spent_usd Spend in USD of the runs a budget across runs matches, in its current window (day or month, UTC), by budget and per.
# TYPE hermeskill_budget_spent_usd gauge
hermeskill_budget_spent_usd{budget="all",per="month"} 3
hermeskill_budget_spent_usd{budget="team-a",per="day"} 10.5
# HELP hermeskill_budget_limit_usd A budget's amounts in USD, by budget and threshold (warn, kill); an amount not set has no series.
# TYPE hermeskill_budget_limit_usd gauge
hermeskill_budget_limit_usd{budget="all",threshold="kill"} 100
hermeskill_budget_limit_usd{budget="team-a",threshold="kill"} 10
hermeskill_budget_limit_usd{budget="team-a",threshold="warn"} 8
`, "hermeskill_budget_spent_usd", "hermeskill_budget_limit_usd"))
	assert.NoError(t, gatherAndCompare(m, `
# HELP hermeskill_budget_state 1 for a budget's state (ok, warned, tripped: its runs stopped and held, lifted by an operator), 0 for the others.
# TYPE hermeskill_budget_state gauge
hermeskill_budget_state{budget="all",state="lifted"} 0
hermeskill_budget_state{budget="all",state="ok"} 1
hermeskill_budget_state{budget="all",state="tripped"} 0
hermeskill_budget_state{budget="all",state="warned"} 0
hermeskill_budget_state{budget="team-a",state="lifted"} 0
hermeskill_budget_state{budget="team-a",state="ok"} 0
hermeskill_budget_state{budget="team-a",state="tripped"} 1
hermeskill_budget_state{budget="team-a",state="warned"} 0
`, "hermeskill_budget_state"))
}
