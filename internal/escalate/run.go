// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package escalate

import (
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// settle is how long the cooperative stage waits, after the main process
// exited, for the rest of the tree to go with it before SIGTERM is sent to
// the survivors (children exiting along with their parent).
const settle = 50 * time.Millisecond

var waitSteps = map[string]bool{StepCoopWait: true, StepTermWait: true, StepReaped: true, StepReapTimeout: true}

// DefaultReapTimeout bounds the wait after SIGKILL when the plan sets none.
const DefaultReapTimeout = 3 * time.Second

// Run climbs the ladder against t and returns what it did. Every wait is
// bounded by the plan; Run returns once the tree is empty or the bounded
// wait after SIGKILL is over. It cannot be cancelled, only hurried.
func Run(t Target, p Plan) Result {
	if p.ReapTimeout <= 0 {
		p.ReapTimeout = DefaultReapTimeout
	}
	r := &runner{t: t, p: p, res: Result{Reached: StageNone}}
	r.run()
	return r.res
}

type runner struct {
	t          Target
	p          Plan
	res        Result
	mainGone   bool
	mainLogged bool
	examined   bool
	released   bool
	held       bool      // Plan.Hold held the tree
	releasedAt time.Time // when a held tree was let run
}

// examine runs the autopsy (Plan.Examine), once.
func (r *runner) examine() {
	if r.examined {
		return
	}
	r.examined = true
	if r.p.Examine != nil {
		r.p.Examine()
	}
}

// release lets a held tree run again (Plan.Release), once, after the
// autopsy: a held tree's signals reach it only now.
func (r *runner) release() {
	if r.released {
		return
	}
	r.examine()
	r.released = true
	if r.p.Release != nil {
		r.p.Release()
	}
	if r.held {
		r.releasedAt = time.Now()
	}
}

// record appends a step that began at began: an action (a signal sent)
// is stamped when it happened; a wait (coop_wait, term_wait, reaped) when
// it ended — "reaped" is the moment the tree was found empty — and both
// carry how long they took.
func (r *runner) record(name string, began time.Time, detail map[string]any) {
	now := time.Now()
	at := began
	if waitSteps[name] {
		at = now
	}
	s := Step{Name: name, At: at, Duration: now.Sub(began), Detail: detail}
	r.res.Steps = append(r.res.Steps, s)
	if r.p.OnStep != nil {
		r.p.OnStep(s)
	}
}

func (r *runner) hurried() bool {
	select {
	case <-r.p.Hurry:
		return true
	default:
		return false
	}
}

func (r *runner) mainExited() bool {
	if r.mainGone {
		return true
	}
	select {
	case <-r.t.MainExited():
		r.noteMainExit()
		return true
	default:
		return false
	}
}

func (r *runner) noteMainExit() {
	r.mainGone = true
	if !r.mainLogged {
		r.mainLogged = true
		r.record(StepMainExited, time.Now(), nil)
	}
}

func (r *runner) run() {
	defer r.release()
	if r.p.Revoke != nil {
		at := time.Now()
		r.record(StepRevoked, at, r.p.Revoke())
	}
	if r.held = r.p.Hold != nil && r.p.Hold(); !r.held {
		r.examine() // nothing holds the tree: the autopsy comes first
	}
	if r.t.Empty() {
		r.res.Empty = true
		return // already exited: success, nothing to send
	}
	select {
	case <-r.t.MainExited():
		// Gone before the ladder began (survivors of a main process
		// that exited by itself): not a step of this ladder.
		r.mainGone, r.mainLogged = true, true
	default:
	}
	if r.p.Dump != nil && !r.mainExited() && !r.hurried() {
		at := time.Now()
		err := r.p.Dump()
		r.release()
		if err == nil {
			r.waitMain(r.p.DumpWait)
		}
		r.record(StepDumpSignal, at, detail("signal", signalName(r.p.DumpSignal), "error", err))
	}
	if r.cooperative() {
		return
	}
	if r.terminate() {
		return
	}
	r.kill()
}

// cooperative runs stage 1-2; it reports true when the tree emptied.
func (r *runner) cooperative() bool {
	if r.hurried() {
		return false
	}
	asked, acked := false, false
	began := time.Now()
	if r.p.Directive != nil && !r.mainExited() {
		if n := r.p.Directive(); n > 0 {
			asked = true
			acked = r.waitAck()
			var withheld any // the signal the acknowledgement spared the agent
			if acked && r.p.CoopSignal != 0 {
				withheld = signalName(r.p.CoopSignal)
			}
			r.record(StepDirective, began, detail("clients", n, "acknowledged", acked, "withheld", withheld))
		}
	}
	if r.p.CoopSignal != 0 && !acked && !r.mainExited() {
		at := time.Now()
		err := r.t.SignalMain(r.p.CoopSignal)
		r.record(StepCoopSignal, at, detail("signal", signalName(r.p.CoopSignal), "error", err))
		asked = asked || err == nil
	}
	if !asked {
		// Nobody to hear a cooperative request: SIGTERM is the first
		// signal, and a held tree is released after it (terminate).
		return false
	}
	r.release()
	// A stopped main process (SIGSTOP, Ctrl-Z, SIGTTOU) hears neither the
	// signal nor the directive until it runs again: continue it, or the
	// whole grace would be spent on an agent that cannot answer.
	_ = r.t.SignalMain(syscall.SIGCONT)
	r.res.Reached = StageCooperative
	// The grace counts from the directive: waiting for its
	// acknowledgement does not delay SIGTERM. Sent to a held tree, the
	// directive or signal reaches the agent at the release, after the
	// autopsy: the grace counts from then, or the autopsy would take its
	// time out of the agent's.
	at := time.Now()
	if r.releasedAt.After(began) {
		began = r.releasedAt
	}
	deadline := began.Add(r.p.CoopGrace)
	ended := r.waitMain(time.Until(deadline))
	if ended == "main_exited" {
		wait := min(settle, time.Until(deadline))
		if r.waitEmpty(wait) {
			ended = "tree_empty"
		}
	}
	r.record(StepCoopWait, at, detail("ended_by", ended))
	if r.t.Empty() {
		r.res.Empty = true
		return true
	}
	return false
}

// terminate runs stage 3; it reports true when the tree emptied.
func (r *runner) terminate() bool {
	if r.hurried() {
		return false
	}
	r.res.Reached = StageSIGTERM
	at := time.Now()
	n, err := r.t.SignalTree(syscall.SIGTERM)
	r.release()
	// SIGCONT so that stopped processes wake up and can act on SIGTERM.
	_, _ = r.t.SignalTree(syscall.SIGCONT)
	r.record(StepSIGTERM, at, detail("procs", n, "error", err))
	at = time.Now()
	emptied := r.waitEmpty(r.p.TermGrace)
	ended := "grace_elapsed"
	switch {
	case emptied:
		ended = "tree_empty"
	case r.hurried():
		ended = "hurry"
	}
	r.record(StepTermWait, at, detail("ended_by", ended))
	if emptied {
		r.res.Empty = true
	}
	return emptied
}

// kill runs stages 4-5.
func (r *runner) kill() {
	r.res.Reached = StageSIGKILL
	r.examine() // a frozen tree still dies of SIGKILL: the autopsy first
	at := time.Now()
	n, method, err := r.t.KillTree()
	r.release()
	r.record(StepSIGKILL, at, detail("procs", n, "method", method, "error", err))
	at = time.Now()
	if r.waitEmpty(r.p.ReapTimeout) {
		r.res.Empty = true
		r.record(StepReaped, at, nil)
		return
	}
	r.record(StepReapTimeout, at, detail("timeout_ms", r.p.ReapTimeout.Milliseconds()))
}

// waitAck waits up to AckWait for the directive's acknowledgement
// (Plan.Acked), leaving early when the main process exits or on a hurry.
// The tree is let run first: a client held frozen cannot answer.
func (r *runner) waitAck() bool {
	if r.p.Acked == nil || r.p.AckWait <= 0 {
		return false
	}
	r.release()
	_ = r.t.SignalMain(syscall.SIGCONT) // a stopped client cannot answer either
	t := time.NewTimer(r.p.AckWait)
	defer t.Stop()
	select {
	case <-r.p.Acked:
		return true
	case <-r.t.MainExited():
		return false
	case <-t.C:
		return false
	case <-r.p.Hurry:
		return false
	}
}

// waitMain waits up to d for the main process to exit, or a hurry. It
// reports what ended the wait.
func (r *runner) waitMain(d time.Duration) string {
	r.release()
	if r.mainExited() {
		return "main_exited"
	}
	if d <= 0 {
		return "grace_elapsed"
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.t.MainExited():
		r.noteMainExit()
		return "main_exited"
	case <-t.C:
		return "grace_elapsed"
	case <-r.p.Hurry:
		return "hurry"
	}
}

// waitEmpty waits up to d for the tree to be empty; a hurry ends it early
// (but not the bounded wait after SIGKILL, which no hurry can shorten).
func (r *runner) waitEmpty(d time.Duration) bool {
	r.release()
	if r.t.Empty() {
		r.mainExited()
		return true
	}
	if d <= 0 {
		return false
	}
	done, stop := r.t.WaitEmpty()
	defer stop()
	t := time.NewTimer(d)
	defer t.Stop()
	hurry := r.p.Hurry
	if r.res.Reached == StageSIGKILL {
		hurry = nil
	}
	mainC := r.t.MainExited()
	if r.mainGone {
		mainC = nil
	}
	for {
		select {
		case <-done:
			r.mainExited()
			return true
		case <-mainC:
			r.noteMainExit()
			mainC = nil
		case <-t.C:
			return r.t.Empty()
		case <-hurry:
			return false
		}
	}
}

func detail(kv ...any) map[string]any {
	m := make(map[string]any, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i].(string)
		switch v := kv[i+1].(type) {
		case nil:
		case error:
			if v != nil {
				m[k] = v.Error()
			}
		default:
			m[k] = v
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// signalName names sig in the details of a step as the configuration
// writes it (config.SignalName): "SIGINT", "none" for 0, "signal N" for a
// number without a name.
func signalName(sig syscall.Signal) string {
	if sig == 0 {
		return "none"
	}
	if name := unix.SignalName(sig); name != "" && sig <= 31 {
		return name
	}
	return "signal " + strconv.Itoa(int(sig))
}
