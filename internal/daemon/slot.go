// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/fault"
	"github.com/hermeskill/hermeskilld/internal/outbox"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// slot is one agent of the daemon across its runs: it starts the agent,
// waits for the run to end, and decides what comes next (restart with
// backoff, quarantine, crash-loop failure, staying down). Its phase and
// what comes next are decided by next (phase.go) alone; one goroutine per
// slot runs the loop and applies them, and the other methods apply the
// events they bring under mu and wake it.
type slot struct {
	d   *Daemon
	id  string
	log *zap.Logger

	wake chan struct{}
	done chan struct{}

	mu        sync.Mutex
	life      life // the phase; changed only through stepLocked
	file      string
	cfg       *config.Agent // what the running (or next) run uses
	next      *config.Agent // takes effect at the next start
	pending   []string      // what changes at the next start
	configErr string        // the file is invalid; cfg is the last good one
	run       agentRun      // the live run (phaseRunning, phaseStopping)
	started   time.Time
	lastCert  string
	runs      int
	// How the live run is being ended, and who waits for it.
	waiters  []chan control.KillResult
	killedBy *control.Quarantine // a manual kill in flight
	revoking bool                // that kill is a standing revocation's
	stopBy   *operatorStop       // an operator's stop or restart in flight
	starters []chan startOutcome // operators waiting for the next start
	// starting is true while a run is being started (s.run is still nil):
	// a kill then waits for it and stops it as its start completes.
	starting bool
	logw     io.Closer // the run's output log
	// charged is what the live run spent that the budgets across runs
	// were charged (its effective cost when last read).
	charged float64
}

func newSlot(d *Daemon, a *config.Agent) *slot {
	return &slot{d: d, id: a.ID, log: d.log.With(zap.String("agent", a.ID)), cfg: a, file: a.Source,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (s *slot) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// loop is the slot's goroutine. A panic in it (serve) ends its run, if
// any, for internal_error and leaves the agent down (failed) until an
// operator releases it; the slot and every other agent go on.
func (s *slot) loop() {
	defer close(s.done)
	for !s.serve() {
	}
}

// serve runs the slot until it ends (true), or until a panic, recovered
// (false).
func (s *slot) serve() (ended bool) {
	var cur agentRun // the run started, until it ended
	defer func() {
		if v := recover(); v != nil {
			s.recovered(fault.Recovered(fault.Slot, v), cur)
		}
	}()
	for {
		s.mu.Lock()
		act := s.stepLocked(event{kind: evWake})
		s.mu.Unlock()
		if act.end {
			return true
		}
		if !act.start {
			s.sleep(act.wait)
			continue
		}
		r, act := s.start()
		if r == nil {
			continue
		}
		cur = r
		fault.Inject(fault.Slot, s.id)
		// Removed or shut down while it was starting: the stop found no
		// run to stop, so this one is stopped now (next decides).
		if act.kill {
			r.Kill(act.killBy, act.killWhy)
		}
		<-r.Done()
		s.ended(r.Wait())
		cur = nil
		if s.logw != nil {
			s.logw.Close()
			s.logw = nil
		}
	}
}

// stepLocked applies ev to the slot's life (next decides) and does what
// is done under s.mu: the log lines of a restart decision, the quarantine
// persisted. It returns the actions left to the caller.
func (s *slot) stepLocked(ev event) actions {
	if ev.now.IsZero() {
		ev.now = time.Now()
	}
	hold, _ := s.holdLocked()
	var act actions
	s.life, act = next(s.life, ev, facts{id: s.id, agent: s.cfg, hold: hold})
	if act.scheduled {
		if s.life.phase == phaseFailed {
			s.log.Error("agent left down", zap.String("reason", s.life.failed))
		} else {
			s.log.Info("agent restarts after a backoff", zap.Duration("backoff", time.Until(s.life.retryAt)),
				zap.Int("restarts", len(s.life.restarts.at)))
		}
	}
	if q := act.quarantine; q != nil {
		if err := s.d.held.quarantine(s.id, q.Reason, q.Operator); err != nil {
			s.log.Error("quarantine not persisted", zap.Error(err))
		}
	}
	return act
}

// failer is a run that can be killed for an internal error
// (*supervisor.Run).
type failer interface{ Fail(*fault.Error) }

// recovered ends what a panic in the slot's goroutine left: its run r (if
// any) is killed for internal_error and waited for, its certificate
// written by the run; the agent is left down as failed. s.mu may still be
// held by the code that panicked: it is not waited for.
func (s *slot) recovered(e *fault.Error, r agentRun) {
	s.log.Error("internal error: the agent's slot panicked; its run is killed and the agent left down",
		zap.String("panic", e.Panic), zap.String("stack", e.Stack))
	if r != nil {
		if f, ok := r.(failer); ok {
			f.Fail(e)
		} else {
			r.Kill("hermeskilld", "internal error: "+e.Panic)
		}
		<-r.Done()
	}
	if !s.mu.TryLock() {
		s.log.Error("the agent's slot is left as it was: its lock is held")
		return
	}
	ev := event{kind: evPanicked, why: "internal error (" + e.Component + "): " + e.Panic + "; release the agent to start it again"}
	if r != nil && s.run == r {
		ev.out, ev.hadRun = r.Wait(), true
		s.run = nil
		if ev.out.CertPath != "" {
			s.lastCert = ev.out.CertPath
		}
	}
	s.stepLocked(ev)
	s.killedBy, s.revoking, s.stopBy = nil, false, nil
	for _, w := range s.waiters {
		w <- control.KillResult{ID: s.id, Error: "internal error"}
	}
	s.waiters = nil
	s.notifyStartersLocked(nil, fmt.Errorf("%w: not started again: %s", control.ErrConflict, ev.why))
	if s.logw != nil {
		s.logw.Close()
		s.logw = nil
	}
	state, note := s.stateLocked()
	s.mu.Unlock()
	s.d.publishState(s.id, state, note)
}

// sleep waits for a wake-up, the end of the backoff delay (0: none), or
// the daemon stopping.
func (s *slot) sleep(delay time.Duration) {
	var timerC <-chan time.Time
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		timerC = t.C
	}
	select {
	case <-s.wake:
	case <-timerC:
	case <-s.d.stopping:
	}
}

// holdLocked is what holds the agent down from outside, and why: the
// e-stop, an invalid file never applied, a standing revocation, a tripped
// budget across runs (shown as revoked), a quarantine, in that order (""
// when nothing does).
func (s *slot) holdLocked() (hold, note string) {
	if q, ok := s.d.held.estop(); ok {
		return control.StateEstopped, q.Reason
	}
	if s.cfg == nil {
		return control.StateInvalid, s.configErr
	}
	if r, ok := s.d.held.revokedFor(s.id, s.cfg.Labels); ok {
		return control.StateRevoked, fmt.Sprintf("rule %s: %s", r.Rule, r.Reason)
	}
	if note, ok := s.d.budgetHold(s.cfg.Labels); ok {
		return control.StateRevoked, note
	}
	if q, ok := s.d.held.quarantined(s.id); ok {
		return control.StateQuarantined, q.Reason
	}
	return "", ""
}

// start starts one run and returns it with what follows its start (a
// kill, when the slot was removed or shut down meanwhile); on failure to
// start it returns nil, next having decided on a retry or not.
func (s *slot) start() (agentRun, actions) {
	s.mu.Lock()
	if s.next != nil {
		s.cfg, s.next, s.pending = s.next, nil, nil
	}
	a := s.cfg
	s.starting = true
	s.mu.Unlock()
	r, err := s.d.starter(s, a)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starting = false
	s.notifyStartersLocked(r, err)
	if err != nil {
		s.killedBy, s.revoking = nil, false
		for _, w := range s.waiters { // kills that waited for this start: there is nothing to stop
			w <- control.KillResult{ID: s.id, Error: "failed to start: " + err.Error()}
		}
		s.waiters = nil
		s.log.Error("agent failed to start", zap.Error(err))
		var se *procsup.StartError
		act := s.stepLocked(event{kind: evStartFailed, why: err.Error(), startError: errors.As(err, &se)})
		s.d.publishState(s.id, act.publish, act.note)
		return nil, act
	}
	s.run, s.started, s.charged = r, time.Now(), 0
	s.runs++
	act := s.stepLocked(event{kind: evStarted, pid: r.PID()})
	s.d.publishState(s.id, act.publish, act.note)
	if !act.kill {
		act = s.heldWhileStartingLocked(act)
	}
	return r, act
}

// heldWhileStartingLocked stops a run that something began to hold down
// while it was starting: the e-stop, a standing revocation, a tripped
// budget, a quarantine came after the start was decided and found no run
// to stop (a start takes a fork, an exec and the agent's own start-up).
// The run is killed at once, as if it had been running then.
func (s *slot) heldWhileStartingLocked(act actions) actions {
	if k := s.killedBy; k != nil { // a kill that waited for the start (kill)
		act.kill, act.killBy, act.killWhy = true, k.Operator, k.Reason
		s.log.Warn("agent killed while it was starting: stopped at once", zap.String("operator", k.Operator), zap.String("reason", k.Reason))
		return act
	}
	hold, note := s.holdLocked()
	if hold == "" || hold == control.StateInvalid {
		return act
	}
	q := control.Quarantine{Since: time.Now().UTC(), Reason: note, Operator: hold}
	switch {
	case hold == control.StateEstopped:
		if e, ok := s.d.held.estop(); ok {
			q = e
		}
	case hold == control.StateRevoked:
		if r, ok := s.d.held.revokedFor(s.id, s.cfg.Labels); ok {
			q = control.Quarantine{Since: r.Since, Reason: r.Reason, Operator: r.Operator}
		}
		s.revoking = true // the rule (or the budget) keeps it down, not a quarantine
	}
	if s.killedBy == nil {
		s.killedBy = &q
	}
	act.kill, act.killBy, act.killWhy = true, q.Operator, note
	s.log.Warn("agent held down while it was starting: stopped at once", zap.String("hold", hold), zap.String("reason", note))
	return act
}

// ended applies the end of the live run: next decides what follows, and
// those waiting for the end (and the start after) are told.
func (s *slot) ended(out supervisor.Outcome) {
	s.chargeEnded(out) // first: a budget it trips holds it (next reads the hold)
	s.mu.Lock()
	ev := event{kind: evRunEnded, out: out, ran: time.Since(s.started), manual: s.killedBy, revoking: s.revoking, stop: s.stopBy}
	s.run = nil
	if out.CertPath != "" {
		s.lastCert = out.CertPath
	}
	s.killedBy, s.revoking, s.stopBy = nil, false, nil
	act := s.stepLocked(ev)
	res := control.KillResult{ID: s.id, Certificate: out.CertPath}
	if out.Killed {
		res.Reached = string(out.Reached)
	}
	switch {
	case out.Cert != nil && out.CertPath != "":
		run := outbox.RunOf(out.Cert, out.TreeEmpty)
		res.CertID, res.TreeEmpty, res.Revoked = run.CertID, &run.TreeEmpty, &run.Revoked
	case out.Cert != nil:
		res.Error = fmt.Sprintf("certificate %s not written: %v", out.Cert.CertID, out.CertErr)
	}
	for _, w := range s.waiters {
		w <- res
	}
	s.waiters = nil
	if !act.restarting {
		s.notifyStartersLocked(nil, fmt.Errorf("%w: not started again: %s", control.ErrConflict, act.note))
	}
	state, _ := s.stateLocked()
	s.mu.Unlock()
	s.d.publishState(s.id, state, act.note)
}

// stateLocked is the slot's state and a note for `ps` (published).
func (s *slot) stateLocked() (state, note string) {
	v := view{now: time.Now(), pending: s.pending, configErr: s.configErr}
	if s.run != nil {
		v.run = s.run.Status().State
	}
	if !s.life.phase.live() {
		v.hold, v.holdNote = s.holdLocked()
	}
	return published(s.life, v)
}

// kill stops the running agent through the ladder as a manual kill; the
// agent is quarantined. An agent that is not running is quarantined at
// once.
func (s *slot) kill(ctx context.Context, operator, reason string, wait bool) control.KillResult {
	s.mu.Lock()
	r := s.run
	if r == nil && s.starting {
		// Its start is under way (a fork, an exec, the agent's own
		// start-up): it is stopped as the start completes, and the kill
		// waits for its end as for a running one.
		ch := s.waitLocked()
		if s.killedBy == nil {
			s.killedBy = &control.Quarantine{Since: time.Now().UTC(), Reason: reason, Operator: operator}
		}
		s.mu.Unlock()
		return s.result(ctx, ch, wait)
	}
	if r == nil {
		s.mu.Unlock()
		if err := s.d.held.quarantine(s.id, reason, operator); err != nil {
			return control.KillResult{ID: s.id, Error: err.Error()}
		}
		s.d.publishState(s.id, control.StateQuarantined, reason)
		return control.KillResult{ID: s.id, Error: "not running; quarantined"}
	}
	ch := s.waitLocked()
	if s.killedBy == nil {
		s.killedBy = &control.Quarantine{Since: time.Now().UTC(), Reason: reason, Operator: operator}
	}
	s.mu.Unlock()
	r.Kill(operator, reason)
	return s.result(ctx, ch, wait)
}

// revoke kills the running agent through the ladder for a standing
// revocation (rule): no quarantine, the rule keeps it down. With wait it
// returns once the run ended (or ctx), as kill.
func (s *slot) revoke(ctx context.Context, rule control.Revocation, wait bool) control.KillResult {
	s.mu.Lock()
	r := s.run
	if r == nil {
		s.mu.Unlock()
		return control.KillResult{ID: s.id, Error: "not running"}
	}
	if s.killedBy == nil {
		s.killedBy = &control.Quarantine{Since: rule.Since, Reason: rule.Reason, Operator: rule.Operator}
		s.revoking = true
	}
	ch := s.waitLocked()
	s.mu.Unlock()
	r.Kill(rule.Operator, fmt.Sprintf("revoked (rule %s): %s", rule.Rule, rule.Reason))
	return s.result(ctx, ch, wait)
}

// waitLocked registers a waiter for the end of the live run (s.mu held).
func (s *slot) waitLocked() chan control.KillResult {
	ch := make(chan control.KillResult, 1)
	s.waiters = append(s.waiters, ch)
	return ch
}

// result is what kill and revoke return: at once without wait, else the
// end of the run from ch, or ctx's end.
func (s *slot) result(ctx context.Context, ch <-chan control.KillResult, wait bool) control.KillResult {
	if !wait {
		return control.KillResult{ID: s.id}
	}
	select {
	case res := <-ch:
		return res
	case <-ctx.Done():
		return control.KillResult{ID: s.id, Error: "stopped waiting: " + ctx.Err().Error()}
	}
}

// hostStop kills the running agent through the ladder for a reason of the
// host's own (check), as kill does for an operator, without waiting.
func (s *slot) hostStop(check symptoms.Check, observed, reason string) {
	s.mu.Lock()
	r := s.run
	if r == nil {
		s.mu.Unlock()
		return
	}
	if s.killedBy == nil {
		s.killedBy = &control.Quarantine{Since: time.Now().UTC(), Reason: reason, Operator: string(check)}
	}
	s.mu.Unlock()
	r.HostStop(check, observed, reason)
}

// stopFor ends the slot's current run (file removed, daemon shutdown)
// without quarantine; the loop then ends.
func (s *slot) stopFor(operator, reason string, shutdown bool) {
	kind := evRemoved
	if shutdown {
		kind = evShutdown
	}
	s.mu.Lock()
	act := s.stepLocked(event{kind: kind, by: operator, why: reason})
	r := s.run
	s.mu.Unlock()
	if act.kill {
		r.Kill(act.killBy, act.killWhy)
	}
	if act.poke {
		s.poke()
	}
}

// reconfigure applies a new valid agent file: checks, escalation, mode,
// labels, restart and after_kill at once; command, user, env and cwd at
// the next start (reported by status).
func (s *slot) reconfigure(a *config.Agent) {
	s.mu.Lock()
	s.configErr = ""
	s.file = a.Source
	act := s.stepLocked(event{kind: evReconfigured})
	if s.run == nil {
		s.cfg, s.next, s.pending = a, nil, nil
		s.mu.Unlock()
		if act.poke {
			s.poke()
		}
		return
	}
	s.pending = s.cfg.StartDiff(a)
	s.cfg = s.cfg.WithLive(a)
	if len(s.pending) > 0 {
		s.next = a
	} else {
		s.next = nil
	}
	r := s.run
	s.mu.Unlock()
	r.Reconfigure(a)
}

// invalid records that the agent's file no longer parses; a running agent
// keeps its last good configuration.
func (s *slot) invalid(err error) {
	s.mu.Lock()
	s.configErr = err.Error()
	s.mu.Unlock()
}

// release clears a crash-loop failure, a clean exit or a backoff, so the
// agent starts again (the quarantine itself is the daemon's).
func (s *slot) release() {
	s.mu.Lock()
	act := s.stepLocked(event{kind: evReleased})
	s.mu.Unlock()
	if act.poke {
		s.poke()
	}
}
