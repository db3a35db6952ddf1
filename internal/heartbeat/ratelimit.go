// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat

import "time"

// rateLimiter is a token bucket refilled at rate tokens/s with a burst of
// one second's worth. Used under Socket.screenMu only (see authCache).
type rateLimiter struct {
	rate   float64
	tokens float64
	last   time.Time
}

func newRateLimiter(perSecond int) rateLimiter {
	return rateLimiter{rate: float64(perSecond), tokens: float64(perSecond)}
}

func (r *rateLimiter) allow(now time.Time) bool {
	if r.rate <= 0 {
		return true
	}
	if !r.last.IsZero() {
		r.tokens += now.Sub(r.last).Seconds() * r.rate
		if r.tokens > r.rate {
			r.tokens = r.rate
		}
	}
	r.last = now
	if r.tokens < 1 {
		return false
	}
	r.tokens--
	return true
}
