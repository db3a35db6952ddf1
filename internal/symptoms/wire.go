// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import "time"

// Liveness from the wire (docs/protocol.md). With the gateway on, the
// run's LLM traffic is a heartbeat, so that an agent with no client and
// no sd_notify is supervised by its own loop calling its model:
//
//   - a request sent (RequestSent) and a response ended (ResponseEnded) are
//     heartbeats, and the first request is READY: it ends the startup;
//   - while a request is in flight the heartbeat deadline is held: a long
//     answer, streamed or not, is no silence. The gateway bounds the
//     flight, so a wedged agent is not held for ever: the wait for the
//     response's headers, each silence of its body (the stream idle
//     timeout) and each write to an agent that stopped reading are
//     bounded; an answer that keeps coming is no silence of the agent's
//     (its length is the request's output limit; max_runtime is never
//     held);
//   - for a run that has never sent PROGRESS= itself, each answered request
//     (ResponseEnded's answered) is one step of progress (progress_timeout,
//     steps), and a request in flight holds the progress deadline too: the
//     step is being made. A deadline that passed during the flight is
//     judged when the request ends: an answer resets it, a failure fires
//     it at once. Once the agent reports PROGRESS= itself, its own counter
//     is the only one (from 0), and the wire keeps only the heartbeat.
//
// An agent that does beat keeps every beat of its own: the wire's add to
// them. Nothing here needs a flag of its own: with no gateway, no wire
// event ever comes.

// RequestSent applies one request of the run arriving at the gateway at
// now: a heartbeat (READY if it is the first), a request in flight until
// ResponseEnded, and one for requests_rate. Deadlines are evaluated at now first, as in
// Observe: a request sent after its deadline passed does not rescue the
// agent.
func (e *Engine) RequestSent(now time.Time) []Symptom {
	out := e.Tick(now)
	e.st.WireRequests++
	e.st.InFlight++
	if !e.st.Ready {
		e.st.Ready, e.st.ReadyAt = true, now
	}
	e.beat(now)
	if e.cfg.Metered {
		out = append(out, e.rateRequest(now)...)
	}
	return out
}

// ResponseEnded applies the end of one request that RequestSent applied,
// at now: its response was sent in full or it failed, was refused or cut.
// It is a heartbeat, and answered (the upstream answered it in full with a
// success) is a step of progress while the run has reported none of its
// own. A deadline that the flight held and that passed meanwhile fires
// now.
func (e *Engine) ResponseEnded(answered bool, now time.Time) []Symptom {
	out := e.Tick(now)
	if e.st.InFlight > 0 {
		e.st.InFlight--
	}
	e.beat(now)
	if answered && !e.st.OwnProgress {
		out = append(out, e.progress(e.st.Progress+1, now)...)
	}
	return append(out, e.Tick(now)...)
}

// ownProgress applies the agent's first PROGRESS=: from now on its counter
// is the run's progress, from 0, and answered requests are no steps.
func (e *Engine) ownProgress() {
	if !e.st.OwnProgress {
		e.st.OwnProgress, e.st.Progress = true, 0
	}
}

// inFlight reports whether a request in flight holds the heartbeat deadline.
func (e *Engine) inFlight() bool { return e.st.InFlight > 0 }

// progressHeld reports whether a request in flight holds the progress
// deadline: only while the run is on the wire's progress.
func (e *Engine) progressHeld() bool { return e.inFlight() && !e.st.OwnProgress }
