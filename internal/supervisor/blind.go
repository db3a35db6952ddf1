// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"cmp"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// blindness is what the loop knows of the kernel sampler's failures.
type blindness struct {
	last   *SamplerError // nil until a sample failed; replaced, never changed (a Status holds it)
	logged time.Time     // the last failure logged
	quiet  int           // failures not logged since
	// after is the bound instead of blindBound (tests: seconds are long).
	after time.Duration
}

// sampleFailed records a failed sample at now — fdsOnly: a sample that
// could not count the tree's descriptors, its other figures seen —
// logged (at most once per samplerLogEvery), shown in Status, and fatal
// once blind too long: when the kernel checks have been blind for
// blindBound while one of them has a kill threshold, or the fds check
// alone has while it has one, an enforce-mode run's terminal symptom is
// internal_error (fail closed). A check whose input was read goes on
// judging: a set-user-ID child's fd directory does not blind memory,
// procs or cpu_spin.
func (l *loop) sampleFailed(err error, fdsOnly bool, now time.Time) {
	b := &l.blind
	next := SamplerError{Err: firstError(err), At: now, Failures: 1, FDsBlindSince: now}
	if !fdsOnly {
		next.BlindSince = now
	}
	if p := b.last; p != nil {
		next.Failures = p.Failures + 1
		if !fdsOnly && !p.BlindSince.IsZero() {
			next.BlindSince = p.BlindSince
		}
		if !p.FDsBlindSince.IsZero() {
			next.FDsBlindSince = p.FDsBlindSince
		}
	}
	b.last = &next
	if b.logged.IsZero() || now.Sub(b.logged) >= samplerLogEvery {
		msg, blindFor := "kernel checks cannot sample the agent's processes", now.Sub(next.BlindSince)
		if fdsOnly {
			msg, blindFor = "the fds check cannot count the agent's descriptors; the other kernel checks see", now.Sub(next.FDsBlindSince)
		}
		l.log.Error(msg, zap.String("error", next.Err),
			zap.Duration("blind_for", blindFor), zap.Uint64("failures", next.Failures), zap.Int("not_logged", b.quiet))
		b.logged, b.quiet = now, 0
	} else {
		b.quiet++
	}
	if l.state != StateRunning || l.a.Mode == config.ModeShadow {
		return
	}
	bound := cmp.Or(b.after, blindBound(l.a.Checks))
	var what string
	var blindFor time.Duration
	switch {
	case !next.BlindSince.IsZero() && now.Sub(next.BlindSince) >= bound && killsOnSample(l.a.Checks):
		what, blindFor = "kernel checks", now.Sub(next.BlindSince)
	case now.Sub(next.FDsBlindSince) >= bound && killsOnFDs(l.a.Checks):
		// Blind for the descriptors alone (or for them longer).
		what, blindFor = "fds check", now.Sub(next.FDsBlindSince)
	default:
		return
	}
	s, _ := l.engine.HostStop(symptoms.InternalError, blindFor.String(),
		fmt.Sprintf("%s blind for %s: %s", what, roundBlind(blindFor), next.Err), now)
	l.handle([]symptoms.Symptom{s})
}

// sampleSeen ends a blind stretch: the kernel checks see again, the fds
// check too when fds (the descriptors were counted, or not asked for).
func (l *loop) sampleSeen(fds bool) {
	p := l.blind.last
	if p == nil || p.BlindSince.IsZero() && (!fds || p.FDsBlindSince.IsZero()) {
		return
	}
	next := *p
	if !p.BlindSince.IsZero() {
		l.log.Info("kernel checks sample the agent's processes again", zap.Duration("blind_for", p.At.Sub(p.BlindSince)),
			zap.Uint64("failures", p.Failures))
		next.BlindSince = time.Time{}
	}
	if fds && !p.FDsBlindSince.IsZero() {
		if p.FDsBlindSince.Before(p.BlindSince) || p.BlindSince.IsZero() {
			l.log.Info("the fds check counts the agent's descriptors again", zap.Duration("blind_for", p.At.Sub(p.FDsBlindSince)),
				zap.Uint64("failures", p.Failures))
		}
		next.FDsBlindSince = time.Time{}
	}
	l.blind.last = &next
}

// roundBlind rounds a blind stretch for a person: to the second from ten
// seconds on (the samples fall on whole intervals anyway).
func roundBlind(d time.Duration) time.Duration {
	if d >= 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(10 * time.Millisecond)
}
