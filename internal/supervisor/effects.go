// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/escalate"
	"github.com/hermeskill/hermeskilld/internal/fault"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// cmdlineMax truncates command lines in the certificate's process tree.
const cmdlineMax = 512

// ladder acts on the decision to kill for t (loop.kill), the moment it
// falls: the kill's event id is made — the STOP directive carries it, the
// certificate is written under it — and the ladder climbs on a goroutine
// of its own. Its first step revokes the run's LLM handle
// (capabilities_revoked), so that no request of the agent is answered
// while the autopsy is taken. Then the tree is held frozen (Plan.Hold:
// in cgroup mode) and the ladder's first signal goes out at once; the
// autopsy (Plan.Examine) reads the tree while it is still frozen, so it
// shows the tree as it was when the decision fell, and the thaw
// (Plan.Release) follows it, with that signal already pending. A tree
// that cannot be frozen (process-group mode) is read before any signal.
func (r *Run) ladder(t symptoms.Symptom, dump string, dumpPID int) <-chan escalate.Result {
	r.triggeredAt = t.At
	r.killID = certs.NewID()
	esc := r.loop.a.Escalation
	stop := heartbeat.StopDirective(string(t.Check), t.Message, esc.CoopGrace, r.killID)
	ackWait := esc.EffectiveAckWait()
	var held *procsup.Autopsy
	plan := escalate.Plan{
		Revoke: r.revoke(t),
		Hold: func() bool {
			held = r.tree.Hold(true)
			return held.Held()
		},
		Examine: func() {
			r.autopsy = held.Read(cmdlineMax)
			r.log.Warn("stopping agent", zap.String("check", string(t.Check)), zap.String("reason", t.Message),
				zap.String("kill_event_id", r.killID), zap.Int("processes", len(r.autopsy)))
		},
		DumpWait: esc.DumpWait,
		Directive: func() int {
			r.ack.begin(time.Now())
			to := r.sock.BroadcastTo(stop)
			r.ack.sent(to)
			if len(to) > 0 {
				r.awaitAck(ackWait)
			}
			return len(to)
		},
		Acked:      r.ack.done,
		AckWait:    ackWait,
		CoopSignal: esc.CoopSignal,
		CoopGrace:  esc.CoopGrace,
		TermGrace:  esc.TermGrace,
		Hurry:      r.hurry,
		OnStep:     r.onStep,
		Release: func() {
			if held != nil {
				held.Thaw()
			}
		},
	}
	if sig := dumpSignal(dump); sig != 0 && dumpPID > 0 {
		plan.DumpSignal = sig
		plan.Dump = func() error { return r.tree.SignalPID(dumpPID, sig) }
	}
	return r.climb(plan)
}

// revoke is the plan's revocation of what the run may reach, for t: its
// egress proxy (network: allowlist) first, every tunnel closed and every
// new one refused, then its LLM handle: from then on the gateway refuses
// the handle's requests and cuts those in flight. nil with neither.
func (r *Run) revoke(t symptoms.Symptom) func() map[string]any {
	if r.grant == nil && r.net.proxy == nil {
		return nil
	}
	return func() map[string]any {
		d := map[string]any{}
		if p := r.net.proxy; p != nil {
			d["egress_tunnels_cut"] = p.Revoke()
			d["capabilities"] = []string{"egress"}
		}
		if r.grant != nil {
			rv := r.grant.Revoke(string(t.Check), t.Message)
			d["llm_requests_cut"] = rv.InFlight
			if r.net.proxy != nil {
				d["capabilities"] = []string{"egress", "llm"}
			}
		}
		return d
	}
}

// cleanup follows a main process that exited by itself. A death by a
// signal we did not send (the OOM killer, someone's kill -9, a crash) gets
// an autopsy for its certificate; descendants left behind get SIGTERM,
// grace, SIGKILL.
func (r *Run) cleanup() <-chan escalate.Result {
	exit := r.proc.Status()
	thaw := func() {}
	if exit.Signaled {
		r.external, r.triggeredAt = true, r.proc.ExitedAt()
		r.autopsy, thaw = r.tree.Snapshot(cmdlineMax, true)
	}
	if r.tree.Empty() {
		thaw()
		return nil
	}
	left, _ := r.tree.PIDs()
	r.log.Warn("main process exited, stopping what it left behind", zap.Ints("pids", left))
	return r.climb(escalate.Plan{TermGrace: r.loop.a.Escalation.TermGrace, Hurry: r.hurry, OnStep: r.onStep, Release: thaw})
}

// ladderRun is a ladder in flight: done is closed once res is set.
type ladderRun struct {
	done chan struct{}
	res  escalate.Result
}

// climb runs a ladder on its own goroutine; the run waits for it. A panic
// in the ladder ends it with SIGKILL of the whole tree (killNow), and the
// run with internal_error.
func (r *Run) climb(plan escalate.Plan) <-chan escalate.Result {
	ch := make(chan escalate.Result, 1)
	lr := &ladderRun{done: make(chan struct{})}
	r.climbing = lr
	r.stopping.Store(true)
	go func() {
		lr.res = r.climbLadder(plan)
		close(lr.done)
		ch <- lr.res
	}()
	return ch
}

// climbLadder runs the ladder of plan. Should it panic, what it recorded
// so far (with a gateway, the revocation at least) stays the shutdown
// log's beginning, and killNow's SIGKILL follows.
func (r *Run) climbLadder(plan escalate.Plan) (res escalate.Result) {
	var steps []escalate.Step
	onStep := plan.OnStep
	plan.OnStep = func(s escalate.Step) {
		steps = append(steps, s)
		if onStep != nil {
			onStep(s)
		}
	}
	examine := plan.Examine
	plan.Examine = func() {
		if examine != nil {
			examine()
		}
		// A test's panic in the ladder: after the revocation and the
		// autopsy, before the tree is thawed (in cgroup mode its first
		// signal is then pending, else none was sent).
		fault.Inject(fault.Ladder, r.id)
	}
	defer func() {
		if v := recover(); v != nil {
			e := fault.Recovered(fault.Ladder, v)
			r.log.Error("internal error: the ladder panicked; SIGKILL of the tree",
				zap.String("panic", e.Panic), zap.String("stack", e.Stack))
			r.internal.CompareAndSwap(nil, e)
			res = r.killNow(plan.Release)
			res.Steps = append(steps, res.Steps...)
		}
	}()
	return escalate.Run(r.tree, plan)
}

// killNow is what follows a ladder that panicked: SIGKILL of every
// process of the tree (as the keeper would), the tree thawed if the
// autopsy froze it, and a bounded wait for it to be empty.
func (r *Run) killNow(release func()) escalate.Result {
	began := time.Now()
	n, method, err := r.tree.KillTree()
	if release != nil {
		release() // after the SIGKILL: nothing of the tree runs again
	}
	detail := map[string]any{"processes": n, "method": method, "after": "internal_error"}
	if err != nil {
		detail["error"] = err.Error()
	}
	res := escalate.Result{Reached: escalate.StageSIGKILL,
		Steps: []escalate.Step{{Name: escalate.StepSIGKILL, At: began, Duration: time.Since(began), Detail: detail}}}
	done, stop := r.tree.WaitEmpty()
	defer stop()
	t := time.NewTimer(escalate.DefaultReapTimeout)
	defer t.Stop()
	waited := time.Now()
	select {
	case <-done:
		res.Empty = true
		res.Steps = append(res.Steps, escalate.Step{Name: escalate.StepReaped, At: time.Now(), Duration: time.Since(waited)})
	case <-t.C:
		res.Empty = r.tree.Empty()
		res.Steps = append(res.Steps, escalate.Step{Name: escalate.StepReapTimeout, At: time.Now(), Duration: time.Since(waited)})
	}
	return res
}

func (r *Run) onStep(s escalate.Step) {
	r.log.Info("ladder step", zap.String("step", s.Name), zap.Duration("took", s.Duration), zap.Any("detail", s.Detail))
	r.emit(Event{Type: EventStep, Step: &s, Time: s.At})
}

func (r *Run) warn(s symptoms.Symptom) {
	r.sock.Broadcast(heartbeat.WarningDirective(string(s.Check), s.Message))
}

func (r *Run) sample(c config.Checks, now time.Time) (symptoms.Sample, bool, error, error) {
	s, ok, err, fdsErr := r.sampler.take(r.tree, c.FDs != nil, c.CPUSpin != nil, now)
	for _, e := range []error{err, fdsErr} {
		if e != nil {
			countSamplerFailure(e)
		}
	}
	if r.denials != nil && ok {
		s.Denials, s.HaveDenials = r.denials.Count(), true
	}
	return s, ok, err, fdsErr
}

func (r *Run) heartbeats() heartbeat.StatsSnapshot { return r.sock.Stats() }

func (r *Run) readNow() { r.sock.Sync() }

func (r *Run) answered(client string, at time.Time) {
	if r.ack.answer(client, at) {
		r.log.Info("the agent's client acknowledged the stop", zap.String("client", client))
	}
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

func (r *Run) journal(st func() runState) { r.journalUpdate(st) }

func (r *Run) journalNow(st runState) {
	if r.jrnl != nil {
		r.journalWrite(st, time.Now())
	}
}
