// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// The operator's lifecycle verbs: stop (the ladder, no quarantine; the
// restart policy then decides), start (an agent down by itself: exited,
// stopped, failed, or in a restart backoff) and restart (stop, then start
// at once whatever the policy). Each request was audited with its caller
// by the control server before it reaches these.

// startWait bounds how long a start or a restart waits for the run to
// begin once the agent may start (the slot's loop starts it at once; a
// longer wait means something else now holds it, such as an e-stop).
var startWait = 30 * time.Second

// operatorStop is an operator's stop (or restart) of the running run.
type operatorStop struct {
	operator, reason string
	restart          bool // start again at once, whatever the policy
}

// ladderReason is the reason the run's ladder (and its certificate)
// records: it says it was a stop or a restart, not a kill.
func (o *operatorStop) ladderReason() string {
	verb := "stop"
	if o.restart {
		verb = "restart"
	}
	if o.reason == "" {
		return "operator " + verb
	}
	return "operator " + verb + ": " + o.reason
}

// endedRun reports whether a run ended by this stop: it was not already
// dying of a check (a terminal symptom fired first keeps its own
// consequences, quarantine included).
func (o *operatorStop) endedRun(out supervisor.Outcome) bool {
	return out.Trigger == nil || out.Trigger.Check == symptoms.Manual
}

// startOutcome is what the slot's loop tells an operator waiting for a
// start.
type startOutcome struct {
	pid     int
	started time.Time
	err     error
}

// notifyStartersLocked tells the operators waiting for a start how it
// went: r started (err nil), or err.
func (s *slot) notifyStartersLocked(r agentRun, err error) {
	if len(s.starters) == 0 {
		return
	}
	o := startOutcome{err: err}
	if err == nil && r != nil {
		o.pid, o.started = r.PID(), time.Now()
	}
	for _, ch := range s.starters {
		ch <- o
	}
	s.starters = nil
}

// slotFor is the slot of an agent, or ErrNotFound.
func (d *Daemon) slotFor(id string) (*slot, error) {
	d.mu.Lock()
	s := d.slots[id]
	d.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("%w: %s", control.ErrNotFound, id)
	}
	return s, nil
}

// Stop is POST /v1/stop.
func (d *Daemon) Stop(ctx context.Context, req control.StopRequest) (control.ActionResult, error) {
	s, err := d.slotFor(req.ID)
	if err != nil {
		return control.ActionResult{}, err
	}
	return s.opStop(ctx, &operatorStop{operator: req.Operator, reason: req.Reason}, req.Wait)
}

// Start is POST /v1/start.
func (d *Daemon) Start(ctx context.Context, req control.StartRequest) (control.ActionResult, error) {
	s, err := d.slotFor(req.ID)
	if err != nil {
		return control.ActionResult{}, err
	}
	return s.opStart(ctx, req.Operator)
}

// Restart is POST /v1/restart.
func (d *Daemon) Restart(ctx context.Context, req control.RestartRequest) (control.ActionResult, error) {
	s, err := d.slotFor(req.ID)
	if err != nil {
		return control.ActionResult{}, err
	}
	s.mu.Lock()
	running := s.run != nil
	s.mu.Unlock()
	if !running {
		return s.opStart(ctx, req.Operator)
	}
	return s.opStop(ctx, &operatorStop{operator: req.Operator, reason: req.Reason, restart: true}, true)
}

// opStop stops the running run through the ladder without quarantine. An
// agent waiting out a restart backoff is kept down instead (its restart
// is cancelled); any other agent that is not running is a conflict. With
// stop.restart the call waits for the run's end and then for the next
// start.
func (s *slot) opStop(ctx context.Context, stop *operatorStop, wait bool) (control.ActionResult, error) {
	s.mu.Lock()
	r := s.run
	if r == nil {
		defer s.mu.Unlock()
		state, note := s.stateLocked()
		if state == control.StateBackoff {
			s.stepLocked(event{kind: evStopped, by: stop.operator})
			state, note = s.stateLocked()
			s.log.Info("pending restart cancelled by an operator's stop", zap.String("operator", stop.operator))
			s.d.publishState(s.id, state, note)
			s.poke()
			return control.ActionResult{ID: s.id, State: state, Note: note}, nil
		}
		return control.ActionResult{}, fmt.Errorf("%w: agent %s is not running (%s)", control.ErrConflict, s.id, state)
	}
	if s.killedBy != nil || s.life.phase.ending() {
		s.mu.Unlock()
		return control.ActionResult{}, fmt.Errorf("%w: agent %s is already being killed", control.ErrConflict, s.id)
	}
	if s.stopBy == nil || stop.restart {
		s.stopBy = stop
	}
	ended := make(chan control.KillResult, 1)
	s.waiters = append(s.waiters, ended)
	var started chan startOutcome
	if stop.restart {
		started = make(chan startOutcome, 1)
		s.starters = append(s.starters, started)
	}
	s.mu.Unlock()
	s.log.Info("operator stop: the ladder runs, no quarantine", zap.String("operator", stop.operator),
		zap.String("reason", stop.reason), zap.Bool("restart", stop.restart))
	r.Kill(stop.operator, stop.ladderReason())

	res := control.ActionResult{ID: s.id, Stopped: true}
	if !wait {
		res.State, res.Note = s.state()
		return res, nil
	}
	select {
	case kr := <-ended:
		res.Reached, res.Certificate = kr.Reached, kr.Certificate
	case <-ctx.Done():
		res.State, _ = s.state()
		res.Note = "stopped waiting: " + ctx.Err().Error() + "; the stop goes on"
		return res, nil
	}
	if !stop.restart {
		res.State, res.Note = s.state()
		return res, nil
	}
	st, err := s.awaitStart(ctx, started)
	st.Stopped, st.Reached, st.Certificate = true, res.Reached, res.Certificate
	return st, err
}

// opStart lets an agent that is down by itself start now: an exited,
// stopped or failed agent, or one waiting out a restart backoff. What
// holds an agent down on purpose (quarantine, e-stop, revocation) is
// lifted by its own command, never by start.
func (s *slot) opStart(ctx context.Context, operator string) (control.ActionResult, error) {
	s.mu.Lock()
	if s.run != nil {
		pid := s.run.PID()
		s.mu.Unlock()
		return control.ActionResult{}, fmt.Errorf("%w: agent %s is already running (pid %d)", control.ErrConflict, s.id, pid)
	}
	if why := s.cannotStartLocked(); why != "" {
		s.mu.Unlock()
		return control.ActionResult{}, fmt.Errorf("%w: agent %s cannot start: %s", control.ErrConflict, s.id, why)
	}
	s.stepLocked(event{kind: evReleased})
	started := make(chan startOutcome, 1)
	s.starters = append(s.starters, started)
	s.mu.Unlock()
	s.log.Info("operator start", zap.String("operator", operator))
	s.poke()
	return s.awaitStart(ctx, started)
}

// cannotStartLocked names what an operator's start may not lift: the
// end of the slot, or a hold from outside ("" when it may start).
func (s *slot) cannotStartLocked() string {
	switch {
	case s.life.phase.ending() && s.life.removed:
		return "its agent file was removed"
	case s.life.phase.ending():
		return "hermeskilld is shutting down"
	}
	switch hold, _ := s.holdLocked(); hold {
	case control.StateQuarantined:
		return "it is quarantined; `hermeskilld release " + s.id + "` lets it start"
	case control.StateEstopped:
		return "the e-stop holds every agent; `hermeskilld release --estop` ends it"
	case control.StateRevoked:
		r, _ := s.d.held.revokedFor(s.id, s.cfg.Labels)
		return "revocation " + r.Rule + " holds it; `hermeskilld revocations lift " + r.Rule + "` ends it"
	case control.StateInvalid:
		return "its agent file is invalid"
	}
	return ""
}

// awaitStart waits for the slot's next start (bounded by startWait).
func (s *slot) awaitStart(ctx context.Context, started <-chan startOutcome) (control.ActionResult, error) {
	t := time.NewTimer(startWait)
	defer t.Stop()
	res := control.ActionResult{ID: s.id}
	select {
	case o := <-started:
		if o.err != nil {
			if errors.Is(o.err, control.ErrConflict) {
				return res, o.err
			}
			return res, fmt.Errorf("agent %s failed to start: %w", s.id, o.err)
		}
		res.PID, res.StartedAt = o.pid, o.started.UTC()
	case <-s.done:
		return res, fmt.Errorf("%w: agent %s was removed", control.ErrConflict, s.id)
	case <-ctx.Done():
		res.Note = "stopped waiting for the start: " + ctx.Err().Error()
	case <-t.C:
		res.Note = "not started within " + startWait.String()
	}
	res.State, _ = s.state()
	if res.Note == "" {
		_, res.Note = s.state()
	}
	return res, nil
}

// state is stateLocked, taking the lock.
func (s *slot) state() (state, note string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stateLocked()
}
