// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"
	"slices"
	"time"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// restarts is an agent's restart history: the restarts inside the
// crash-loop window, and how many in a row the backoff has doubled for.
type restarts struct {
	at       []time.Time
	failures int
}

// next decides, at now, what follows a run of agent id that lasted ran
// and that the policy restarts: a start after the backoff (exponential
// from backoff, capped at max_backoff, reset by a run of stable_after), or
// — more than max_restarts within window — a crash loop that leaves it
// down, with the reason. It depends on nothing but its arguments.
func (h restarts) next(p config.Restart, id string, ran time.Duration, now time.Time) (restarts, time.Time, string) {
	if p.StableAfter > 0 && ran >= p.StableAfter {
		h.failures = 0
	}
	h.at = slices.DeleteFunc(slices.Clone(h.at), func(t time.Time) bool { return now.Sub(t) > p.Window })
	if p.MaxRestarts > 0 && len(h.at) >= p.MaxRestarts {
		return h, time.Time{}, fmt.Sprintf("crash loop: %d restarts within %s; edit the agent file or `hermeskilld release %s` to try again",
			len(h.at), config.FormatDuration(p.Window), id)
	}
	h.at = append(h.at, now)
	delay := p.Backoff
	for i := 0; i < h.failures && delay < p.MaxBackoff; i++ {
		delay *= 2
	}
	delay = min(delay, p.MaxBackoff)
	h.failures++
	return h, now.Add(delay), ""
}
