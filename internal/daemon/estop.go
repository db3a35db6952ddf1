// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/audit"
	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/outbox"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// estop kills every running agent in parallel through its ladder and keeps
// every agent down until `hermeskilld release --estop`. The e-stop is
// persisted first, so a daemon restart in the middle keeps it.
func (d *Daemon) estop(ctx context.Context, reason, operator string, wait bool) []control.KillResult {
	if _, already := d.held.estop(); !already {
		q := &control.Quarantine{Since: time.Now().UTC(), Reason: reason, Operator: operator}
		if err := d.held.setEstop(q); err != nil {
			d.log.Error("e-stop not persisted (agents are still stopped)", zap.Error(err))
		}
	}
	d.log.Warn("E-STOP: stopping every agent", zap.String("reason", reason), zap.String("operator", operator))
	d.audit(audit.Event{Type: "estop", Data: map[string]any{"reason": reason, "operator": operator}, Sync: true})
	d.publish(control.Event{Type: "estop", Message: fmt.Sprintf("e-stop by %s: %s", operator, reason)})
	return d.killAll(ctx, d.runningSlots(), operator, reason, wait)
}

// failClosed is the e-stop of the dead-man's switch: the control plane
// was not reached for unreachable (fail_closed_after is after). Every
// running agent is stopped through its ladder with the check
// control_plane_unreachable, and every agent is kept down until
// `hermeskilld release --estop`.
func (d *Daemon) failClosed(unreachable, after time.Duration) {
	reason := outbox.UnreachableReason(unreachable, after)
	const operator = "control-plane-dead-man"
	if _, already := d.held.estop(); !already {
		q := &control.Quarantine{Since: time.Now().UTC(), Reason: reason, Operator: operator}
		if err := d.held.setEstop(q); err != nil {
			d.log.Error("e-stop not persisted (agents are still stopped)", zap.Error(err))
		}
	}
	d.log.Error("E-STOP: the control plane is unreachable; stopping every agent", zap.String("reason", reason))
	d.audit(audit.Event{Type: "estop", Data: map[string]any{"reason": reason, "operator": operator,
		"check": string(symptoms.ControlPlaneUnreachable)}, Sync: true})
	d.publish(control.Event{Type: "estop", Message: "e-stop: " + reason})
	observed := unreachable.Round(time.Millisecond).String()
	for _, s := range d.runningSlots() {
		s.hostStop(symptoms.ControlPlaneUnreachable, observed, reason)
	}
}

// estopFromFile is the e-stop triggered by creating estop_file.
func (d *Daemon) estopFromFile() {
	d.goTask(func() { d.estop(context.Background(), "e-stop file "+d.estopFile+" created", "estop-file", false) })
}

// killAll kills slots in parallel: the whole cohort takes about one
// ladder, not one ladder per agent.
func (d *Daemon) killAll(ctx context.Context, slots []*slot, operator, reason string, wait bool) []control.KillResult {
	res := make([]control.KillResult, len(slots))
	var wg sync.WaitGroup
	for i, s := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = s.kill(ctx, operator, reason, wait)
		}()
	}
	wg.Wait()
	return res
}

func (d *Daemon) runningSlots() []*slot {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*slot
	for _, s := range d.slots {
		s.mu.Lock()
		running := s.run != nil || s.starting // a starting one is stopped as its start completes (slot.kill)
		s.mu.Unlock()
		if running {
			out = append(out, s)
		}
	}
	return out
}

// releaseEstop ends the e-stop; agents quarantined one by one stay down.
func (d *Daemon) releaseEstop(operator string) error {
	if _, err := os.Stat(d.estopFile); err == nil {
		return fmt.Errorf("%w: the e-stop file %s still exists; remove it first", control.ErrConflict, d.estopFile)
	}
	if _, ok := d.held.estop(); !ok {
		return fmt.Errorf("%w: no e-stop is in effect", control.ErrConflict)
	}
	if err := d.held.setEstop(nil); err != nil {
		return err
	}
	d.log.Warn("e-stop released", zap.String("operator", operator))
	d.publish(control.Event{Type: "estop_released", Message: "e-stop released by " + operator})
	d.mu.Lock()
	for _, s := range d.slots {
		s.poke()
	}
	d.mu.Unlock()
	return nil
}
