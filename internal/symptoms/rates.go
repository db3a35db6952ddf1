// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"fmt"
	"time"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// The rate checks (cost_rate, requests_rate, tokens_rate) count what was
// added in the last `per`: a loop that spends $0.10 a call dies within its
// window, long before the run's total budget is reached. With the gateway
// (Config.Metered) they count what it metered: each request's arrival
// (requests_rate) and each response's tokens and cost; without it, what
// the agent reports: the increase of each TOKENS= and COST_USD=, and one
// usage report for each datagram that raised either (a client reports its
// usage once per LLM call).
//
// A rate only rises when something is added, so it is judged then, and
// at a Reconfigure: no deadline is armed for it.

// rateBuckets is how many steps a window is kept in. What was added is
// summed per step of per/rateBuckets: memory is fixed whatever the rate
// of events, and an event counts for between per*(59/60) and per after it
// happened — never longer, so "in the last 1m" is always true.
const rateBuckets = 60

// window is a sliding window over per-event amounts, as a ring of
// rateBuckets sums. Bucket n covers [origin + n*width, origin +
// (n+1)*width); the window is the newest bucket (head) and the
// rateBuckets-1 before it. The zero value is off.
type window struct {
	per, width time.Duration
	origin     time.Time
	head       int64
	sums       [rateBuckets]float64
	// total is the sum of sums: added to by add, summed again when
	// buckets are emptied (so that no rounding error accumulates).
	total float64
}

// bucket is the number of the bucket that holds instant t; an instant
// before the origin is in the first.
func (w *window) bucket(t time.Time) int64 {
	return int64(max(t.Sub(w.origin), 0) / w.width)
}

// advance moves the head to bucket n, emptying the buckets it passes.
func (w *window) advance(n int64) {
	if n <= w.head {
		return
	}
	for i := max(w.head+1, n-rateBuckets+1); i <= n; i++ {
		w.sums[i%rateBuckets] = 0
	}
	w.head = n
	w.total = 0
	for _, v := range w.sums {
		w.total += v
	}
}

// add adds v at now and returns the window's sum. An amount stamped
// before the window (a clock that went back) counts in its oldest bucket.
func (w *window) add(v float64, now time.Time) float64 {
	n := w.bucket(now)
	w.advance(n)
	n = max(n, w.head-rateBuckets+1)
	w.sums[n%rateBuckets] += v
	w.total += v
	return w.total
}

// at moves the window to now and returns its sum.
func (w *window) at(now time.Time) float64 {
	w.advance(w.bucket(now))
	return w.total
}

// resize gives the window a new per (0: off), keeping what it holds: each
// old bucket goes into the new bucket of its start, so an amount is never
// counted for longer than the new per after it happened (a longer window
// counts it for at most the old one).
func (w *window) resize(per time.Duration, origin, now time.Time) {
	if per == w.per {
		return
	}
	old := *w
	*w = window{}
	if per <= 0 {
		return
	}
	w.per, w.width, w.origin = per, max(per/rateBuckets, 1), origin
	w.advance(w.bucket(now))
	if old.per == 0 {
		return
	}
	old.advance(old.bucket(now))
	for i := max(old.head-rateBuckets+1, 0); i <= old.head; i++ {
		v := old.sums[i%rateBuckets]
		if v == 0 {
			continue
		}
		if n := w.bucket(old.origin.Add(time.Duration(i) * old.width)); n > w.head-rateBuckets {
			w.sums[n%rateBuckets] += v
			w.total += v
		}
	}
}

// rates are the three windows of an engine.
type rates struct {
	cost, requests, tokens window
}

// resize applies the rate checks of c.
func (r *rates) resize(c config.Checks, origin, now time.Time) {
	var costPer, requestsPer, tokensPer time.Duration
	if c.CostRate != nil {
		costPer = c.CostRate.Per
	}
	if c.RequestsRate != nil {
		requestsPer = c.RequestsRate.Per
	}
	if c.TokensRate != nil {
		tokensPer = c.TokensRate.Per
	}
	r.cost.resize(costPer, origin, now)
	r.requests.resize(requestsPer, origin, now)
	r.tokens.resize(tokensPer, origin, now)
}

// rateSpent adds what one event spent to the cost and tokens rates.
func (e *Engine) rateSpent(tokens uint64, costUSD float64, now time.Time) []Symptom {
	var out []Symptom
	if l := e.cfg.CostRate; l != nil {
		v := e.rates.cost.add(costUSD, now)
		out = append(out, e.rate(CostRate, v, l.Warn, l.Kill, l.Per, now)...)
	}
	if l := e.cfg.TokensRate; l != nil {
		v := e.rates.tokens.add(float64(tokens), now)
		out = append(out, e.rate(TokensRate, v, float64(l.Warn), float64(l.Kill), l.Per, now)...)
	}
	return out
}

// rateRequest adds one request (with the gateway) or usage report
// (without) to requests_rate.
func (e *Engine) rateRequest(now time.Time) []Symptom {
	l := e.cfg.RequestsRate
	if l == nil {
		return nil
	}
	v := e.rates.requests.add(1, now)
	return e.rate(RequestsRate, v, float64(l.Warn), float64(l.Kill), l.Per, now)
}

// ratesNow judges the rates as the windows hold them at now (after
// Reconfigure: new thresholds apply at once).
func (e *Engine) ratesNow(now time.Time) []Symptom {
	var out []Symptom
	if l := e.cfg.CostRate; l != nil {
		out = append(out, e.rate(CostRate, e.rates.cost.at(now), l.Warn, l.Kill, l.Per, now)...)
	}
	if l := e.cfg.RequestsRate; l != nil {
		out = append(out, e.rate(RequestsRate, e.rates.requests.at(now), float64(l.Warn), float64(l.Kill), l.Per, now)...)
	}
	if l := e.cfg.TokensRate; l != nil {
		out = append(out, e.rate(TokensRate, e.rates.tokens.at(now), float64(l.Warn), float64(l.Kill), l.Per, now)...)
	}
	return out
}

// rate compares what a window holds, v, with its thresholds: the symptom
// fires when v goes over one.
func (e *Engine) rate(c Check, v, warn, kill float64, per time.Duration, now time.Time) []Symptom {
	switch {
	case kill > 0 && v > kill:
		return e.fire(e.rateSymptom(c, Terminal, v, kill, per, now))
	case warn > 0 && v > warn:
		return e.warn(e.rateSymptom(c, Warning, v, warn, per, now))
	}
	return nil
}

// rateSymptom says it: "spent $0.52 in the last 1m, over the $0.50 per
// minute limit".
func (e *Engine) rateSymptom(c Check, sev Severity, v, limit float64, per time.Duration, now time.Time) Symptom {
	var observed, threshold, spent string
	switch c {
	case CostRate:
		observed, threshold = usd(v), usd(limit)
		spent = "spent " + observed
	case TokensRate:
		observed, threshold = count(int64(v)), count(int64(limit))
		spent = observed + " tokens"
	default:
		observed, threshold = count(int64(v)), count(int64(limit))
		spent = observed + " requests"
		if !e.cfg.Metered {
			spent = observed + " usage reports"
		}
	}
	what := "limit"
	if sev == Warning {
		what = "warning threshold"
	}
	w := config.FormatDuration(per)
	return Symptom{At: now, Check: c, Severity: sev, Observed: observed + " in " + w, Threshold: threshold + " per " + w,
		Message: fmt.Sprintf("%s in the last %s, over the %s %s %s", spent, w, threshold, perText(per), what)}
}

// perText names a window: "per minute", "per 5m".
func perText(per time.Duration) string {
	switch per {
	case time.Second:
		return "per second"
	case time.Minute:
		return "per minute"
	case time.Hour:
		return "per hour"
	case 24 * time.Hour:
		return "per day"
	}
	return "per " + config.FormatDuration(per)
}
