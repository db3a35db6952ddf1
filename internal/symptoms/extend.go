// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"fmt"
	"time"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// EXTEND_TIMEOUT_USEC=N is the agent saying "I am busy: do not expect me for
// N µs" (sd_notify(3)). It applies to the deadline of the agent's phase:
//
//   - before READY or the first heartbeat: the startup deadline;
//   - running: the heartbeat deadline (until the next heartbeat, which ends
//     the extension: the deadline is then that heartbeat + the timeout);
//   - after STOPPING=1: the stop deadline.
//
// The deadline becomes at least now+N, never earlier than it was. Extensions
// in a row may push it at most max_extension beyond where it would be
// without them: start + startup_timeout, last heartbeat + heartbeat timeout,
// STOPPING + stop timeout. So an agent that sends EXTEND_TIMEOUT_USEC in a
// loop instead of beating dies max_extension late, not never; max_runtime
// and progress_timeout are never extended.

// phase names the deadline an extension received now applies to.
type phase struct {
	check      Check
	unextended time.Time  // the deadline without extensions
	extend     *time.Time // the latest instant asked for
	from       string     // what the unextended deadline counts from, for messages
}

// phase returns the deadline an EXTEND_TIMEOUT_USEC applies to now; ok is
// false when the phase has no deadline armed (its timeout is off).
func (e *Engine) phase() (p phase, ok bool) {
	switch {
	case e.st.Stopping:
		t := e.cfg.StopTimeout
		return phase{StopTimeout, e.stoppingAt.Add(t), &e.stopExtend, "STOPPING + stop timeout"}, t > 0
	case !e.beatSeen:
		t := e.cfg.StartupTimeout
		return phase{StartupTimeout, e.st.Started.Add(t), &e.startupExtend, "start + startup timeout"}, t > 0
	default:
		t := e.st.HeartbeatTimeout
		return phase{HeartbeatTimeout, e.st.LastHeartbeat.Add(t), &e.heartbeatExtend, "last heartbeat + heartbeat timeout"}, t > 0
	}
}

// extend applies EXTEND_TIMEOUT_USEC=N received at now. An extension past
// the cap is clamped (by deadlines) and is a warning, once per deadline.
func (e *Engine) extend(n time.Duration, now time.Time) []Symptom {
	p, armed := e.phase()
	until := now.Add(n)
	*p.extend = later(*p.extend, until)
	if !armed {
		return nil
	}
	limit := e.maxExtension()
	if !until.After(p.unextended.Add(limit)) {
		return nil
	}
	return e.warn(Symptom{At: now, Check: p.check, Severity: Warning,
		Observed: n.String(), Threshold: limit.String(),
		Message: fmt.Sprintf("EXTEND_TIMEOUT_USEC asked for %s; clamped to max_extension %s past %s", n, limit, p.from)})
}

// extended is a deadline that would be at unextended, extended to ext but
// not beyond unextended + max_extension.
func (e *Engine) extended(unextended, ext time.Time) time.Time {
	if !ext.After(unextended) {
		return unextended
	}
	if limit := unextended.Add(e.maxExtension()); ext.After(limit) {
		return limit
	}
	return ext
}

// maxExtension is the configured cap; 0 (unset) means the default, as in
// config.Agent.Normalize: an extension is never unbounded.
func (e *Engine) maxExtension() time.Duration {
	if d := e.cfg.MaxExtension; d > 0 {
		return d
	}
	return config.DefaultMaxExtension
}
