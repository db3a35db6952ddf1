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
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
)

// slot is one agent of the daemon across its runs: it starts the agent,
// waits for the run to end, and decides what comes next (restart with
// backoff, quarantine, crash-loop failure, staying down). One goroutine
// per slot runs that loop; the other methods only change its state under
// mu and wake it.
type slot struct {
	d   *Daemon
	id  string
	log *zap.Logger

	wake chan struct{}
	done chan struct{}

	mu        sync.Mutex
	file      string
	cfg       *config.Agent // what the running (or next) run uses
	next      *config.Agent // takes effect at the next start
	pending   []string      // what changes at the next start
	configErr string        // the file is invalid; cfg is the last good one
	run       agentRun
	started   time.Time
	restarts  restarts // for the backoff and the crash-loop limit
	retryAt   time.Time
	failed    string // crash-loop: why it is left down
	exited    bool   // exited and the policy does not restart it
	removed   bool   // its file is gone: stop and end
	shutdown  bool   // the daemon is stopping
	// who removed or shut down, and why: for a run that was starting then
	endBy, endWhy string
	lastExit      string
	lastCert      string
	runs          int
	waiters       []chan control.KillResult
	killedBy      *control.Quarantine // a manual kill in flight
	revoking      bool                // that kill is a standing revocation's
	stopBy        *operatorStop       // an operator's stop or restart in flight
	starters      []chan startOutcome // operators waiting for the next start
	logw          io.Closer           // the run's output log
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
		if s.removed || s.shutdown {
			s.mu.Unlock()
			return true
		}
		blocked := s.blockedLocked() != ""
		delay := time.Until(s.retryAt)
		s.mu.Unlock()
		if blocked || delay > 0 {
			s.sleep(blocked, delay)
			continue
		}
		r := s.start()
		if r == nil {
			continue
		}
		cur = r
		fault.Inject(fault.Slot, s.id)
		// A stopFor that came while the run was starting found none to
		// stop: stop this one, or the slot would wait on it for ever (and
		// the daemon's shutdown with it). Killing twice is harmless.
		s.mu.Lock()
		ending, by, why := s.removed || s.shutdown, s.endBy, s.endWhy
		s.mu.Unlock()
		if ending {
			r.Kill(by, why)
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
	if r != nil && s.run == r {
		out := r.Wait()
		s.run = nil
		s.lastExit = out.Exit.String()
		if out.CertPath != "" {
			s.lastCert = out.CertPath
		}
	}
	s.failed = "internal error (" + e.Component + "): " + e.Panic + "; release the agent to start it again"
	s.killedBy, s.stopBy = nil, nil
	for _, w := range s.waiters {
		w <- control.KillResult{ID: s.id, Error: "internal error"}
	}
	s.waiters = nil
	s.notifyStartersLocked(nil, fmt.Errorf("%w: not started again: %s", control.ErrConflict, s.failed))
	if s.logw != nil {
		s.logw.Close()
		s.logw = nil
	}
	state, note := s.stateLocked()
	s.mu.Unlock()
	s.d.publishState(s.id, state, note)
}

// sleep waits for a wake-up, the end of the backoff delay (unless
// blocked), or the daemon stopping.
func (s *slot) sleep(blocked bool, delay time.Duration) {
	var timerC <-chan time.Time
	if !blocked {
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

// blockedLocked names why the agent must not start now ("" when it may).
func (s *slot) blockedLocked() string {
	switch {
	case s.removed:
		return "removed"
	case s.d.estopped():
		return control.StateEstopped
	case s.cfg == nil:
		return control.StateInvalid
	}
	if _, ok := s.d.held.revokedFor(s.id, s.cfg.Labels); ok {
		return control.StateRevoked
	}
	if _, ok := s.d.held.quarantined(s.id); ok {
		return control.StateQuarantined
	}
	switch {
	case s.failed != "":
		return control.StateFailed
	case s.exited:
		return control.StateExited
	}
	return ""
}

// start starts one run; on failure to start it schedules a retry as the
// restart policy says and returns nil.
func (s *slot) start() agentRun {
	s.mu.Lock()
	if s.next != nil {
		s.cfg, s.next, s.pending = s.next, nil, nil
	}
	a := s.cfg
	s.mu.Unlock()
	r, err := s.d.starter(s, a)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notifyStartersLocked(r, err)
	if err != nil {
		s.lastExit = "failed to start: " + err.Error()
		s.log.Error("agent failed to start", zap.Error(err))
		var se *procsup.StartError
		if errors.As(err, &se) || a.Restart.Policy != config.RestartNever {
			s.scheduleLocked(a, 0)
		} else {
			s.exited = true
		}
		s.d.publishState(s.id, "start_failed", s.lastExit)
		return nil
	}
	s.run, s.started = r, time.Now()
	s.runs++
	s.d.publishState(s.id, control.StateRunning, fmt.Sprintf("started, pid %d", r.PID()))
	return r
}

// ended decides what follows a run.
func (s *slot) ended(out supervisor.Outcome) {
	s.mu.Lock()
	a, ran := s.cfg, time.Since(s.started)
	s.run = nil
	s.lastExit = out.Exit.String()
	if out.CertPath != "" {
		s.lastCert = out.CertPath
	}
	manual := s.killedBy
	s.killedBy = nil
	stop := s.stopBy
	s.stopBy = nil
	defer func() { s.revoking = false }()
	note := s.lastExit
	restarting := false
	switch {
	case s.removed || s.shutdown:
	case s.d.estopped():
		note = "stopped by the e-stop"
	case s.revoking && s.heldByRuleLocked():
		note = "revoked: " + manual.Reason // the rule keeps it down, not a quarantine
	case stop != nil && manual == nil && stop.endedRun(out):
		note, restarting = s.afterStopLocked(a, out, ran, stop)
	case out.Killed && (manual != nil || a.AfterKill == config.AfterKillQuarantine):
		q := control.Quarantine{Reason: quarantineReason(out), Operator: ""}
		if manual != nil {
			q = *manual
		}
		if err := s.d.held.quarantine(s.id, q.Reason, q.Operator); err != nil {
			s.log.Error("quarantine not persisted", zap.Error(err))
		}
		note = "quarantined: " + q.Reason
	case out.Killed: // after_kill: restart
		s.scheduleLocked(a, ran)
	case a.Restart.Policy == config.RestartAlways,
		a.Restart.Policy == config.RestartOnFailure && out.Exit.ShellCode() != 0:
		s.scheduleLocked(a, ran)
	default:
		s.exited = true
	}
	res := control.KillResult{ID: s.id, Certificate: out.CertPath}
	if out.Killed {
		res.Reached = string(out.Reached)
	}
	for _, w := range s.waiters {
		w <- res
	}
	s.waiters = nil
	if !restarting {
		s.notifyStartersLocked(nil, fmt.Errorf("%w: not started again: %s", control.ErrConflict, note))
	}
	state, _ := s.stateLocked()
	s.mu.Unlock()
	s.d.publishState(s.id, state, note)
}

func quarantineReason(out supervisor.Outcome) string {
	if out.Cert == nil {
		return "killed"
	}
	return fmt.Sprintf("killed by %s: %s", out.Cert.TriggerCheck, out.Cert.TriggerReason)
}

// scheduleLocked plans a restart (restarts.next decides).
func (s *slot) scheduleLocked(a *config.Agent, ran time.Duration) {
	var failed string
	s.restarts, s.retryAt, failed = s.restarts.next(a.Restart, s.id, ran, time.Now())
	if failed != "" {
		s.failed = failed
		s.log.Error("agent left down", zap.String("reason", s.failed))
		return
	}
	s.log.Info("agent restarts after a backoff", zap.Duration("backoff", time.Until(s.retryAt)),
		zap.Int("restarts", len(s.restarts.at)))
}

// stateLocked is the slot's state and a note for `ps`.
func (s *slot) stateLocked() (state, note string) {
	if s.run != nil {
		st := s.run.Status().State
		note = ""
		if len(s.pending) > 0 {
			note = "at next start: " + joinComma(s.pending)
		}
		if s.configErr != "" {
			note = "config error (running the last good config): " + s.configErr
		}
		return st, note
	}
	switch b := s.blockedLocked(); b {
	case control.StateRevoked:
		r, _ := s.d.held.revokedFor(s.id, s.cfg.Labels)
		return b, fmt.Sprintf("rule %s: %s", r.Rule, r.Reason)
	case control.StateQuarantined:
		q, _ := s.d.held.quarantined(s.id)
		return b, q.Reason
	case control.StateEstopped:
		q, _ := s.d.held.estop()
		return b, q.Reason
	case control.StateFailed:
		return b, s.failed
	case control.StateInvalid:
		return b, s.configErr
	case control.StateExited:
		return b, s.lastExit
	case "removed":
		return control.StateStopping, "agent file removed"
	}
	if time.Until(s.retryAt) > 0 {
		return control.StateBackoff, fmt.Sprintf("%s; restarts in %s", s.lastExit, time.Until(s.retryAt).Round(time.Second))
	}
	return control.StateStarting, ""
}

// kill stops the running agent through the ladder as a manual kill; the
// agent is quarantined. An agent that is not running is quarantined at
// once.
func (s *slot) kill(ctx context.Context, operator, reason string, wait bool) control.KillResult {
	s.mu.Lock()
	r := s.run
	if r == nil {
		s.mu.Unlock()
		if err := s.d.held.quarantine(s.id, reason, operator); err != nil {
			return control.KillResult{ID: s.id, Error: err.Error()}
		}
		s.d.publishState(s.id, control.StateQuarantined, reason)
		return control.KillResult{ID: s.id, Error: "not running; quarantined"}
	}
	ch := make(chan control.KillResult, 1)
	s.waiters = append(s.waiters, ch)
	if s.killedBy == nil {
		s.killedBy = &control.Quarantine{Since: time.Now().UTC(), Reason: reason, Operator: operator}
	}
	s.mu.Unlock()
	r.Kill(operator, reason)
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

// heldByRuleLocked reports whether a standing revocation keeps the agent
// from starting (s.mu held).
func (s *slot) heldByRuleLocked() bool {
	_, ok := s.d.held.revokedFor(s.id, s.cfg.Labels)
	return ok
}

// revoke kills the running agent through the ladder for a standing
// revocation (rule): no quarantine, the rule keeps it down.
func (s *slot) revoke(ctx context.Context, rule control.Revocation) control.KillResult {
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
	s.mu.Unlock()
	r.Kill(rule.Operator, fmt.Sprintf("revoked (rule %s): %s", rule.Rule, rule.Reason))
	return control.KillResult{ID: s.id}
}

// stopFor ends the slot's current run (file removed, daemon shutdown)
// without quarantine; the loop then ends.
func (s *slot) stopFor(operator, reason string, shutdown bool) {
	s.mu.Lock()
	if shutdown {
		s.shutdown = true
	} else {
		s.removed = true
	}
	s.endBy, s.endWhy = operator, reason
	r := s.run
	s.mu.Unlock()
	if r != nil {
		r.Kill(operator, reason)
	}
	s.poke()
}

// reconfigure applies a new valid agent file: checks, escalation, mode,
// labels, restart and after_kill at once; command, user, env and cwd at
// the next start (reported by status).
func (s *slot) reconfigure(a *config.Agent) {
	s.mu.Lock()
	s.configErr = ""
	s.failed, s.exited = "", false
	s.file = a.Source
	if s.run == nil {
		s.cfg, s.next, s.pending = a, nil, nil
		s.mu.Unlock()
		s.poke()
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

// release clears a crash-loop failure or a clean exit, so the agent
// starts again (the quarantine itself is the daemon's).
func (s *slot) release() {
	s.mu.Lock()
	s.failed, s.exited = "", false
	s.restarts, s.retryAt = restarts{}, time.Time{}
	s.mu.Unlock()
	s.poke()
}

func joinComma(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ", "
		}
		out += v
	}
	return out
}
