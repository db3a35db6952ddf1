// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/display"
)

func newBudgets() *cobra.Command {
	f := &ctlFlags{}
	var asJSON bool
	c := &cobra.Command{
		Use:   "budgets",
		Short: "List the budgets across runs: spend in the current window against warn and kill (and lift them)",
		Long: `List the daemon's budgets across runs (budgets: in its file): for each, the
label selector, the window (a day or a month, UTC), what the matching runs
spent in it, the warn and kill amounts, and the state: ok, warned, tripped
(its agents were stopped and new matching agents are refused until the
window rolls over) or lifted (by ` + "`hermeskilld budgets lift NAME`" + `, until the
window rolls over).`,
		Example: `  hermeskilld budgets
  hermeskilld budgets lift team-a`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl := f.client()
			defer cl.Close()
			list, err := cl.Budgets(c.Context())
			if err != nil {
				return ctlError(err, cl.Path())
			}
			return printList(c.OutOrStdout(), list, asJSON, "no budget across runs (budgets: in the daemon file)",
				"NAME\tSELECTOR\tWINDOW\tSPENT\tWARN\tKILL\tSTATE", func(b control.Budget) string {
					return fmt.Sprintf("%s\t%s\t%s\t$%.2f\t%s\t%s\t%s", display.Clean(b.Name), display.Clean(b.Selector.String()),
						windowText(b), b.SpentUSD, amount(b.WarnUSD), amount(b.KillUSD), display.Clean(b.State))
				})
		},
	}
	f.addTo(c)
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	c.AddCommand(newLift(f, "lift NAME",
		"Lift a tripped budget: the agents it holds may start again; it does not trip again before its window rolls over",
		"budget %s lifted until its window rolls over", func(ctx context.Context, cl *control.Client, name string) error {
			return cl.LiftBudget(ctx, control.BudgetLiftRequest{Name: name})
		}))
	return c
}

// windowText is a budget's window as the table shows it: "day 2026-12-07".
func windowText(b control.Budget) string {
	if b.Per == "month" {
		return "month " + b.WindowStart.UTC().Format("2006-01")
	}
	return display.Clean(b.Per) + " " + b.WindowStart.UTC().Format(time.DateOnly)
}

func amount(usd float64) string {
	if usd == 0 {
		return "-"
	}
	return fmt.Sprintf("$%.2f", usd)
}
