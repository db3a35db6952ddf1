// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import "math"

// A stream is cut at the budget: after each event that adds output (text,
// reasoning, a tool call's arguments), its running cost is checked against
// what the budget leaves it (Grant.grow). The output is counted from the
// deltas as they pass (deltaTokens), since the usage arrives only at the
// end; the input is the reservation's estimate until the upstream reports
// its own count (Anthropic's message_start). A stream that crosses is
// ended at once with the protocol's own ending of an answer cut at its
// output bound (streamMeter.ending), which the agent's SDK reads as a
// short answer, and the upstream request is cancelled: its connection is
// closed, and the provider stops generating when it sees that. The stream
// is charged what was counted, its last event included: it passes the
// budget by that event's output at most.

// streamCut is the cut of an exchange's stream at the budget.
type streamCut struct {
	*budgetCut
	usage cutUsage // what it is charged
	model string
}

// limiter is the budget's check of the exchange's stream, for its relay.
type limiter struct {
	x       *exchange
	meter   streamMeter
	checked bool
	counted int64 // the meter's count at the last check
	prev    spend // the running cost at the last check
	prevOut int64 // its output tokens
}

// check is relay.limit: the stream's ending once it crossed the budget.
func (l *limiter) check() []byte {
	rd := l.meter.progress()
	if rd.counted == l.counted || l.x.res == nil {
		return nil
	}
	l.counted = rd.counted
	u := cutUsage{in: l.x.res.in, out: max(rd.counted, rd.out), cached: rd.cached}
	if rd.in > 0 { // the upstream said
		u.in = rd.in
	}
	model := rd.model
	if model == "" {
		model = l.x.rec.Model
	}
	prices := l.x.g.cfg.Prices
	usd, priced := prices.Cost(model, u.in, u.out, u.cached)
	now := spend{tokens: u.in + u.out, usd: usd}
	if !l.checked { // the input was sent and billed before any output
		inUSD, _ := prices.Cost(model, u.in, 0, u.cached)
		l.prev, l.checked = spend{tokens: u.in, usd: inUSD}, true
	}
	c := l.x.gr.grow(l.x.fl, now, l.prev, priced)
	outBefore := l.prevOut
	l.prev, l.prevOut = now, u.out
	if c == nil {
		return nil
	}
	if c.err.budget != "tokens" { // a cost budget: the run's or a pool's
		// The overshoot in output tokens, at the model's output price.
		if pr, ok := prices.Lookup(model); ok && pr.Output > 0 {
			c.over.tokens = min(int64(math.Ceil(c.over.usd*1e6/pr.Output-1e-9)), u.out-outBefore)
		}
	}
	l.x.cut = &streamCut{budgetCut: c, usage: u, model: model}
	l.x.cancel(c.err)
	return l.meter.ending(u)
}

// settleCut fills the record of a stream cut at the budget: charged what
// was counted, marked cut, over the budget, and by how much.
func (x *exchange) settleCut(rd *reading) {
	c := x.cut
	rd.in, rd.out, rd.cached = c.usage.in, c.usage.out, c.usage.cached
	rd.usage, rd.incomplete = true, true
	if rd.model == "" {
		rd.model = c.model
	}
	x.rec.Cut, x.rec.OverBudget, x.rec.Budget, x.rec.Err = true, c.err.budget, c.err.pool, c.err.msg
	x.rec.OvershootTokens, x.rec.OvershootUSD = c.over.tokens, c.over.usd
}
