// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

var (
	tNow = time.Unix(1_000_000, 0)

	exit0   = supervisor.Outcome{Exit: procsup.ExitStatus{Code: 0}}
	exit1   = supervisor.Outcome{Exit: procsup.ExitStatus{Code: 1}}
	sigkill = procsup.ExitStatus{Signaled: true, Signal: 9}
	// killedByCheck is a run the ladder killed for a check.
	killedByCheck = supervisor.Outcome{Killed: true, Exit: sigkill,
		Trigger: &symptoms.Symptom{Check: symptoms.HeartbeatTimeout},
		Cert:    &certs.Certificate{TriggerCheck: "heartbeat_timeout", TriggerReason: "no heartbeat for 30s"}}
	// killedByHand is a run the ladder killed for an operator.
	killedByHand = supervisor.Outcome{Killed: true, Exit: sigkill, Trigger: &symptoms.Symptom{Check: symptoms.Manual}}

	// crashLoop is a restart history one restart short of nothing: three
	// restarts within the window of max_restarts 3.
	crashLoop = restarts{at: []time.Time{tNow.Add(-3 * time.Minute), tNow.Add(-2 * time.Minute), tNow.Add(-time.Minute)}, failures: 3}
	// oneRestart is the history after a first restart at tNow.
	oneRestart = restarts{at: []time.Time{tNow}, failures: 1}
	crashMsg   = "crash loop: 3 restarts within 10m; edit the agent file or `hermeskilld release bot` to try again"
)

// agentWith is an agent with a restart policy (backoff 1s, at most 3
// restarts within 10m) and an after_kill.
func agentWith(p config.RestartPolicy, ak config.AfterKill) *config.Agent {
	return &config.Agent{ID: "bot", AfterKill: ak, Restart: config.Restart{Policy: p, Backoff: time.Second,
		MaxBackoff: time.Minute, MaxRestarts: 3, Window: 10 * time.Minute}}
}

func factsOf(a *config.Agent, hold string) facts { return facts{id: "bot", agent: a, hold: hold} }

// TestNext is the slot's transition function, phase by event: the life
// it leaves and what the slot then does, exactly.
func TestNext(t *testing.T) {
	never := factsOf(agentWith(config.RestartNever, config.AfterKillQuarantine), "")
	onFailure := factsOf(agentWith(config.RestartOnFailure, config.AfterKillQuarantine), "")
	always := factsOf(agentWith(config.RestartAlways, config.AfterKillQuarantine), "")
	killRestarts := factsOf(agentWith(config.RestartNever, config.AfterKillRestart), "")
	held := func(f facts, hold string) facts { f.hold = hold; return f }
	manual := &control.Quarantine{Reason: "looping", Operator: "uid:0"}
	stop := &operatorStop{operator: "uid:0", reason: "maintenance"}
	restart := &operatorStop{operator: "uid:0", restart: true}

	in := func(p phase) life { return life{phase: p} }
	backoffUntil := func(at time.Time) life { return life{phase: phaseBackoff, retryAt: at, lastExit: "exited with code 1"} }
	removing := life{phase: phaseStopping, removed: true, endBy: "config-removed", endWhy: "agent file bot.yaml removed"}
	removedMidStart := life{phase: phaseEnded, removed: true, endBy: "config-removed", endWhy: "agent file bot.yaml removed"}

	for _, c := range []struct {
		name string
		from life
		ev   event
		f    facts
		want life
		act  actions
	}{
		// wake: the loop starts a run, waits, or ends.
		{"starting wakes: start", in(phaseStarting), event{kind: evWake}, never, in(phaseStarting), actions{start: true}},
		{"starting but quarantined: wait", in(phaseStarting), event{kind: evWake}, held(never, control.StateQuarantined), in(phaseStarting), actions{}},
		{"starting but e-stopped: wait", in(phaseStarting), event{kind: evWake}, held(never, control.StateEstopped), in(phaseStarting), actions{}},
		{"backoff not due: wait for it", backoffUntil(tNow.Add(3 * time.Second)), event{kind: evWake}, always,
			backoffUntil(tNow.Add(3 * time.Second)), actions{wait: 3 * time.Second}},
		{"backoff due: start", backoffUntil(tNow), event{kind: evWake}, always,
			life{phase: phaseStarting, retryAt: tNow, lastExit: "exited with code 1"}, actions{start: true}},
		{"backoff held: wait, no timer", backoffUntil(tNow.Add(time.Second)), event{kind: evWake}, held(always, control.StateRevoked),
			backoffUntil(tNow.Add(time.Second)), actions{}},
		{"exited: wait", in(phaseExited), event{kind: evWake}, always, in(phaseExited), actions{}},
		{"failed: wait", in(phaseFailed), event{kind: evWake}, always, in(phaseFailed), actions{}},
		{"ended: the loop ends", removedMidStart, event{kind: evWake}, always, removedMidStart, actions{end: true}},

		// A run started.
		{"started", in(phaseStarting), event{kind: evStarted, pid: 42}, never, in(phaseRunning),
			actions{publish: control.StateRunning, note: "started, pid 42"}},
		{"started after a removal: killed at once", removedMidStart, event{kind: evStarted, pid: 42}, never, removing,
			actions{kill: true, killBy: "config-removed", killWhy: "agent file bot.yaml removed", publish: control.StateRunning, note: "started, pid 42"}},

		// A start failed.
		{"start failed, policy never: exited", in(phaseStarting), event{kind: evStartFailed, why: "no user x"}, never,
			life{phase: phaseExited, lastExit: "failed to start: no user x"}, actions{publish: "start_failed", note: "failed to start: no user x"}},
		{"start failed to make the process: retried whatever the policy", in(phaseStarting),
			event{kind: evStartFailed, why: "fork: EAGAIN", startError: true}, never,
			life{phase: phaseBackoff, restarts: oneRestart, retryAt: tNow.Add(time.Second), lastExit: "failed to start: fork: EAGAIN"},
			actions{scheduled: true, publish: "start_failed", note: "failed to start: fork: EAGAIN"}},
		{"start failed, policy on-failure: backoff", in(phaseStarting), event{kind: evStartFailed, why: "x"}, onFailure,
			life{phase: phaseBackoff, restarts: oneRestart, retryAt: tNow.Add(time.Second), lastExit: "failed to start: x"},
			actions{scheduled: true, publish: "start_failed", note: "failed to start: x"}},
		{"start failed in a crash loop: failed", life{phase: phaseStarting, restarts: crashLoop}, event{kind: evStartFailed, why: "x"}, always,
			life{phase: phaseFailed, restarts: crashLoop, failed: crashMsg, lastExit: "failed to start: x"},
			actions{scheduled: true, publish: "start_failed", note: "failed to start: x"}},
		{"start failed after a removal: ends", removedMidStart, event{kind: evStartFailed, why: "x"}, always,
			life{phase: phaseEnded, removed: true, endBy: "config-removed", endWhy: "agent file bot.yaml removed", lastExit: "failed to start: x"},
			actions{publish: "start_failed", note: "failed to start: x"}},

		// The run ended: the precedence of what follows.
		{"ended while removed: the slot ends", removing, event{kind: evRunEnded, out: killedByHand}, always,
			life{phase: phaseEnded, removed: true, endBy: "config-removed", endWhy: "agent file bot.yaml removed", lastExit: "killed by SIGKILL"},
			actions{note: "killed by SIGKILL"}},
		{"e-stop: held, no quarantine", in(phaseRunning), event{kind: evRunEnded, out: killedByHand, manual: manual},
			held(always, control.StateEstopped), life{phase: phaseStarting, lastExit: "killed by SIGKILL"}, actions{note: "stopped by the e-stop"}},
		{"revocation's kill: the rule holds it, no quarantine", in(phaseRunning),
			event{kind: evRunEnded, out: killedByHand, manual: manual, revoking: true}, held(always, control.StateRevoked),
			life{phase: phaseStarting, lastExit: "killed by SIGKILL"}, actions{note: "revoked: looping"}},
		{"revocation's kill, rule lifted meanwhile: quarantined", in(phaseRunning),
			event{kind: evRunEnded, out: killedByHand, manual: manual, revoking: true}, always,
			life{phase: phaseStarting, lastExit: "killed by SIGKILL"}, actions{quarantine: manual, note: "quarantined: looping"}},
		{"stop, policy never: exited", in(phaseRunning), event{kind: evRunEnded, out: killedByHand, stop: stop}, never,
			life{phase: phaseExited, lastExit: "killed by SIGKILL; stopped by uid:0: maintenance"},
			actions{note: "killed by SIGKILL; stopped by uid:0: maintenance"}},
		{"stop, policy always: backoff", in(phaseRunning), event{kind: evRunEnded, out: killedByHand, stop: stop, ran: time.Minute}, always,
			life{phase: phaseBackoff, restarts: oneRestart, retryAt: tNow.Add(time.Second), lastExit: "killed by SIGKILL; stopped by uid:0: maintenance"},
			actions{scheduled: true, note: "killed by SIGKILL; stopped by uid:0: maintenance; restart policy always restarts it"}},
		{"stop in a crash loop: failed", life{phase: phaseRunning, restarts: crashLoop}, event{kind: evRunEnded, out: killedByHand, stop: stop}, always,
			life{phase: phaseFailed, restarts: crashLoop, failed: crashMsg, lastExit: "killed by SIGKILL; stopped by uid:0: maintenance"},
			actions{scheduled: true, note: "killed by SIGKILL; stopped by uid:0: maintenance; " + crashMsg}},
		{"stop of a clean exit, policy on-failure: exited", in(phaseRunning), event{kind: evRunEnded, out: exit0, stop: stop}, onFailure,
			life{phase: phaseExited, lastExit: "exited with code 0; stopped by uid:0: maintenance"},
			actions{note: "exited with code 0; stopped by uid:0: maintenance"}},
		{"restart: at once, whatever the policy and history", life{phase: phaseRunning, restarts: crashLoop},
			event{kind: evRunEnded, out: killedByHand, stop: restart}, never,
			life{phase: phaseStarting, restarts: crashLoop, lastExit: "killed by SIGKILL; stopped by uid:0"},
			actions{restarting: true, note: "restarting (by uid:0)"}},
		{"stop of a run dying of a check: the check's quarantine", in(phaseRunning),
			event{kind: evRunEnded, out: killedByCheck, stop: stop}, always,
			life{phase: phaseStarting, lastExit: "killed by SIGKILL"},
			actions{quarantine: &control.Quarantine{Reason: "killed by heartbeat_timeout: no heartbeat for 30s"},
				note: "quarantined: killed by heartbeat_timeout: no heartbeat for 30s"}},
		{"stop and a manual kill: the kill's quarantine", in(phaseRunning),
			event{kind: evRunEnded, out: killedByHand, stop: stop, manual: manual}, always,
			life{phase: phaseStarting, lastExit: "killed by SIGKILL"}, actions{quarantine: manual, note: "quarantined: looping"}},
		{"killed by a check, after_kill quarantine", in(phaseRunning), event{kind: evRunEnded, out: supervisor.Outcome{Killed: true, Exit: sigkill}}, always,
			life{phase: phaseStarting, lastExit: "killed by SIGKILL"},
			actions{quarantine: &control.Quarantine{Reason: "killed"}, note: "quarantined: killed"}},
		{"manual kill, after_kill restart: quarantined all the same", in(phaseRunning),
			event{kind: evRunEnded, out: killedByHand, manual: manual}, killRestarts,
			life{phase: phaseStarting, lastExit: "killed by SIGKILL"}, actions{quarantine: manual, note: "quarantined: looping"}},
		{"killed by a check, after_kill restart: backoff", in(phaseRunning), event{kind: evRunEnded, out: killedByCheck}, killRestarts,
			life{phase: phaseBackoff, restarts: oneRestart, retryAt: tNow.Add(time.Second), lastExit: "killed by SIGKILL"},
			actions{scheduled: true, note: "killed by SIGKILL"}},
		{"clean exit, policy always: backoff", in(phaseRunning), event{kind: evRunEnded, out: exit0}, always,
			life{phase: phaseBackoff, restarts: oneRestart, retryAt: tNow.Add(time.Second), lastExit: "exited with code 0"},
			actions{scheduled: true, note: "exited with code 0"}},
		{"failure, policy on-failure: backoff", in(phaseRunning), event{kind: evRunEnded, out: exit1}, onFailure,
			life{phase: phaseBackoff, restarts: oneRestart, retryAt: tNow.Add(time.Second), lastExit: "exited with code 1"},
			actions{scheduled: true, note: "exited with code 1"}},
		{"failure in a crash loop: failed", life{phase: phaseRunning, restarts: crashLoop}, event{kind: evRunEnded, out: exit1}, onFailure,
			life{phase: phaseFailed, restarts: crashLoop, failed: crashMsg, lastExit: "exited with code 1"},
			actions{scheduled: true, note: "exited with code 1"}},
		{"clean exit, policy on-failure: exited", in(phaseRunning), event{kind: evRunEnded, out: exit0}, onFailure,
			life{phase: phaseExited, lastExit: "exited with code 0"}, actions{note: "exited with code 0"}},
		{"failure, policy never: exited", in(phaseRunning), event{kind: evRunEnded, out: exit1}, never,
			life{phase: phaseExited, lastExit: "exited with code 1"}, actions{note: "exited with code 1"}},

		// Removal and shutdown.
		{"removed while running: the run is stopped", in(phaseRunning),
			event{kind: evRemoved, by: "config-removed", why: "agent file bot.yaml removed"}, never, removing,
			actions{kill: true, killBy: "config-removed", killWhy: "agent file bot.yaml removed", poke: true}},
		{"removed while starting: ends (the start is stopped when it comes)", in(phaseStarting),
			event{kind: evRemoved, by: "config-removed", why: "agent file bot.yaml removed"}, never, removedMidStart, actions{poke: true}},
		{"shutdown in a backoff: ends", backoffUntil(tNow.Add(time.Minute)), event{kind: evShutdown, by: "daemon-shutdown", why: "bye"}, always,
			life{phase: phaseEnded, retryAt: tNow.Add(time.Minute), lastExit: "exited with code 1", endBy: "daemon-shutdown", endWhy: "bye"},
			actions{poke: true}},
		{"shutdown of a removed slot: still removed", removedMidStart, event{kind: evShutdown, by: "daemon-shutdown", why: "bye"}, always,
			life{phase: phaseEnded, removed: true, endBy: "daemon-shutdown", endWhy: "bye"}, actions{poke: true}},
		{"removed again while stopping: killed again", removing, event{kind: evRemoved, by: "config-removed", why: "again"}, always,
			life{phase: phaseStopping, removed: true, endBy: "config-removed", endWhy: "again"},
			actions{kill: true, killBy: "config-removed", killWhy: "again", poke: true}},

		// An edit: a down agent starts again, a backoff goes on.
		{"edit of an exited agent: starts", in(phaseExited), event{kind: evReconfigured}, never, in(phaseStarting), actions{poke: true}},
		{"edit of a failed agent: starts", life{phase: phaseFailed, failed: crashMsg, restarts: crashLoop}, event{kind: evReconfigured}, always,
			life{phase: phaseStarting, restarts: crashLoop}, actions{poke: true}},
		{"edit in a backoff: the backoff goes on", backoffUntil(tNow.Add(time.Second)), event{kind: evReconfigured}, always,
			backoffUntil(tNow.Add(time.Second)), actions{poke: true}},
		{"edit of a running agent: the run takes it", in(phaseRunning), event{kind: evReconfigured}, always, in(phaseRunning), actions{}},
		{"edit of an ended slot: still ended", removedMidStart, event{kind: evReconfigured}, always, removedMidStart, actions{poke: true}},

		// Release, or an operator's start.
		{"release of a crash loop: starts, history forgotten", life{phase: phaseFailed, failed: crashMsg, restarts: crashLoop},
			event{kind: evReleased}, always, in(phaseStarting), actions{poke: true}},
		{"release in a backoff: starts now", backoffUntil(tNow.Add(time.Minute)), event{kind: evReleased}, always,
			life{phase: phaseStarting, lastExit: "exited with code 1"}, actions{poke: true}},
		{"release of an exited agent: starts", in(phaseExited), event{kind: evReleased}, never, in(phaseStarting), actions{poke: true}},
		{"release of a running agent: its history is forgotten", life{phase: phaseRunning, restarts: crashLoop}, event{kind: evReleased}, always,
			in(phaseRunning), actions{poke: true}},
		{"release of an ended slot: still ended", removedMidStart, event{kind: evReleased}, always, removedMidStart, actions{poke: true}},

		// An operator's stop with no run.
		{"stop in a backoff: the restart is cancelled", backoffUntil(tNow.Add(time.Minute)), event{kind: evStopped, by: "uid:0"}, always,
			life{phase: phaseExited, lastExit: "exited with code 1; restart cancelled by uid:0"}, actions{poke: true}},
		{"stop of an exited agent: nothing", in(phaseExited), event{kind: evStopped, by: "uid:0"}, always, in(phaseExited), actions{}},

		// A panic in the slot's goroutine.
		{"panic with a run: failed", in(phaseRunning), event{kind: evPanicked, why: "internal error", out: killedByCheck, hadRun: true}, always,
			life{phase: phaseFailed, failed: "internal error", lastExit: "killed by SIGKILL"}, actions{}},
		{"panic while starting: failed", in(phaseStarting), event{kind: evPanicked, why: "internal error"}, always,
			life{phase: phaseFailed, failed: "internal error"}, actions{}},
		{"panic while removed: ends", removing, event{kind: evPanicked, why: "internal error"}, always,
			life{phase: phaseEnded, removed: true, endBy: "config-removed", endWhy: "agent file bot.yaml removed"}, actions{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.ev.now = tNow
			got, act := next(c.from, c.ev, c.f)
			require.Equal(t, c.want, got)
			require.Equal(t, c.act, act)
		})
	}
}

// TestNextInvariants runs every event from every phase: a run is live
// only after it started and until it ended; removal and shutdown are for
// good; the loop starts a run only when woken, kills only a live run, and
// ends only an ended slot.
func TestNextInvariants(t *testing.T) {
	f := factsOf(agentWith(config.RestartOnFailure, config.AfterKillQuarantine), "")
	for p := phaseStarting; p <= phaseEnded; p++ {
		for k := evWake; k <= evPanicked; k++ {
			for _, out := range []supervisor.Outcome{exit0, exit1, killedByCheck} {
				from := life{phase: p, retryAt: tNow.Add(-time.Second)}
				got, act := next(from, event{kind: k, now: tNow, out: out, by: "x", why: "y"}, f)
				name := fmt.Sprintf("%s on %s (%s)", k, p, out.Exit)
				live := p.live() && k != evRunEnded && k != evPanicked || k == evStarted
				require.Equal(t, live, got.phase.live(), name)
				require.False(t, p.ending() && !got.phase.ending(), "%s: an ending slot stays ending", name)
				require.False(t, act.start && k != evWake, name)
				require.False(t, act.kill && got.phase != phaseStopping, "%s: only a live run is killed", name)
				require.Equal(t, act.end, k == evWake && got.phase == phaseEnded, name)
			}
		}
	}
}

// TestPublished is the state the control API shows, from the phase and
// the holds, first match wins.
func TestPublished(t *testing.T) {
	removed := life{phase: phaseEnded, removed: true, endWhy: "agent file bot.yaml removed"}
	for _, c := range []struct {
		name        string
		l           life
		v           view
		state, note string
	}{
		{"running", life{phase: phaseRunning}, view{run: supervisor.StateRunning}, control.StateRunning, ""},
		{"running, changes pending", life{phase: phaseRunning}, view{run: supervisor.StateRunning, pending: []string{"command", "env"}},
			control.StateRunning, "at next start: command, env"},
		{"running, file broken", life{phase: phaseRunning}, view{run: supervisor.StateRunning, pending: []string{"command"}, configErr: "bad"},
			control.StateRunning, "config error (running the last good config): bad"},
		{"stopping: the run says so", life{phase: phaseStopping, removed: true}, view{run: supervisor.StateStopping},
			control.StateStopping, ""},
		{"removed", removed, view{hold: control.StateEstopped}, control.StateStopping, "agent file removed"},
		{"shutting down", life{phase: phaseEnded, endWhy: "hermeskilld is shutting down"}, view{}, control.StateStopping,
			"hermeskilld is shutting down"},
		{"a hold over a crash loop", life{phase: phaseFailed, failed: crashMsg}, view{hold: control.StateQuarantined, holdNote: "looping"},
			control.StateQuarantined, "looping"},
		{"a hold over a backoff", life{phase: phaseBackoff, retryAt: tNow.Add(time.Minute)},
			view{now: tNow, hold: control.StateRevoked, holdNote: "rule r1: x"}, control.StateRevoked, "rule r1: x"},
		{"failed", life{phase: phaseFailed, failed: crashMsg}, view{}, control.StateFailed, crashMsg},
		{"exited", life{phase: phaseExited, lastExit: "exited with code 0"}, view{}, control.StateExited, "exited with code 0"},
		{"backoff", life{phase: phaseBackoff, retryAt: tNow.Add(1500 * time.Millisecond), lastExit: "exited with code 1"}, view{now: tNow},
			control.StateBackoff, "exited with code 1; restarts in 2s"},
		{"backoff due", life{phase: phaseBackoff, retryAt: tNow, lastExit: "exited with code 1"}, view{now: tNow}, control.StateStarting, ""},
		{"starting", life{phase: phaseStarting}, view{}, control.StateStarting, ""},
		{"starting, held", life{phase: phaseStarting}, view{hold: control.StateEstopped, holdNote: "drill"}, control.StateEstopped, "drill"},
	} {
		t.Run(c.name, func(t *testing.T) {
			state, note := published(c.l, c.v)
			require.Equal(t, c.state, state)
			require.Equal(t, c.note, note)
		})
	}
}
