// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/audit"
	"github.com/hermeskill/hermeskilld/internal/budgets"
	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/metrics"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// budgetTick is how often the runs' spend is read into the budgets across
// runs besides the gateway's records (each of which is charged at once):
// what an agent without the gateway reports reaches its budgets within
// it, and so does at most that much of the book a crash of the daemon
// could lose.
const budgetTick = time.Second

// meterBudgets is the goroutine that charges the runs' spend to the
// budgets across runs (package budgets), acts on what crosses them, rolls
// their windows over at their end and saves the book; it ends when the
// daemon stops (the runs' last spend is charged as each ends, and the book
// saved after the last: shutdown).
func (d *Daemon) meterBudgets(done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(budgetTick)
	defer tick.Stop()
	roll := time.NewTimer(time.Until(d.budgets.NextRoll()))
	defer roll.Stop()
	for {
		select {
		case <-d.stopping:
			return
		case <-d.budgetKick:
		case <-tick.C:
		case <-roll.C:
		}
		d.chargeRunning()
		d.tripFull()
		if freed := d.budgets.Roll(d.now()); len(freed) > 0 {
			d.rolledOver(freed)
		}
		if d.syncPools() {
			d.setRunPools()
		}
		if next := d.budgets.NextRoll(); !next.IsZero() {
			roll.Reset(time.Until(next))
		}
		d.saveBudgets()
	}
}

// kickBudgets has the spend charged now (a gateway record arrived); it
// never blocks.
func (d *Daemon) kickBudgets() {
	select {
	case d.budgetKick <- struct{}{}:
	default:
	}
}

// budgetEvents wraps a run's event sink: each gateway record has the
// run's spend charged at once, and a request that did not fit in a budget
// across runs has it tripped.
func (d *Daemon) budgetEvents(next func(supervisor.Event)) func(supervisor.Event) {
	return func(ev supervisor.Event) {
		if next != nil {
			next(ev)
		}
		if ev.Type == supervisor.EventLLMRequest {
			if rec := ev.LLM; rec != nil && rec.OverBudget == gateway.OverPool && rec.Budget != "" {
				d.noteFull(rec.Budget)
			}
			d.kickBudgets()
		}
	}
}

// chargeRunning charges every live run's spend since it was last charged:
// its effective cost (metered by the gateway, else what the agent
// reported).
func (d *Daemon) chargeRunning() {
	for _, s := range d.sortedSlots() {
		s.mu.Lock()
		if s.run == nil {
			s.mu.Unlock()
			continue
		}
		delta, labels := s.unchargedLocked(s.run.Status().Usage.CostUSD), s.cfg.Labels
		s.mu.Unlock()
		d.charge(labels, delta)
	}
}

// unchargedLocked is what a run whose cost is now cost spent since it was
// last charged (s.mu held); it is counted as charged.
func (s *slot) unchargedLocked(cost float64) float64 {
	delta := cost - s.charged
	s.charged = max(s.charged, cost)
	return delta
}

// chargeEnded charges the rest of an ended run's spend, from its outcome.
func (s *slot) chargeEnded(out supervisor.Outcome) {
	s.mu.Lock()
	delta, labels := s.unchargedLocked(out.Usage.CostUSD), s.cfg.Labels
	s.mu.Unlock()
	s.d.charge(labels, delta)
}

// charge adds usd spent by a run with labels to the budgets, and acts on
// what it crossed.
func (d *Daemon) charge(labels map[string]string, usd float64) {
	for _, c := range d.budgets.Charge(labels, usd, d.now()) {
		d.crossed(c)
	}
}

// crossed acts on a budget's crossing: a warning is an event and an
// audit line; a kill is persisted first (a restart right after it still
// holds the matching agents), then each running agent the budget matches
// is stopped through the ladder for check budget, its LLM access revoked
// at the ladder's first step; the budget keeps them, and new matching
// agents, down until its window rolls over or it is lifted.
func (d *Daemon) crossed(c budgets.Crossing) {
	b := c.Budget
	data := map[string]any{"budget": b.Name, "selector": b.Selector, "per": b.Per, "threshold": c.Threshold,
		"spent_usd": c.SpentUSD, "warn_usd": b.Warn, "kill_usd": b.Kill, "window_start": c.Start}
	if c.Threshold == budgets.Warn {
		d.log.Warn("budget warning", zap.String("budget", b.Name), zap.String("reason", c.Reason()))
		d.audit(audit.Event{Type: "budget_warning", Data: data})
		d.publish(control.Event{Type: "budget_warning", Message: c.Reason(), Data: map[string]any{"budget": b.Name}})
		return
	}
	d.saveBudgets()
	d.log.Warn("budget tripped: its agents are stopped and held", zap.String("budget", b.Name), zap.String("reason", c.Reason()))
	d.audit(audit.Event{Type: "budget_tripped", Data: data, Sync: true})
	d.publish(control.Event{Type: "budget_tripped", Message: c.Reason(), Data: map[string]any{"budget": b.Name}})
	for _, s := range d.runningSlots() {
		s.exceed(c)
	}
	d.pokeAll()
}

// exceed stops the slot's live run for the budget c crossed, when the
// budget matches it: no quarantine, the budget holds it.
func (s *slot) exceed(c budgets.Crossing) {
	s.mu.Lock()
	r := s.run
	if r == nil || !c.Budget.Sel.Matches(s.cfg.Labels) {
		s.mu.Unlock()
		return
	}
	select {
	case <-r.Done():
		s.mu.Unlock()
		return // ended: its end is being applied
	default:
	}
	if s.killedBy == nil {
		s.killedBy = &control.Quarantine{Since: time.Now().UTC(), Reason: c.Reason(), Operator: "budget " + c.Budget.Name}
		s.revoking = true
	}
	s.mu.Unlock()
	s.log.Warn("stopping the agent: a budget across runs it belongs to is spent", zap.String("budget", c.Budget.Name))
	r.Exceed(symptoms.Symptom{Check: symptoms.Budget, Observed: fmt.Sprintf("$%.4f", c.SpentUSD),
		Threshold: fmt.Sprintf("$%.4f", c.Budget.Kill), Message: c.Reason()})
}

// rolledOver starts again what the budgets named held: their windows
// rolled over.
func (d *Daemon) rolledOver(names []string) {
	for _, n := range names {
		d.log.Info("budget window rolled over: what it held may start again", zap.String("budget", n))
		d.audit(audit.Event{Type: "budget_rolled_over", Data: map[string]any{"budget": n}})
		d.publish(control.Event{Type: "budget_rolled_over", Message: "budget " + n + ": a new window"})
	}
	d.pokeAll()
}

func (d *Daemon) saveBudgets() {
	if err := d.budgets.Save(); err != nil {
		d.log.Error("budgets not persisted", zap.Error(err))
	}
}

// budgetHold is the budget that holds an agent with labels down, and its
// note for ps.
func (d *Daemon) budgetHold(labels map[string]string) (string, bool) {
	c, ok := d.budgets.Held(labels, d.now())
	if !ok {
		return "", false
	}
	end := budgets.End(c.Budget.Per, c.Start)
	return fmt.Sprintf("%s; held until %s (or hermeskilld budgets lift %s)", c.Reason(), end.Format(time.RFC3339), c.Budget.Name), true
}

// Budgets is GET /v1/budgets.
func (d *Daemon) Budgets() []control.Budget {
	list := d.budgets.List(d.now())
	out := make([]control.Budget, 0, len(list))
	for _, b := range list {
		out = append(out, control.Budget{Name: b.Name, Selector: b.Sel, Per: b.Per, WindowStart: b.Start, WindowEnd: b.End,
			SpentUSD: b.SpentUSD, WarnUSD: b.Warn, KillUSD: b.Kill, State: b.State, Since: b.Since})
	}
	return out
}

// LiftBudget is POST /v1/budgets/lift: what a tripped budget holds may
// start again; it does not trip again before its window rolls over.
func (d *Daemon) LiftBudget(req control.BudgetLiftRequest) error {
	err := d.budgets.Lift(req.Name, req.Operator, d.now())
	switch {
	case errors.Is(err, budgets.ErrUnknown):
		return fmt.Errorf("%w: no budget %q", control.ErrNotFound, req.Name)
	case errors.Is(err, budgets.ErrNotTripped):
		return fmt.Errorf("%w: budget %s is not tripped", control.ErrConflict, req.Name)
	case err != nil:
		return err
	}
	if err := d.budgets.Save(); err != nil {
		return fmt.Errorf("lift not persisted: %w", err)
	}
	d.syncPools() // its pool refuses nothing from now on
	d.log.Warn("budget lifted", zap.String("budget", req.Name), zap.String("operator", req.Operator))
	d.audit(audit.Event{Type: "budget_lifted", Data: map[string]any{"budget": req.Name, "operator": req.Operator}, Sync: true})
	d.publish(control.Event{Type: "budget_lifted", Message: fmt.Sprintf("budget %s lifted by %s", req.Name, req.Operator)})
	d.pokeAll()
	return nil
}

// budgetSamples are the budgets for the metrics endpoint.
func (d *Daemon) budgetSamples() []metrics.BudgetSample {
	list := d.budgets.List(d.now())
	out := make([]metrics.BudgetSample, 0, len(list))
	for _, b := range list {
		out = append(out, metrics.BudgetSample{Name: b.Name, Per: b.Per, State: b.State, SpentUSD: b.SpentUSD, WarnUSD: b.Warn, KillUSD: b.Kill})
	}
	return out
}
