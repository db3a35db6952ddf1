// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/escalate"
	"github.com/hermeskill/hermeskilld/internal/fault"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// effects is what the loop acts on: the agent's processes, its socket and
// its records. *Run is the real one; the loop's tests give a fake, so that
// testing/synctest drives the loop alone (its only blocking points are
// channels and timers).
type effects interface {
	// ladder acts on the decision to kill for trigger, the moment it
	// falls (loop.kill): it starts the escalation ladder, whose first
	// step revokes the agent's LLM handle (no request may get through
	// while the autopsy is taken), then takes the autopsy; its result
	// arrives on the channel. dumpPID is the sender of DUMP_SIGNAL, if
	// any.
	ladder(trigger symptoms.Symptom, dump string, dumpPID int) <-chan escalate.Result
	// cleanup starts what follows a main process that exited by itself:
	// the ladder for what it left behind, nil when it left nothing.
	cleanup() <-chan escalate.Result
	// finish writes the record of the run and releases what it holds.
	// res is the last ladder's result, nil when none ran.
	finish(res *escalate.Result, trigger *symptoms.Symptom, st runState) Outcome
	// shadow records, in shadow mode, the kill that would have happened.
	shadow(s symptoms.Symptom, st runState) string
	// warn sends a warning directive to the agent's clients.
	warn(s symptoms.Symptom)
	// sample measures the tree for the kernel checks: ok is false when
	// there was nothing to measure (the tree is gone); err is a failure
	// to read it, fdsErr one to count its descriptors only, beside a
	// sample without them (sampler.take).
	sample(checks config.Checks, now time.Time) (s symptoms.Sample, ok bool, err, fdsErr error)
	// heartbeats are the socket's counters, for Status.
	heartbeats() heartbeat.StatsSnapshot
	// setBudget gives the run's LLM traffic the budget of a (a new agent
	// file): the gateway refuses a request whose worst case does not fit.
	setBudget(a *config.Agent)
	// answered is told of each STOPPING=1 a client sent (from its
	// address, read at at): once a STOP was sent, it may acknowledge it.
	answered(client string, at time.Time)
	// readNow puts what has reached the socket so far on its channel: a
	// poller reads in batches, and a deadline must not be judged before a
	// heartbeat that arrived in time is seen.
	readNow()
	// pause acts on the decision t to pause (on_budget: pause): the LLM
	// requests held, the tree frozen, the pause record written; it
	// returns rec completed.
	pause(t symptoms.Symptom, rec certs.Pause, st runState) certs.Pause
	// resume gives the gateway the budget of a and thaws the tree, or
	// says why not (the budget does not admit the first held request).
	resume(a *config.Agent) error
	// thaw thaws the tree a pause froze, before the ladder.
	thaw()
	// journal rewrites the run's journal entry when it is due; st is
	// called only then. journalNow rewrites it at once (a pause, a
	// resume: what a death of hermeskilld's would leave must say so).
	journal(st func() runState)
	journalNow(st runState)
	emit(Event)
}

// runState is what the loop hands to the records: the engine's view of
// the agent, the symptoms, the configuration in force.
type runState struct {
	agent    *config.Agent
	engine   symptoms.State
	symptoms []symptoms.Symptom
	// pauses are the run's pauses so far (on_budget: pause).
	pauses []certs.Pause
}

// recentSymptoms is how many symptoms Status carries.
const recentSymptoms = 20

// loop is a run's owning goroutine: it alone touches the engine, the
// deadline timer and the decisions — when the ladder starts, when the run
// is over — and it publishes a Status after every change, which readers
// take without a round trip. The ladders run on goroutines of their own
// (effects.ladder, effects.cleanup) while the loop keeps draining the
// socket and publishing.
type loop struct {
	log    *zap.Logger
	a      *config.Agent
	engine *symptoms.Engine
	eff    effects

	msgs    <-chan *heartbeat.Received
	exited  <-chan struct{}
	kills   chan killReq
	reconf  chan *config.Agent
	resumes chan resumeReq
	// limits are terminal symptoms decided outside the run (Run.Exceed).
	limits chan symptoms.Symptom

	// ladder is the ladder in flight, once the run is stopping: the
	// kill's (kill) or the cleanup's after the main process's own exit.
	ladder <-chan escalate.Result

	base    Status // the parts that never change
	status  atomic.Pointer[Status]
	recent  []symptoms.Symptom
	state   string
	trigger *symptoms.Symptom
	sample  symptoms.Sample
	blind   blindness
	// shadowed: a check fired in shadow mode; this run is never enforced.
	shadowed bool
	dump     string // DUMP_SIGNAL as announced
	dumpPID  int    // its sender
	shadows  []string
	// metered: the gateway carries the agent's LLM traffic; meters are
	// its records of this run (nil without a gateway).
	metered bool
	meters  *meterQueue
	// egressQ is what the egress proxy did (network: allowlist; nil
	// without); refusedSeen are the destinations whose first refusal was
	// an event.
	egressQ     *egressQueue
	refusedSeen map[string]bool
	// faults are internal errors recovered in code serving the run
	// (Run.Fail): each kills it, in every mode.
	faults <-chan *fault.Error
	// paused is the pause in progress (state StatePaused); pauses are
	// those that ended.
	paused *pausing
	pauses []certs.Pause
	// clock is the latest instant the engine was given: it never goes
	// back (a datagram queued before a later event is applied at the
	// later one's time).
	clock time.Time
}

func newLoop(log *zap.Logger, a *config.Agent, engine *symptoms.Engine, eff effects, base Status,
	msgs <-chan *heartbeat.Received, exited <-chan struct{}) *loop {
	l := &loop{log: log, a: a, engine: engine, eff: eff, base: base, msgs: msgs, exited: exited,
		kills: make(chan killReq, 1), reconf: make(chan *config.Agent, 1), limits: make(chan symptoms.Symptom, 1), resumes: make(chan resumeReq), state: StateRunning}
	l.publish()
	return l
}

// run is the loop; it returns how the run ended.
func (l *loop) run() Outcome {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var sampleC <-chan time.Time
	var sampleT *time.Timer
	iv := sampleInterval(l.a.Checks)
	if iv > 0 {
		sampleT = time.NewTimer(untilTick(time.Now(), iv))
		defer sampleT.Stop()
		sampleC = sampleT.C
	}
	msgs, exited := l.msgs, l.exited
	for {
		l.arm(timer)
		select {
		case m, ok := <-msgs:
			if !ok {
				msgs = nil
				break
			}
			l.observe(m)
		case <-timer.C:
			// A heartbeat that arrived before the deadline may still be
			// unread or queued: read and apply it (each at its own
			// arrival time) first, so the timer and the heartbeat cannot
			// race.
			// So may a request the gateway saw arrive or end.
			l.eff.readNow()
			msgs = l.drain(msgs)
			l.meter()
			l.handle(l.engine.Tick(l.at(time.Now())))
		case now := <-sampleC:
			sampleT.Reset(untilTick(time.Now(), iv))
			s, ok, err, fdsErr := l.eff.sample(l.a.Checks, now)
			switch {
			case err != nil:
				l.sampleFailed(err, false, l.at(now))
			case ok:
				l.sampleSeen(fdsErr == nil)
				l.sample = s
				l.handle(l.engine.ObserveSample(s, l.at(now)))
				if fdsErr != nil {
					l.sampleFailed(fdsErr, true, l.at(now))
				}
			}
		case k := <-l.kills:
			var s symptoms.Symptom
			if k.check != "" {
				s, _ = l.engine.HostStop(k.check, k.observed, k.reason, l.at(time.Now()))
			} else {
				s, _ = l.engine.Manual(k.operator, k.reason, l.at(time.Now()))
			}
			l.handle([]symptoms.Symptom{s})
		case s := <-l.limits:
			l.handle(l.engine.Exceeded(s, l.at(time.Now())))
		case a := <-l.reconf:
			l.reconfigure(a)
		case rq := <-l.resumes:
			rq.reply <- l.resume(rq.ResumeRequest)
		case now := <-l.pauseTimeout():
			l.timedOut(l.at(now))
		case e := <-l.faults:
			l.handle([]symptoms.Symptom{internalSymptom(e, l.at(time.Now()))})
		case <-l.meters.readyC():
			// As for the timer: what was queued before now is applied
			// first, at its own time.
			msgs = l.drain(msgs)
			l.meter()
		case <-l.egressQ.readyC():
			l.egressEvents()
		case res := <-l.ladder:
			return l.finish(&res)
		case <-exited:
			exited = nil
			if l.ladder != nil {
				break // the ladder sees it too, and ends
			}
			// Dead while paused (a SIGKILL reaches a frozen process):
			// what it left behind is thawed for the ladder's SIGTERM.
			l.endPause(certs.PauseKilled, "", "", l.at(time.Now()))
			// The main process exited by itself; what it left behind
			// gets the ladder's SIGTERM, grace, SIGKILL.
			if l.ladder = l.eff.cleanup(); l.ladder == nil {
				return l.finish(nil)
			}
			l.state = StateStopping
		}
		l.publish()
		l.eff.journal(l.runState)
	}
}

// publish makes the current Status the one readers see.
func (l *loop) publish() {
	st := l.base
	st.State = l.state
	st.Mode = l.a.Mode
	st.Agent = l.engine.State()
	st.Symptoms = l.recent
	st.Trigger = l.trigger
	st.Sample = l.sample
	st.SamplerError = l.blind.last
	st.Heartbeat = l.eff.heartbeats()
	if l.paused != nil {
		p := l.paused.rec
		st.Pause = &p
	}
	l.status.Store(&st)
}

func (l *loop) observe(m *heartbeat.Received) {
	fault.Inject(fault.RunLoop, l.a.ID)
	if m.Msg.Has(heartbeat.FieldDumpSignal) {
		l.dump, l.dumpPID = m.Msg.DumpSignal, m.PID // last words go to whoever announced them
	}
	if m.Msg.Has(heartbeat.FieldStopping) && l.ladder != nil {
		l.eff.answered(m.Client, m.At)
	}
	l.handle(l.engine.Observe(&m.Msg, l.at(m.At)))
	heartbeat.Free(m)
}

// drain applies every message already queued, without waiting; it
// returns nil once the socket's channel is closed.
//
// It takes only what was queued when it began: under a flood it would
// otherwise never return, and the deadline it runs for would wait.
func (l *loop) drain(msgs <-chan *heartbeat.Received) <-chan *heartbeat.Received {
	for n := len(msgs); msgs != nil && n > 0; n-- {
		select {
		case m, ok := <-msgs:
			if !ok {
				return nil
			}
			l.observe(m)
		default:
			return msgs
		}
	}
	return msgs
}

// arm points the single timer at the engine's next deadline. A heartbeat
// that moved the deadline after the timer fired is harmless: Tick
// re-checks against the current one.
func (l *loop) arm(t *time.Timer) {
	at, ok := l.engine.NextDeadline()
	if !ok {
		t.Stop()
		return
	}
	t.Reset(time.Until(at))
}

// at is t for the engine: never before an instant it was already given.
func (l *loop) at(t time.Time) time.Time {
	if t.Before(l.clock) {
		return l.clock
	}
	l.clock = t
	return t
}

// handle acts on a decision to kill first (kill), then logs symptoms,
// reports them, sends warnings to the agent, and in shadow mode records
// each check's first would-be kill.
func (l *loop) handle(syms []symptoms.Symptom) {
	if t, ok := l.decision(syms); ok {
		if l.pausesFor(t) {
			l.pause(t)
		} else {
			l.kill(t)
		}
	}
	for i := range syms {
		s := syms[i]
		fields := []zap.Field{zap.String("check", string(s.Check)), zap.String("observed", s.Observed),
			zap.String("threshold", s.Threshold), zap.String("message", s.Message)}
		if s.Severity == symptoms.Warning {
			l.log.Warn("warning symptom", fields...)
			l.eff.warn(s)
		} else {
			l.log.Warn("terminal symptom", fields...)
		}
		l.recent = append(l.recent, s)
		if n := len(l.recent); n > recentSymptoms {
			// A new slice: a published Status may still hold the old one.
			l.recent = append([]symptoms.Symptom(nil), l.recent[n-recentSymptoms:]...)
		}
		l.eff.emit(Event{Type: EventSymptom, Symptom: &s})
		if s.Severity == symptoms.Terminal && !failsClosed(s.Check) && l.a.Mode == config.ModeShadow {
			// Each check's first would-be kill gets its certificate: a
			// later max_runtime after a tool_loop is what someone tuning
			// thresholds needs to see.
			l.shadowed = true
			if path := l.eff.shadow(s, l.runState()); path != "" {
				l.shadows = append(l.shadows, path)
			}
		}
	}
}

// decision is the terminal symptom among syms that the run will act on:
// the first one, while no ladder runs, in enforce mode — or an operator's
// kill or an internal error, real in every mode (in shadow mode a check's
// terminal symptom is recorded by handle, never acted on). While paused
// only those two end the pause.
func (l *loop) decision(syms []symptoms.Symptom) (symptoms.Symptom, bool) {
	if l.state != StateRunning && l.state != StatePaused {
		return symptoms.Symptom{}, false
	}
	for _, s := range syms {
		if s.Severity != symptoms.Terminal {
			continue
		}
		if l.state == StatePaused {
			if failsClosed(s.Check) {
				return s, true
			}
			continue
		}
		if failsClosed(s.Check) || !l.shadowed && l.a.Mode != config.ModeShadow {
			return s, true
		}
	}
	return symptoms.Symptom{}, false
}

// failsClosed: a kill for check c is real in every mode (an operator's,
// hermeskilld's own failure serving the run).
func failsClosed(c symptoms.Check) bool {
	return c == symptoms.Manual || c == symptoms.InternalError || c == symptoms.ControlPlaneUnreachable
}

// kill acts on the decision to kill for t, whatever made it: a check, an
// operator (Run.Kill: the CLI, a stop signal, the daemon's kill, stop,
// revoke, e-stop and shutdown, the control plane), an internal error
// (Run.Fail) or a panic of the loop itself (Run.afterPanic). The ladder
// starts at once, and its first step revokes the agent's LLM handle.
func (l *loop) kill(t symptoms.Symptom) {
	l.endPause(certs.PauseKilled, "", "", t.At)
	l.trigger = &t
	l.state = StateStopping
	l.ladder = l.eff.ladder(t, l.dump, l.dumpPID)
}

// reconfigure applies a new agent file to the running agent: checks and
// escalation now; identity and how it is started, at the next start.
func (l *loop) reconfigure(a *config.Agent) {
	l.a = l.a.WithLive(a)
	l.log.Info("configuration applied")
	if l.shadowed && l.a.Mode != config.ModeShadow {
		l.log.Warn("mode enforce applies from the next start: a check already fired in shadow mode during this run")
	}
	l.handle(l.engine.Reconfigure(engineConfig(l.a, l.metered), l.at(time.Now())))
	l.eff.setBudget(l.a)
}

// meter applies what the gateway saw of the run's traffic, in the order
// it was told. Each request's arrival and end are heartbeats, at their
// own instants (as a datagram is applied at its arrival), and a request
// in flight holds the heartbeat; an answered one is a step of progress
// for a run that reports none (symptoms: liveness from the wire). A
// record's spend and tool calls decide the budgets and tool_loop, and
// each record is an event (an audit line).
//
// A record comes when its response ended, which for a long stream is
// minutes after the request arrived (rec.At): its spend and tool calls are
// known from now on, so the engine takes them now — a kill they cause is
// triggered now, and the engine's clock does not go back to the arrival
// of a request that overlapped others. The event is stamped with the
// response's end, and comes before the symptoms it caused.
func (l *loop) meter() {
	for _, ev := range l.meters.take() {
		if ev.arrived {
			l.handle(l.engine.RequestSent(l.at(ev.at)))
			continue
		}
		if p := ev.paused; p != nil {
			// A request that did not fit is held (on_budget: pause):
			// the budget's decision, at once.
			l.handle(l.engine.BudgetHeld(symptoms.Check(p.Check), p.Reason, l.at(ev.at)))
			continue
		}
		rec := ev.rec
		if rec != nil {
			l.eff.emit(Event{Type: EventLLMRequest, LLM: rec, Time: ev.end()})
		}
		l.handle(l.engine.ResponseEnded(rec != nil && rec.Answered(), l.at(ev.end())))
		now := l.at(time.Now())
		if rec == nil {
			l.handle(l.engine.WireSettled(now))
			continue
		}
		if rec.UsageUnknown {
			l.handle(l.engine.UsageUnknown(rec.Model, rec.Path, rec.CostUSD, now))
		}
		if rec.OverBudget != "" {
			l.handle(l.engine.OverBudget(symptoms.Check(rec.OverBudget), rec.Err, now))
		}
		if !rec.Refused {
			l.handle(l.engine.ObserveMetered(uint64(max(rec.Tokens(), 0)), rec.CostUSD, rec.Priced, rec.Model, wireTools(*rec), now))
		}
		l.handle(l.engine.WireSettled(now))
	}
}

func (l *loop) runState() runState {
	pauses := l.pauses
	if l.paused != nil {
		pauses = append(slices.Clip(pauses), l.paused.rec)
	}
	return runState{agent: l.a, engine: l.engine.State(), symptoms: l.engine.Log(), pauses: pauses}
}

// finish ends the run and publishes its last Status.
func (l *loop) finish(res *escalate.Result) Outcome {
	out := l.eff.finish(res, l.trigger, l.runState())
	out.ShadowCerts = l.shadows
	l.state = StateExited
	l.publish()
	return out
}

// engineConfig is what the symptoms engine checks for agent a; metered:
// its budgets count what the gateway metered.
func engineConfig(a *config.Agent, metered bool) symptoms.Config {
	return symptoms.Config{Checks: a.Checks, StopTimeout: a.Escalation.TermGrace, Shadow: a.Mode == config.ModeShadow,
		Metered: metered}
}

// untilTick is how long from now to the next multiple of iv on the wall
// clock. Every agent's samples fall on the same instants, so that a
// daemon with a thousand agents wakes once per interval for all of them,
// not a thousand times.
func untilTick(now time.Time, iv time.Duration) time.Duration {
	return now.Truncate(iv).Add(iv).Sub(now)
}

// idleSampling is how much less often the tree is measured when no kernel
// check needs it: the samples then only feed `status` and the
// certificate's peak RSS, and a daemon of a thousand agents should not
// pay for a thousand samples a second that decide nothing.
const idleSampling = 10

// sampleInterval is how often the tree is measured. (A live edit that
// adds a kernel check takes the faster rate at the agent's next start.)
func sampleInterval(c config.Checks) time.Duration {
	if c.Memory != nil || c.CPUSpin != nil || c.Procs != nil || c.FDs != nil || c.Denials != nil {
		return c.SampleInterval
	}
	return idleSampling * c.SampleInterval
}
