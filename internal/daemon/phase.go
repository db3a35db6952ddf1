// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"
	"time"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
)

// phase is where a slot is in its life. What holds an agent down from
// outside — the e-stop, a standing revocation, a quarantine — is not a
// phase: it lives in held.json, outlives the slot, and is set and lifted
// by verbs that never go through it (release, lift, release --estop, a
// kill of an agent that is down). The transitions read it as a fact, and
// a held agent keeps its own phase underneath (a crash loop stays failed
// when a quarantine on it is lifted).
type phase uint8

const (
	phaseStarting phase = iota // no run: one starts as soon as nothing holds the agent
	phaseRunning               // a run is live
	phaseBackoff               // no run: the restart policy starts one at retryAt
	phaseExited                // no run: the policy does not restart it, or an operator stopped it
	phaseFailed                // no run: a crash loop or an internal error left it down until released
	phaseStopping              // removed or shut down: its live run is being stopped
	phaseEnded                 // removed or shut down, no run: the slot's goroutine ends
)

var phaseNames = [...]string{"starting", "running", "backoff", "exited", "failed", "stopping", "ended"}

func (p phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", p)
}

// live reports whether the slot has a run in this phase.
func (p phase) live() bool { return p == phaseRunning || p == phaseStopping }

// ending reports whether the slot was removed or shut down.
func (p phase) ending() bool { return p == phaseStopping || p == phaseEnded }

// life is a slot's phase and what its phases carry. Only next changes
// it.
type life struct {
	phase    phase
	restarts restarts  // for the backoff and the crash-loop limit
	retryAt  time.Time // phaseBackoff: when the restart is due
	failed   string    // phaseFailed: why it is left down
	lastExit string    // how the last run ended, or why it did not start
	// phaseStopping, phaseEnded: who ends the slot and why, and whether
	// its file was removed (otherwise the daemon is shutting down).
	endBy, endWhy string
	removed       bool
}

// eventKind is what happened to a slot.
type eventKind uint8

const (
	evWake         eventKind = iota // the slot's goroutine looks again: start, wait, or end
	evStarted                       // a run started (pid)
	evStartFailed                   // a start failed (why, startError)
	evRunEnded                      // the live run ended (out, ran, and how it was being ended)
	evRemoved                       // its file is gone (by, why): stop the run, end
	evShutdown                      // the daemon stops (by, why): stop the run, end
	evReconfigured                  // a new valid agent file
	evReleased                      // release or an operator's start: a crash loop and a backoff are forgotten
	evStopped                       // an operator's stop with no run to stop (by): a pending restart is cancelled
	evPanicked                      // the slot's goroutine panicked (why; out when its run was waited for)
)

var eventNames = [...]string{"wake", "started", "start-failed", "run-ended", "removed", "shutdown",
	"reconfigured", "released", "stopped", "panicked"}

func (k eventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return fmt.Sprintf("event(%d)", k)
}

// event is one thing that happened to a slot, with what the transition
// needs to know of it.
type event struct {
	kind eventKind
	now  time.Time
	pid  int // evStarted
	// evStartFailed: the error; startError: the process could not be
	// made (a *procsup.StartError), which is retried whatever the policy.
	// evPanicked: the reason it is left down.
	why        string
	startError bool
	// evRunEnded, and evPanicked when hadRun: how the run ended.
	out    supervisor.Outcome
	hadRun bool
	ran    time.Duration // evRunEnded: how long the run lasted
	// evRunEnded: a manual kill of the run (an operator's, or a standing
	// revocation's when revoking), and an operator's stop or restart.
	manual   *control.Quarantine
	revoking bool
	stop     *operatorStop
	by       string // evRemoved, evShutdown, evStopped: who
}

// facts is what the transitions read from outside the slot.
type facts struct {
	id    string
	agent *config.Agent // the configuration in force: restart policy, after_kill
	// hold is what holds the agent down from outside: control.StateEstopped,
	// StateInvalid, StateRevoked, StateQuarantined, or "" (holdLocked).
	hold string
}

// actions is what the caller of next does: the slot's goroutine for its
// own events, the verb for an operator's or the daemon's.
type actions struct {
	end   bool          // evWake: the slot's goroutine ends
	start bool          // evWake: start a run now
	wait  time.Duration // evWake, neither: wait for a wake-up, at most this long (0: no bound)
	// kill the live run, for killBy and killWhy.
	kill            bool
	killBy, killWhy string
	quarantine      *control.Quarantine // persist this quarantine
	scheduled       bool                // the restart policy was consulted: a backoff or a crash loop (logged)
	restarting      bool                // evRunEnded: a run starts again at once (its starters wait for it)
	publish         string              // a state to publish as such ("" publishes the slot's derived state)
	note            string              // the note for the event stream
	poke            bool                // wake the slot's goroutine
}

// next is the slot's transition function: from l, after ev, given f, the
// slot's new life and what to do. It depends on nothing but its arguments.
// An event that cannot come in l's phase (the end of a run that is not
// live, a start while one is) changes nothing.
func next(l life, ev event, f facts) (life, actions) {
	var act actions
	switch ev.kind {
	case evStarted, evStartFailed:
		if l.phase.live() {
			return l, act
		}
	case evRunEnded:
		if !l.phase.live() {
			return l, act
		}
	}
	switch ev.kind {
	case evWake:
		switch {
		case l.phase == phaseEnded:
			act.end = true
		case l.phase.live(): // the goroutine waits on the run, not on a wake-up
		case f.hold != "", l.phase == phaseExited, l.phase == phaseFailed:
			// until something changes: a release, a lift, an edit
		case l.phase == phaseBackoff && l.retryAt.After(ev.now):
			act.wait = l.retryAt.Sub(ev.now)
		default:
			l.phase, act.start = phaseStarting, true
		}

	case evStarted:
		if l.phase == phaseEnded {
			// Removed or shut down while it was starting: the stop found
			// no run to stop, so this one is stopped now, or the slot
			// would wait on it for ever.
			l.phase = phaseStopping
			act.kill, act.killBy, act.killWhy = true, l.endBy, l.endWhy
		} else {
			l.phase = phaseRunning
		}
		act.publish, act.note = control.StateRunning, fmt.Sprintf("started, pid %d", ev.pid)

	case evStartFailed:
		l.lastExit = "failed to start: " + ev.why
		act.publish, act.note = "start_failed", l.lastExit
		switch {
		case l.phase.ending():
		case ev.startError || f.agent.Restart.Policy != config.RestartNever:
			l, act.scheduled = l.schedule(f, 0, ev.now), true
		default:
			l.phase = phaseExited
		}

	case evRunEnded:
		l, act = l.runEnded(ev, f)

	case evRemoved, evShutdown:
		l.endBy, l.endWhy = ev.by, ev.why
		l.removed = l.removed || ev.kind == evRemoved
		if l.phase.live() {
			l.phase = phaseStopping
			act.kill, act.killBy, act.killWhy = true, ev.by, ev.why
		} else {
			l.phase = phaseEnded
		}
		act.poke = true

	case evReconfigured:
		if l.phase == phaseExited || l.phase == phaseFailed {
			l.phase, l.failed = phaseStarting, ""
		}
		act.poke = !l.phase.live()

	case evReleased:
		l.restarts, l.retryAt = restarts{}, time.Time{}
		switch l.phase {
		case phaseBackoff, phaseExited, phaseFailed:
			l.phase, l.failed = phaseStarting, ""
		}
		act.poke = true

	case evStopped:
		if l.phase == phaseBackoff {
			l.phase, l.retryAt = phaseExited, time.Time{}
			l.lastExit += "; restart cancelled by " + ev.by
			act.poke = true
		}

	case evPanicked:
		if ev.hadRun {
			l.lastExit = ev.out.Exit.String()
		}
		if l.phase.ending() {
			l.phase = phaseEnded
		} else {
			l.phase, l.failed = phaseFailed, ev.why
		}
	}
	return l, act
}

// runEnded decides what follows a run, first match wins: a slot being
// removed or shut down ends; the e-stop, a standing revocation's kill and
// a quarantine hold it down (from outside); an operator's stop or restart
// goes its own way; a kill quarantines or restarts as after_kill says;
// an exit restarts or not as the restart policy says.
func (l life) runEnded(ev event, f facts) (life, actions) {
	var act actions
	a, out := f.agent, ev.out
	l.lastExit = out.Exit.String()
	act.note = l.lastExit
	switch {
	case l.phase.ending():
		l.phase = phaseEnded
	case f.hold == control.StateEstopped:
		l.phase, act.note = phaseStarting, "stopped by the e-stop"
	case ev.revoking && f.hold == control.StateRevoked:
		l.phase, act.note = phaseStarting, "revoked: "+ev.manual.Reason // the rule keeps it down, not a quarantine
	case ev.stop != nil && ev.manual == nil && ev.stop.endedRun(out):
		l, act = l.afterStop(ev, f)
	case out.Killed && (ev.manual != nil || a.AfterKill == config.AfterKillQuarantine):
		q := control.Quarantine{Reason: quarantineReason(out)}
		if ev.manual != nil {
			q = *ev.manual
		}
		l.phase, act.quarantine, act.note = phaseStarting, &q, "quarantined: "+q.Reason
	case out.Killed, restartsAfter(a, out): // after_kill: restart, or the restart policy
		l, act.scheduled = l.schedule(f, ev.ran, ev.now), true
	default:
		l.phase = phaseExited
	}
	return l, act
}

// afterStop decides what follows a run an operator stopped: for a
// restart, a start at once; otherwise the restart policy, as after any
// exit (a stop is not a crash-loop reset: the history stays).
func (l life) afterStop(ev event, f facts) (life, actions) {
	var act actions
	stop, a := ev.stop, f.agent
	l.lastExit += "; stopped by " + stop.operator
	if stop.reason != "" {
		l.lastExit += ": " + stop.reason
	}
	switch {
	case stop.restart:
		l.phase, l.failed, l.retryAt = phaseStarting, "", time.Time{}
		act.note, act.restarting = "restarting (by "+stop.operator+")", true
	case restartsAfter(a, ev.out):
		l, act.scheduled = l.schedule(f, ev.ran, ev.now), true
		if l.phase == phaseFailed {
			act.note = l.lastExit + "; " + l.failed
		} else {
			act.note = l.lastExit + "; restart policy " + string(a.Restart.Policy) + " restarts it"
		}
	default:
		l.phase, act.note = phaseExited, l.lastExit
	}
	return l, act
}

// restartsAfter reports whether a's restart policy restarts it after out.
func restartsAfter(a *config.Agent, out supervisor.Outcome) bool {
	return a.Restart.Policy == config.RestartAlways ||
		a.Restart.Policy == config.RestartOnFailure && out.Exit.ShellCode() != 0
}

// schedule plans a restart after a run that lasted ran: a backoff, or a
// crash loop that leaves the agent failed (restarts.next decides).
func (l life) schedule(f facts, ran time.Duration, now time.Time) life {
	var failed string
	l.restarts, l.retryAt, failed = l.restarts.next(f.agent.Restart, f.id, ran, now)
	if failed != "" {
		l.phase, l.failed = phaseFailed, failed
	} else {
		l.phase = phaseBackoff
	}
	return l
}

func quarantineReason(out supervisor.Outcome) string {
	if out.Cert == nil {
		return "killed"
	}
	return fmt.Sprintf("killed by %s: %s", out.Cert.TriggerCheck, out.Cert.TriggerReason)
}

// view is what the published state needs besides the slot's life.
type view struct {
	now            time.Time
	run            string   // the live run's own state (supervisor.StateRunning, StateStopping)
	pending        []string // what changes at the next start
	configErr      string   // the file is invalid; the slot keeps its last good configuration
	hold, holdNote string   // what holds it from outside (facts.hold), and why
}

// published is the state the slot shows (ps, status, the event stream)
// and its note: the one place it is derived, from the phase first.
func published(l life, v view) (state, note string) {
	switch {
	case l.phase.live():
		if len(v.pending) > 0 {
			note = "at next start: " + joinComma(v.pending)
		}
		if v.configErr != "" {
			note = "config error (running the last good config): " + v.configErr
		}
		return v.run, note
	case l.phase == phaseEnded && l.removed:
		return control.StateStopping, "agent file removed"
	case l.phase == phaseEnded:
		return control.StateStopping, l.endWhy
	case v.hold != "":
		return v.hold, v.holdNote
	case l.phase == phaseFailed:
		return control.StateFailed, l.failed
	case l.phase == phaseExited:
		return control.StateExited, l.lastExit
	case l.phase == phaseBackoff && l.retryAt.After(v.now):
		return control.StateBackoff, fmt.Sprintf("%s; restarts in %s", l.lastExit, l.retryAt.Sub(v.now).Round(time.Second))
	}
	return control.StateStarting, ""
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
