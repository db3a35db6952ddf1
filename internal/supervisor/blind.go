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

// sampleFailed records a failed sample at now: logged (at most once per
// samplerLogEvery), shown in Status, and — once the kernel checks have
// been blind for blindBound while one of them has a kill threshold, in
// enforce mode — the run's terminal symptom internal_error: fail closed.
func (l *loop) sampleFailed(err error, now time.Time) {
	b := &l.blind
	next := SamplerError{Err: firstError(err), At: now, Failures: 1, BlindSince: now}
	if p := b.last; p != nil {
		next.Failures = p.Failures + 1
		if !p.BlindSince.IsZero() {
			next.BlindSince = p.BlindSince
		}
	}
	b.last = &next
	blindFor := now.Sub(next.BlindSince)
	if b.logged.IsZero() || now.Sub(b.logged) >= samplerLogEvery {
		l.log.Error("kernel checks cannot sample the agent's processes", zap.String("error", next.Err),
			zap.Duration("blind_for", blindFor), zap.Uint64("failures", next.Failures), zap.Int("not_logged", b.quiet))
		b.logged, b.quiet = now, 0
	} else {
		b.quiet++
	}
	bound := cmp.Or(b.after, blindBound(l.a.Checks))
	if blindFor < bound || l.state != StateRunning || !killsOnSample(l.a.Checks) || l.a.Mode == config.ModeShadow {
		return
	}
	s, _ := l.engine.HostStop(symptoms.InternalError, blindFor.String(),
		fmt.Sprintf("kernel checks blind for %s: %s", roundBlind(blindFor), next.Err), now)
	l.handle([]symptoms.Symptom{s})
}

// sampleSeen ends a blind stretch: the kernel checks see again.
func (l *loop) sampleSeen() {
	p := l.blind.last
	if p == nil || p.BlindSince.IsZero() {
		return
	}
	l.log.Info("kernel checks sample the agent's processes again", zap.Duration("blind_for", p.At.Sub(p.BlindSince)),
		zap.Uint64("failures", p.Failures))
	next := *p
	next.BlindSince = time.Time{}
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
