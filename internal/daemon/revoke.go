// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/audit"
	"github.com/hermeskill/hermeskilld/internal/control"
)

// Revoke is POST /v1/revoke: a standing revocation. The rule is persisted
// first (a restart in the middle keeps it), then every running agent it
// matches is killed through the ladder — whose first step withdraws the
// agent's LLM gateway access — without quarantine: the rule itself keeps
// matching agents from starting until it is lifted.
func (d *Daemon) Revoke(ctx context.Context, req control.RevokeRequest) (control.RevokeResult, error) {
	if strings.TrimSpace(req.Reason) == "" {
		return control.RevokeResult{}, fmt.Errorf("%w: a reason is required", control.ErrBadInput)
	}
	if (req.ID != "") == (!req.Selector.Empty() || !req.StartedBefore.IsZero()) {
		return control.RevokeResult{}, fmt.Errorf("%w: name an agent, or a --selector and/or --started-before", control.ErrBadInput)
	}
	rule, err := d.held.revoke(control.Revocation{ID: req.ID, Selector: req.Selector, StartedBefore: req.StartedBefore,
		Reason: req.Reason, Operator: req.Operator})
	if err != nil {
		return control.RevokeResult{}, fmt.Errorf("revocation not persisted: %w", err)
	}
	d.log.Warn("standing revocation", zap.String("rule", rule.Rule), zap.String("reason", rule.Reason),
		zap.String("operator", rule.Operator))
	d.audit(audit.Event{Type: "revocation", Data: map[string]any{"rule": rule.Rule, "id": rule.ID, "selector": rule.Selector.String(),
		"started_before": rule.StartedBefore, "reason": rule.Reason, "operator": rule.Operator}, Sync: true})
	d.publish(control.Event{Type: "revocation", Message: fmt.Sprintf("rule %s by %s: %s", rule.Rule, rule.Operator, rule.Reason)})
	var hit []*slot
	for _, s := range d.runningSlots() {
		s.mu.Lock()
		match := s.run != nil && ruleMatchesRun(rule, s.id, s.cfg.Labels, s)
		s.mu.Unlock()
		if match {
			hit = append(hit, s)
		}
	}
	sort.Slice(hit, func(i, j int) bool { return hit[i].id < hit[j].id })
	res := control.RevokeResult{Revocation: rule, Killed: []control.KillResult{}}
	res.Killed = make([]control.KillResult, len(hit))
	var wg sync.WaitGroup
	for i, s := range hit {
		wg.Go(func() { res.Killed[i] = s.revoke(ctx, rule, req.Wait) })
	}
	wg.Wait()
	d.pokeAll()
	return res, nil
}

// ruleMatchesRun reports whether a rule matches a running agent (s.mu held).
func ruleMatchesRun(r control.Revocation, id string, labels map[string]string, s *slot) bool {
	if r.ID != "" {
		return r.ID == id
	}
	return (r.Selector.Empty() || r.Selector.Matches(labels)) && (r.StartedBefore.IsZero() || s.started.Before(r.StartedBefore))
}

// Revocations is GET /v1/revocations.
func (d *Daemon) Revocations() []control.Revocation { return d.held.revocations() }

// Lift is POST /v1/revocations/lift: matching agents may start again
// (unless something else holds them).
func (d *Daemon) Lift(req control.LiftRequest) error {
	ok, err := d.held.lift(req.Rule)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: no revocation %q", control.ErrNotFound, req.Rule)
	}
	d.log.Warn("revocation lifted", zap.String("rule", req.Rule), zap.String("operator", req.Operator))
	d.audit(audit.Event{Type: "revocation_lifted", Data: map[string]any{"rule": req.Rule, "operator": req.Operator}, Sync: true})
	d.publish(control.Event{Type: "revocation_lifted", Message: fmt.Sprintf("rule %s lifted by %s", req.Rule, req.Operator)})
	d.pokeAll()
	return nil
}

// pokeAll wakes every slot to look again at what holds it.
func (d *Daemon) pokeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.slots {
		s.poke()
	}
}
