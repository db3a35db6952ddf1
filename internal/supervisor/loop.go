package supervisor

import (
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/escalate"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// cmdlineMax truncates command lines in the certificate's process tree.
const cmdlineMax = 512

// loop is the run's owning goroutine: it alone touches the engine, the
// deadline timer and the decision to start the ladder.
func (r *Run) loop() {
	defer close(r.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var sampleC <-chan time.Time
	if iv := sampleInterval(r.a.Checks); iv > 0 {
		t := time.NewTicker(iv)
		defer t.Stop()
		sampleC = t.C
	}
	msgs := r.sock.C()
	mainDone := r.proc.Done()
	var ladder chan escalate.Result
	for {
		r.arm(timer)
		select {
		case m, ok := <-msgs:
			if !ok {
				msgs = nil
				continue
			}
			r.observe(m)
		case <-timer.C:
			// A heartbeat read before the deadline may still be queued:
			// apply what is queued (each at its own receive time) first,
			// so the timer and the heartbeat cannot race.
			msgs = r.drain(msgs)
			r.handle(r.engine.Tick(time.Now()))
		case now := <-sampleC:
			r.handle(r.sample(now))
		case k := <-r.killCh:
			s, _ := r.engine.Manual(k.operator, k.reason, time.Now())
			r.handle([]symptoms.Symptom{s})
			if ladder == nil {
				ladder = r.startLadder(s)
			}
		case a := <-r.reconfCh:
			r.reconfigure(a)
		case ch := <-r.statusCh:
			ch <- r.snapshot(StateOf(ladder != nil))
		case res := <-ladder:
			r.finish(&res)
			return
		case <-mainDone:
			if ladder != nil {
				mainDone = nil // the ladder sees it too and finishes
				continue
			}
			r.finish(nil)
			return
		}
		if ladder == nil {
			ladder = r.act()
		}
	}
}

func (r *Run) observe(m *heartbeat.Received) {
	if m.Msg.Has(heartbeat.FieldDumpSignal) {
		r.dumpPID = m.PID // last words go to whoever announced them
	}
	r.handle(r.engine.Observe(&m.Msg, m.At))
	heartbeat.Free(m)
}

// drain applies every message already queued, without waiting; it
// returns nil once the socket's channel is closed.
//
// It takes only what was queued when it began: under a flood it would
// otherwise never return, and the deadline it runs for would wait.
func (r *Run) drain(msgs <-chan *heartbeat.Received) <-chan *heartbeat.Received {
	for n := len(msgs); msgs != nil && n > 0; n-- {
		select {
		case m, ok := <-msgs:
			if !ok {
				return nil
			}
			r.observe(m)
		default:
			return msgs
		}
	}
	return msgs
}

// idleSampling is how much less often the tree is measured when no kernel
// check needs it: the samples then only feed `status` and the
// certificate's peak RSS, and a daemon of a thousand agents should not
// pay for a thousand samples a second that decide nothing.
const idleSampling = 10

// sampleInterval is how often the tree is measured. (A live edit that
// adds a kernel check takes the faster rate at the agent's next start.)
func sampleInterval(c config.Checks) time.Duration {
	if c.Memory != nil || c.CPUSpin != nil || c.Procs != nil || c.FDs != nil {
		return c.SampleInterval
	}
	return idleSampling * c.SampleInterval
}

// StateOf names the run's state.
func StateOf(stopping bool) string {
	if stopping {
		return StateStopping
	}
	return StateRunning
}

// arm points the single timer at the engine's next deadline. A heartbeat
// that moved the deadline after the timer fired is harmless: Tick
// re-checks against the current one.
func (r *Run) arm(t *time.Timer) {
	at, ok := r.engine.NextDeadline()
	if !ok {
		t.Stop()
		return
	}
	t.Reset(time.Until(at))
}

// handle logs symptoms, reports them, and sends warnings to the agent.
func (r *Run) handle(syms []symptoms.Symptom) {
	for i := range syms {
		s := syms[i]
		fields := []zap.Field{zap.String("check", string(s.Check)), zap.String("observed", s.Observed),
			zap.String("threshold", s.Threshold), zap.String("message", s.Message)}
		if s.Severity == symptoms.Warning {
			r.log.Warn("warning symptom", fields...)
			r.sock.Broadcast(heartbeat.WarningDirective(string(s.Check), s.Message))
		} else {
			r.log.Warn("terminal symptom", fields...)
		}
		r.emit(Event{Type: EventSymptom, Symptom: &s})
		if s.Severity == symptoms.Terminal && s.Check != symptoms.Manual && r.a.Mode == config.ModeShadow {
			// Each check's first would-be kill gets its certificate:
			// a later max_runtime after a tool_loop is what someone
			// tuning thresholds needs to see.
			r.shadowed = true
			r.writeShadow(s)
		}
	}
}

// act starts the ladder once the engine has a terminal symptom (or, in
// shadow mode, records what would have happened).
func (r *Run) act() chan escalate.Result {
	t, ok := r.engine.Terminal()
	if !ok || r.shadowed || r.a.Mode == config.ModeShadow {
		return nil // shadow mode: handle wrote the certificates
	}
	return r.startLadder(t)
}

// startLadder takes the autopsy — before any signal, so it shows the tree
// as it was when the decision fell — and climbs the ladder on its own
// goroutine. The tree stays frozen from the autopsy until the ladder's
// first signal is pending (Plan.Release).
func (r *Run) startLadder(t symptoms.Symptom) chan escalate.Result {
	r.trigger = &t
	r.triggeredAt = t.At
	var thaw func()
	r.autopsy, thaw = r.tree.Snapshot(cmdlineMax, true)
	esc := r.a.Escalation
	st := r.engine.State()
	plan := escalate.Plan{
		DumpWait: esc.DumpWait,
		Directive: func() int {
			return r.sock.Broadcast(heartbeat.StopDirective(string(t.Check), t.Message, esc.CoopGrace))
		},
		CoopSignal: esc.CoopSignal,
		CoopGrace:  esc.CoopGrace,
		TermGrace:  esc.TermGrace,
		Hurry:      r.hurry,
		OnStep:     r.onStep,
		Release:    thaw,
	}
	if sig, pid := dumpSignal(st.DumpSignal), r.dumpPID; sig != 0 && pid > 0 {
		plan.DumpSignal = sig
		plan.Dump = func() error { return r.tree.SignalPID(pid, sig) }
	}
	r.log.Warn("stopping agent", zap.String("check", string(t.Check)), zap.String("reason", t.Message),
		zap.Int("processes", len(r.autopsy)))
	ch := make(chan escalate.Result, 1)
	tree := r.tree
	go func() { ch <- escalate.Run(tree, plan) }()
	return ch
}

func (r *Run) onStep(s escalate.Step) {
	r.log.Info("ladder step", zap.String("step", s.Name), zap.Duration("took", s.Duration), zap.Any("detail", s.Detail))
	r.emit(Event{Type: EventStep, Step: &s, Time: s.At})
}

// dumpSignal turns an announced DUMP_SIGNAL into a signal, refusing the
// ones that cannot be "last words" (they would kill or stop the agent).
func dumpSignal(name string) syscall.Signal {
	if name == "" {
		return 0
	}
	sig, err := config.ParseSignal(name)
	if err != nil || sig == syscall.SIGKILL || sig == syscall.SIGSTOP {
		return 0
	}
	return sig
}

// reconfigure applies a new agent file to the running agent: checks and
// escalation now; identity and how it is started, at the next start.
func (r *Run) reconfigure(a *config.Agent) {
	next := *r.a
	next.Checks, next.Escalation, next.Mode = a.Checks, a.Escalation, a.Mode
	next.Labels, next.AfterKill, next.Restart = a.Labels, a.AfterKill, a.Restart
	r.a = &next
	r.log.Info("configuration applied")
	if r.shadowed && next.Mode != config.ModeShadow {
		r.log.Warn("mode enforce applies from the next start: a check already fired in shadow mode during this run")
	}
	r.handle(r.engine.Reconfigure(r.engineConfig(r.a), time.Now()))
}

// sample measures the tree for the kernel checks.
func (r *Run) sample(now time.Time) []symptoms.Symptom {
	s, ok := r.sampler.take(r.tree, r.a.Checks.FDs != nil, r.a.Checks.CPUSpin != nil, now)
	if !ok {
		return nil
	}
	return r.engine.ObserveSample(s, now)
}

func (r *Run) snapshot(state string) Status {
	log := r.engine.Log()
	if n := len(log); n > 20 {
		log = log[n-20:]
	}
	return Status{
		ID: r.id, State: state, PID: r.proc.PID(), Containment: r.tree.Mode(), Mode: r.a.Mode,
		Started: r.proc.Started(), Agent: r.engine.State(), Symptoms: log, Trigger: r.trigger,
		Sample: r.sampler.last, Heartbeat: r.sock.Stats(), Socket: r.sock.Path(),
	}
}
