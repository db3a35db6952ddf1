// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/fdreserve"
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// A pause (on_budget: pause) is what a money check's kill threshold does
// instead of the ladder: the LLM gateway holds the run's new requests, the
// tree is frozen, and a pause record (a certificate with mode "paused") is
// written. The loop owns it: Run.Resume raises the budget and thaws; the
// pause_timeout, an operator's kill, an internal error or the main
// process's death end it with the ladder, the tree thawed first so that
// the ladder's signals are handled.

// Errors of Run.Resume.
var (
	// ErrNotPaused: the run is not paused (it runs, or is being stopped).
	ErrNotPaused = errors.New("not paused")
	// ErrResumeBudget: the resume does not raise the budget the run
	// paused for above what is spent (it would pause again at once).
	ErrResumeBudget = errors.New("resume does not raise the budget")
)

// ResumeRequest raises the budget of a paused run and lets it go on. A
// zero field leaves that threshold as it is; the one of the check the
// run paused for must be raised above what is spent.
type ResumeRequest struct {
	CostUSD  float64 // the new cost kill threshold (checks.cost.kill)
	Tokens   int64   // the new tokens kill threshold (checks.tokens.kill)
	Operator string
}

// resumeReq is a ResumeRequest on its way to the loop.
type resumeReq struct {
	ResumeRequest
	reply chan error
}

// pausing is the loop's pause in progress.
type pausing struct {
	trigger symptoms.Symptom // the money check's terminal symptom
	rec     certs.Pause
	timer   *time.Timer
}

// Resume raises the budget of the paused run as req says, thaws its tree
// and lets the requests the gateway held go on. It returns once the run
// runs again, or with an error, the run still paused: ErrNotPaused,
// ErrResumeBudget (wrapped, saying what is needed), a *gateway.ResumeError
// (the new budget does not admit the first held request), or ctx's error.
func (r *Run) Resume(ctx context.Context, req ResumeRequest) error {
	rq := resumeReq{ResumeRequest: req, reply: make(chan error, 1)}
	select {
	case r.loop.resumes <- rq:
	case <-r.done:
		return ErrNotPaused
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-rq.reply:
		return err
	case <-r.done:
		return ErrNotPaused
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Paused reports whether the run is paused (its tree frozen, or about to
// be): a stop of the agent seen then is the pause's, not the agent's.
func (r *Run) Paused() bool { return r.pausedNow.Load() }

// pausesFor: the decision t pauses the run instead of killing it.
func (l *loop) pausesFor(t symptoms.Symptom) bool {
	return l.state == StateRunning && l.a.OnBudget == config.OnBudgetPause && symptoms.Money(t.Check) &&
		l.a.Mode != config.ModeShadow
}

// pause acts on the decision t of a money check with on_budget: pause.
func (l *loop) pause(t symptoms.Symptom) {
	rec := certs.Pause{PausedAt: t.At, Check: string(t.Check), Reason: t.Message, TimeoutMS: l.a.PauseTimeout.Milliseconds()}
	rec = l.eff.pause(t, rec, l.runState())
	l.state = StatePaused
	l.paused = &pausing{trigger: t, rec: rec, timer: time.NewTimer(l.a.PauseTimeout)}
}

// pauseTimeout is the pause's timer, nil when not paused.
func (l *loop) pauseTimeout() <-chan time.Time {
	if l.paused == nil {
		return nil
	}
	return l.paused.timer.C
}

// endPause ends the pause for how (certs.PauseResumed, PauseTimeout,
// PauseKilled) and keeps its record for the certificate. Unless resumed,
// the tree is thawed: what follows is the ladder, and a frozen agent could
// act on none of its signals but SIGKILL.
func (l *loop) endPause(how, operator, budget string, now time.Time) {
	p := l.paused
	if p == nil {
		return
	}
	p.timer.Stop()
	p.rec.EndedAt, p.rec.Ended, p.rec.Operator, p.rec.Budget = now, how, operator, budget
	p.rec.DurationMS = float64(now.Sub(p.rec.PausedAt).Microseconds()) / 1000
	l.pauses = append(l.pauses, p.rec)
	l.paused = nil
	l.state = StateRunning
	if how != certs.PauseResumed {
		l.eff.thaw()
	}
}

// timedOut kills the run whose pause was not resumed in time, for the
// money check it paused for.
func (l *loop) timedOut(now time.Time) {
	p := l.paused
	t := p.trigger
	t.At = now
	t.Message = fmt.Sprintf("%s; paused %s without a resume (pause_timeout %s)", t.Message,
		now.Sub(p.rec.PausedAt).Round(time.Millisecond), config.FormatDuration(l.a.PauseTimeout))
	l.log.Warn("pause not resumed in time; the agent is killed", zap.String("check", string(t.Check)),
		zap.Duration("paused", now.Sub(p.rec.PausedAt)))
	l.endPause(certs.PauseTimeout, "", "", now)
	l.kill(t)
}

// resume carries out an operator's resume, or says why not.
func (l *loop) resume(req ResumeRequest) error {
	p := l.paused
	if p == nil {
		return ErrNotPaused
	}
	next, budget, err := raised(l.a, p.trigger.Check, req, l.engine.State(), l.metered)
	if err != nil {
		return err
	}
	if err := l.eff.resume(next); err != nil {
		return err
	}
	now := l.at(time.Now())
	l.a = next
	l.endPause(certs.PauseResumed, req.Operator, budget, now)
	l.log.Info("resumed", zap.String("operator", req.Operator), zap.String("budget", budget),
		zap.Duration("paused", now.Sub(p.rec.PausedAt)))
	l.eff.emit(Event{Type: EventResumed, Time: now, Pause: &l.pauses[len(l.pauses)-1]})
	l.eff.journalNow(l.runState())
	l.handle(l.engine.Resume(engineConfig(l.a, l.metered), now))
	return nil
}

// raised is agent a with the budget req raises it to, for a pause of
// check c, and the budget in words; or why it is refused: the paused
// check's threshold must be given and above what is spent (else the run
// pauses again at once), and a threshold is only ever raised.
func raised(a *config.Agent, c symptoms.Check, req ResumeRequest, st symptoms.State, metered bool) (*config.Agent, string, error) {
	if req.CostUSD < 0 || req.Tokens < 0 {
		return nil, "", fmt.Errorf("%w: a budget is not negative", ErrResumeBudget)
	}
	tokens, cost := st.Tokens, st.CostUSD
	if metered {
		tokens, cost = st.MeteredTokens, st.MeteredCostUSD
	}
	next := a.Clone()
	var words []string
	if req.CostUSD > 0 {
		old := next.Checks.Cost
		switch {
		case old != nil && req.CostUSD <= old.Kill:
			return nil, "", fmt.Errorf("%w: max cost $%.4f is not above the budget, $%.4f", ErrResumeBudget, req.CostUSD, old.Kill)
		case req.CostUSD <= cost:
			return nil, "", fmt.Errorf("%w: max cost $%.4f is not above the spend, $%.4f", ErrResumeBudget, req.CostUSD, cost)
		}
		l := config.CostLimit{Kill: req.CostUSD}
		if old != nil {
			l.Warn = old.Warn
		}
		next.Checks.Cost = &l
		words = append(words, fmt.Sprintf("cost $%.4f", req.CostUSD))
	}
	if req.Tokens > 0 {
		old := next.Checks.Tokens
		switch {
		case old != nil && req.Tokens <= old.Kill:
			return nil, "", fmt.Errorf("%w: max tokens %d is not above the budget, %d", ErrResumeBudget, req.Tokens, old.Kill)
		case uint64(req.Tokens) <= tokens:
			return nil, "", fmt.Errorf("%w: max tokens %d is not above the spend, %d", ErrResumeBudget, req.Tokens, tokens)
		}
		l := config.Limit{Kill: req.Tokens}
		if old != nil {
			l.Warn = old.Warn
		}
		next.Checks.Tokens = &l
		words = append(words, fmt.Sprintf("tokens %d", req.Tokens))
	}
	switch {
	case c == symptoms.Cost && req.CostUSD == 0:
		return nil, "", fmt.Errorf("%w: the run paused for its cost budget: give a new max cost above $%.4f", ErrResumeBudget, cost)
	case c == symptoms.Tokens && req.Tokens == 0:
		return nil, "", fmt.Errorf("%w: the run paused for its tokens budget: give a new max tokens above %d", ErrResumeBudget, tokens)
	}
	budget := words[0]
	if len(words) > 1 {
		budget += ", " + words[1]
	}
	return next, budget, nil
}

// pause holds the run's LLM requests, freezes its tree and writes the
// pause record, for the decision t; it returns rec completed with how.
func (r *Run) pause(t symptoms.Symptom, rec certs.Pause, st runState) certs.Pause {
	r.pausedNow.Store(true)
	if r.grant != nil {
		r.grant.Pause() // already, when a request that did not fit paused it
		rec.HeldRequests = r.grant.Metered().Held
	}
	how, err := r.tree.Freeze()
	rec.Frozen = how
	if err != nil {
		rec.FreezeError = err.Error()
		r.log.Error("the tree could not be frozen whole for the pause", zap.String("how", how), zap.Error(err))
	}
	r.log.Warn("agent paused: its LLM requests are held and its tree frozen until `hermeskilld resume "+r.id+"` or the pause timeout",
		zap.String("check", string(t.Check)), zap.String("reason", t.Message), zap.String("frozen", how),
		zap.Int("held_requests", rec.HeldRequests), zap.Int64("pause_timeout_ms", rec.TimeoutMS))
	st.pauses = append(st.pauses, rec)
	procs, _ := r.tree.Snapshot(cmdlineMax, false)
	c := r.baseCertificate(t, st, procs)
	c.Mode = certs.ModePaused
	c.TerminatedAt = time.Time{}
	var path string
	if err := fdreserve.Do(func() (err error) { path, err = certs.Write(r.o.CertsDir, c, r.o.Signer); return err }); err != nil {
		r.log.Error("pause record not written", zap.Error(err))
	} else {
		r.log.Info("pause record written", zap.String("path", path))
	}
	r.emit(Event{Type: EventPaused, Cert: c, CertPath: path, Err: err, Pause: &rec, Time: t.At})
	// Should hermeskilld die now, the certificate the next start writes
	// says the run was paused.
	r.journalNow(st)
	return rec
}

// resume gives the grant the budget of a and thaws the tree; an error
// (the budget does not admit the first held request) leaves both as
// they were.
func (r *Run) resume(a *config.Agent) error {
	if r.grant != nil {
		if err := r.grant.Resume(budget(a)); err != nil && !errors.Is(err, gateway.ErrNotPaused) {
			return err
		}
	}
	r.thaw()
	return nil
}

// thaw lets the frozen tree run again.
func (r *Run) thaw() {
	if err := r.tree.Thaw(); err != nil {
		r.log.Error("the tree could not be thawed whole", zap.Error(err))
	}
	r.pausedNow.Store(false)
}
