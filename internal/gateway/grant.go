// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hermeskill/hermeskilld/internal/certs"
)

// Grant is one agent run's access to the gateway: its handle, its
// requests in flight and what they used.
type Grant struct {
	g       *Gateway
	agentID string
	handle  string
	sum     [sha256.Size]byte
	obs     Observer

	// mu is the grant's lock, shared by its slices (one lock for a run
	// and its sub-agents: a slice's request is admitted against both).
	mu *sync.Mutex
	// parent is the grant this one is a slice of (Slice); nil for a run's
	// own. slices are this grant's, in the order they were made.
	parent   *Grant
	slices   []*Grant
	members  func() []int // the run's processes; nil: any connection may use the handle
	revoked  *Revocation  // nil: not revoked
	closed   bool
	inflight map[*flight]struct{}
	budget   Budget
	// pause is set while the grant is paused (Budget.Pause): new requests
	// wait for it to end; nil: not paused.
	pause *pauseState
	// pools are the budgets across runs the run's requests are held and
	// counted in besides its own budget (SetPools; a slice's requests, in
	// its run's), in the order their locks are taken; never changed in
	// place.
	pools []*Pool
	// spent is what the reported requests cost, held the worst case of
	// those admitted and not yet reported: the budget is checked against
	// their sum before a request is forwarded.
	spent, held spend
	holds       int // requests whose worst case is held
	// what its requests used (Metered)
	requests, refused, errors, incomplete, usageUnknown int64
	streamsCut, overshootTokens                         int64
	overshootUSD                                        float64
	models                                              map[string]*certs.ModelUsage
	first, last                                         time.Time
}

// flight is a request of the grant between its admission and its record.
type flight struct {
	cancel context.CancelCauseFunc
	// hold is the request's reservation while it is held against the
	// budget (from its admission until its record is counted); nil: none.
	hold *reservation
	// held is what the budget counts of it meanwhile: its reservation,
	// or a stream's running cost once that is more (grow).
	held spend
	// pools are those its held.usd is held in too: the run's when it was
	// admitted.
	pools []*Pool
}

// Budget is what a grant's requests may cost in all, as the gateway
// meters them. It is a cap, enforced before each request is forwarded:
// the request's worst case (its reservation) must fit in what the spent
// and the held leave, or it is refused — or, with Pause, held. Zero
// fields are no limit.
type Budget struct {
	CostUSD float64
	Tokens  int64
	// Pause: a request that does not fit pauses the grant instead of
	// being refused (Grant.Pause): it and every later request wait, neither
	// refused nor forwarded, until Resume, Revoke or Close.
	Pause bool
}

// pauseState is a paused grant's: the requests that wait, woken when
// done is closed.
type pauseState struct {
	done    chan struct{}
	at      time.Time
	check   string // "cost" or "tokens"; "" when paused by Pause
	reason  string
	waiting []*reservation // the held requests' worst cases, in arrival order; nil for an unmetered one
}

// Pause is a grant's pause, as Paused reports it.
type Pause struct {
	At time.Time
	// Check and Reason say which budget a held request did not fit in
	// ("cost" or "tokens"), and how; empty when the pause was asked for
	// (Grant.Pause) before any request was held.
	Check, Reason string
}

// PauseObserver is told when a request that does not fit in the budget
// paused the grant (Budget.Pause), from the request's goroutine: it must
// not block.
type PauseObserver interface {
	Observer
	Paused(p Pause)
}

// spend is an amount of tokens and money.
type spend struct {
	tokens int64
	usd    float64
}

// budgetSlack absorbs the rounding of summed prices: a request that fits
// to the millionth of a cent is not refused.
const budgetSlack = 1e-9

// cutError is why a request in flight was ended by the gateway.
type cutError struct {
	status int // answered when the response has not started
	code   string
	msg    string
	rev    *Revocation // set for a revocation
	// budget is the budget a request did not fit in: "cost", "tokens",
	// or OverPool (a budget across runs: pool names it).
	budget string
	pool   string
	// slice: that budget is a sub-agent's slice, not its run's (the run
	// is not stopped for it).
	slice bool
}

func (e *cutError) Error() string { return e.msg }

func (e *cutError) problem() problem {
	p := problem{status: e.status, code: e.code, msg: e.msg, noRetry: e.budget != ""}
	if e.rev != nil {
		p.check, p.reason = e.rev.Check, e.rev.Reason
	}
	return p
}

var (
	errShutdown    = &cutError{status: 503, code: "gateway_shutting_down", msg: "hermeskilld's LLM gateway is shutting down"}
	errGrantClosed = &cutError{status: 403, code: "run_ended", msg: "this run's access to the model ended with the run (hermeskilld)"}
)

func revokedError(rev *Revocation) *cutError {
	msg := "hermeskilld revoked this run's access to the model"
	if rev.Check != "" {
		msg += " (check " + rev.Check + ")"
	}
	if rev.Reason != "" {
		msg += ": " + rev.Reason
	}
	return &cutError{status: 403, code: "access_revoked", msg: msg, rev: rev}
}

// SetMembers makes the handle good only on connections from the run's
// processes, as members lists them (the run's tree, when asked). Set it
// once the run's main process is started, before it could send a request.
func (gr *Grant) SetMembers(members func() []int) {
	gr.mu.Lock()
	gr.members = members
	gr.mu.Unlock()
}

func (gr *Grant) membersFunc() func() []int {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	for gr.parent != nil { // a slice is used from the run's tree: its sub-agent's supervise is in it
		gr = gr.parent
	}
	return gr.members
}

// AgentID is the id the grant was made for.
func (gr *Grant) AgentID() string { return gr.agentID }

// Env is the agent's environment for the gateway: for each upstream its
// base URL and, as its API key, the grant's handle. The openai-style
// upstream named "openai" (else the first of that style) is given as
// OPENAI_BASE_URL and OPENAI_API_KEY, the anthropic one likewise as
// ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY; any other upstream NAME as
// HERMESKILL_LLM_<NAME>_BASE_URL and HERMESKILL_LLM_<NAME>_API_KEY (NAME
// upper-cased, '-' as '_'). Entries are "KEY=VALUE", in the order of the
// configured upstreams; then EnvRun, the grant's agent id, and EnvPrices,
// the gateway's price file if it has one (for the gateway of a supervise
// the agent starts: ParentFromEnv).
func (gr *Grant) Env() []string {
	out := make([]string, 0, 2*len(gr.g.env)+2)
	for _, e := range gr.g.env {
		out = append(out, e.baseURL+"="+gr.g.baseURL(e.name), e.key+"="+gr.handle)
	}
	// For a supervise the agent starts (ParentFromEnv).
	out = append(out, EnvRun+"="+gr.agentID)
	if p := gr.g.cfg.PricesFile; p != "" {
		out = append(out, EnvPrices+"="+p)
	}
	return out
}

// Revoke refuses the grant's new requests from now on (403 in the
// provider's error format, with check and reason) and cuts those in
// flight: a stream gets a final error event and ends, a request still
// waiting for its response gets the 403. A request already answered in
// full is not cut, even if its record is still on its way to the
// Observer. Revoke returns when it happened and how many requests it cut;
// a later call changes nothing and returns the first revocation.
func (gr *Grant) Revoke(check, reason string) Revocation {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	if gr.revoked != nil {
		return *gr.revoked
	}
	rev := &Revocation{At: time.Now(), Check: check, Reason: reason, InFlight: len(gr.inflight)}
	gr.revoked = rev
	gr.endPause() // the held requests are refused for the revocation
	cause := revokedError(rev)
	for fl := range gr.inflight {
		fl.cancel(cause)
	}
	for _, s := range gr.slices { // the run's sub-agents lose their access with it
		if s.revoked == nil {
			s.revoked = rev
			s.endPause()
			for fl := range s.inflight {
				fl.cancel(cause)
			}
		}
	}
	return *rev
}

// Close forgets the handle once the run is over: its requests are refused
// and those in flight cut. Metered still answers.
func (gr *Grant) Close() {
	gr.mu.Lock()
	family := append([]*Grant{gr}, gr.slices...)
	gr.mu.Unlock()
	for _, x := range family {
		gr.g.forget(x)
	}
	gr.mu.Lock()
	defer gr.mu.Unlock()
	for _, x := range family {
		if x.closed {
			continue
		}
		x.closed = true
		x.endPause()
		for fl := range x.inflight {
			fl.cancel(errGrantClosed)
		}
	}
}

// SetBudget caps what the grant's requests may cost from now on: a
// lower cap refuses the next request that does not fit, and cuts a stream
// in flight at its next event if it no longer fits; a request waiting for
// a non-streamed answer is not cut for it.
func (gr *Grant) SetBudget(b Budget) {
	gr.mu.Lock()
	gr.budget = b
	gr.mu.Unlock()
}

// SetPools puts the run's requests in pools, the budgets across runs it
// belongs to, from its next request on (those in flight stay held in the
// pools they were admitted in); none: in no pool.
func (gr *Grant) SetPools(pools ...*Pool) {
	sorted := sortPools(pools)
	gr.mu.Lock()
	gr.root().pools = sorted
	gr.mu.Unlock()
}

// admit registers a request about to go upstream, holding its worst case
// res (nil: unmetered) against the budget and the run's pools, or says why it may not go. A
// paused grant admits nothing: wait is then closed when the pause ends
// (the caller asks again, or gives up with unwait); paused is set when
// this request paused it (the caller tells the PauseObserver).
func (gr *Grant) admit(fl *flight, res *reservation) (cut *cutError, wait <-chan struct{}, paused *Pause) {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	switch {
	case gr.revoked != nil:
		return revokedError(gr.revoked), nil, nil
	case gr.closed:
		return errGrantClosed, nil, nil
	case gr.pause != nil:
		gr.pause.waiting = append(gr.pause.waiting, res)
		return nil, gr.pause.done, nil
	}
	if res != nil {
		if e := gr.overBudget(gr.budget, res, spend{}); e != nil {
			e.slice = gr.parent != nil
			if !gr.budget.Pause {
				return e, nil, nil
			}
			gr.pause = &pauseState{done: make(chan struct{}), at: time.Now(), check: e.budget, reason: e.msg,
				waiting: []*reservation{res}}
			return nil, gr.pause.done, &Pause{At: gr.pause.at, Check: e.budget, Reason: e.msg}
		}
		if p := gr.parent; p != nil {
			// What the slice has reserved in its run pays for it first.
			if e := p.overBudget(p.budget, res, gr.credit(res)); e != nil {
				return e, nil, nil
			}
		}
		var pools []*Pool
		if res.priced {
			pools = gr.root().pools
		}
		lockPools(pools)
		for _, p := range pools {
			if e := p.overLocked(res); e != nil {
				unlockPools(pools)
				return e, nil, nil
			}
		}
		for _, p := range pools {
			p.holdLocked(res.usd)
		}
		unlockPools(pools)
		fl.hold, fl.held, fl.pools = res, spend{tokens: res.in + res.out, usd: res.usd}, pools
		for x := gr; x != nil; x = x.parent { // a slice's request is held in its run too
			x.holds++
			x.held.tokens += fl.held.tokens
			x.held.usd += fl.held.usd
		}
	}
	gr.inflight[fl] = struct{}{}
	return nil, nil, nil
}

// unwait forgets a held request whose agent gave up waiting (its
// connection closed) while the grant was paused, so that Resume does not
// ask room for it.
func (gr *Grant) unwait(res *reservation, wait <-chan struct{}) {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	p := gr.pause
	if p == nil || p.done != wait {
		return // that pause ended: nothing to forget
	}
	if i := slices.Index(p.waiting, res); i >= 0 {
		p.waiting = slices.Delete(p.waiting, i, i+1)
	}
}

// Pause holds the grant's new requests from now on: each waits, neither
// refused nor forwarded, until Resume (then it is admitted against the
// new budget), Revoke or Close (then it is refused). Requests in flight
// go on. Pausing a paused grant changes nothing.
func (gr *Grant) Pause() {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	if gr.pause == nil && gr.revoked == nil && !gr.closed {
		gr.pause = &pauseState{done: make(chan struct{}), at: time.Now()}
	}
}

// Paused reports the grant's pause, if it is paused.
func (gr *Grant) Paused() (Pause, bool) {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	if gr.pause == nil {
		return Pause{}, false
	}
	return Pause{At: gr.pause.at, Check: gr.pause.check, Reason: gr.pause.reason}, true
}

// ResumeError is Resume's refusal: the new budget does not admit the
// first held request beside what is spent and held.
type ResumeError struct {
	Check   string  // "cost" or "tokens"
	Need    float64 // the least budget that admits it: USD, or tokens
	Request string  // the held request's worst case, in words
}

func (e *ResumeError) Error() string {
	if e.Check == "tokens" {
		return fmt.Sprintf("the first held request (%s) would not fit: the tokens budget must be at least %.0f", e.Request, e.Need)
	}
	return fmt.Sprintf("the first held request (%s) would not fit: the cost budget must be at least $%.4f", e.Request, e.Need)
}

// ErrNotPaused is Resume's error for a grant that is not paused.
var ErrNotPaused = errors.New("not paused")

// Resume ends the grant's pause with budget b: the held requests go on,
// each admitted against b as any request is. It refuses (a *ResumeError,
// nothing changed) a budget that does not admit the first held request,
// which would pause the grant again at once; ErrNotPaused when it is not
// paused.
func (gr *Grant) Resume(b Budget) error {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	p := gr.pause
	if p == nil {
		return ErrNotPaused
	}
	for _, res := range p.waiting {
		if res == nil {
			continue
		}
		if e := gr.overBudget(b, res, spend{}); e != nil {
			re := &ResumeError{Check: e.budget}
			if e.budget == "tokens" {
				re.Need = float64(gr.spent.tokens + gr.held.tokens + res.in + res.out)
				re.Request = fmt.Sprintf("%d tokens at most", res.in+res.out)
			} else {
				re.Need = gr.spent.usd + gr.held.usd + res.usd
				re.Request = fmt.Sprintf("$%.4f at most", res.usd)
			}
			return re
		}
		break // the first one fits; those after it are admitted in turn, or pause the grant again
	}
	gr.budget = b
	gr.endPause()
	return nil
}

// endPause wakes the held requests. gr.mu is held.
func (gr *Grant) endPause() {
	if gr.pause != nil {
		close(gr.pause.done)
		gr.pause = nil
	}
}

// overBudget is the refusal of a request whose worst case res does not fit
// in what the budget leaves, or nil. gr.mu is held.
//
// A request that names no output bound is reserved a default, a guess of
// its worst case: it is refused when it does not fit beside requests in
// flight, but alone, while the budget is not spent, it goes (as it would
// to a threshold checked after the fact): refusing every such request as
// soon as a default no longer fits would end runs that had budget left.
// Its overshoot is at most its own cost; a request with a bound has none.
func (gr *Grant) overBudget(b Budget, res *reservation, credit spend) *cutError {
	alone := !res.bounded && gr.holds == 0
	out := gr.outstanding()
	if b.CostUSD > 0 && res.priced {
		used := gr.spent.usd + gr.held.usd + out.usd - credit.usd
		if used+res.usd > b.CostUSD+budgetSlack && !(alone && used < b.CostUSD) {
			return &cutError{status: http.StatusTooManyRequests, code: "insufficient_quota", budget: "cost",
				msg: fmt.Sprintf("hermeskilld: this request's worst case, $%.4f (%d input tokens estimated, %d output at most), "+
					"does not fit in the run's budget: $%.4f of $%.4f spent or held by requests in flight", res.usd, res.in, res.out, used, b.CostUSD)}
		}
	}
	if b.Tokens > 0 {
		used := gr.spent.tokens + gr.held.tokens + out.tokens - credit.tokens
		if used+res.in+res.out > b.Tokens && !(alone && used < b.Tokens) {
			return &cutError{status: http.StatusTooManyRequests, code: "insufficient_quota", budget: "tokens",
				msg: fmt.Sprintf("hermeskilld: this request's worst case, %d tokens (%d input estimated, %d output at most), "+
					"does not fit in the run's budget: %d of %d tokens spent or held by requests in flight", res.in+res.out, res.in, res.out, used, b.Tokens)}
		}
	}
	return nil
}

// budgetCut is a stream cut at the budget: the cut and its overshoot,
// what the stream cost past what the budget left it.
type budgetCut struct {
	err  *cutError
	over spend
}

// grow counts a stream's running cost, now (priced: now.usd is its
// cost), against the budget, prev being what it was at the last check: a
// stream of fl that no longer fits in what the spent and the other
// requests' holds leave is cut; else fl holds the larger of its
// reservation and now, so that the other streams see what it costs. A
// cut stream holds now until its record is counted.
//
// The pools fl is held in are checked likewise, after the run's budget.
//
// The overshoot of a cut is what now passes the budget, and at most
// what the stream's last event added (now - prev): a stream is checked
// after each of its events.
func (gr *Grant) grow(fl *flight, now, prev spend, priced bool) *budgetCut {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	if fl.hold == nil {
		return nil
	}
	lockPools(fl.pools)
	defer unlockPools(fl.pools)
	b := gr.budget
	var c *budgetCut
	if left := b.CostUSD - (gr.spent.usd + gr.held.usd - fl.held.usd); b.CostUSD > 0 && priced && now.usd > left+budgetSlack {
		c = &budgetCut{err: &cutError{code: "budget_reached", budget: "cost",
			msg: fmt.Sprintf("hermeskilld cut the stream at the run's budget: it had cost $%.4f where $%.4f of $%.4f was left", now.usd, max(left, 0), b.CostUSD)},
			over: spend{usd: now.usd - max(left, prev.usd)}}
	} else if left := b.Tokens - (gr.spent.tokens + gr.held.tokens - fl.held.tokens); b.Tokens > 0 && now.tokens > left {
		c = &budgetCut{err: &cutError{code: "budget_reached", budget: "tokens",
			msg: fmt.Sprintf("hermeskilld cut the stream at the run's budget: it had used %d tokens where %d of %d were left", now.tokens, max(left, 0), b.Tokens)},
			over: spend{tokens: now.tokens - max(left, prev.tokens)}}
	}
	for _, p := range fl.pools {
		if c != nil || !priced {
			break
		}
		c = p.cutLocked(now, prev, fl.held.usd)
	}
	grown := fl.held
	if c != nil {
		grown = now
	} else {
		grown.tokens, grown.usd = max(grown.tokens, now.tokens), max(grown.usd, now.usd)
	}
	for x := gr; x != nil; x = x.parent { // a slice's stream is held in its run too
		x.held.tokens += grown.tokens - fl.held.tokens
		x.held.usd += grown.usd - fl.held.usd
	}
	for _, p := range fl.pools {
		p.held += grown.usd - fl.held.usd
	}
	fl.held = grown
	return c
}

// landed takes fl out of flight: its response is complete. Its worst case
// stays held until its record is counted (report), so that no request is
// admitted in between against a budget that counts it nowhere.
func (gr *Grant) landed(fl *flight) {
	gr.mu.Lock()
	delete(gr.inflight, fl)
	gr.mu.Unlock()
}

// release lets go of fl's hold when its record was never counted (its
// handling panicked); once reported, it does nothing.
func (gr *Grant) release(fl *flight) {
	gr.mu.Lock()
	gr.unhold(fl)
	gr.mu.Unlock()
}

// unhold lets go of fl's hold. gr.mu is held.
func (gr *Grant) unhold(fl *flight) { gr.settle(fl, 0) }

// settle lets go of fl's hold (fl nil: none) and charges usd, what its
// record cost, to the run's pools, in one step for each pool: no request
// is admitted in between against a pool that counts it nowhere. gr.mu is
// held.
func (gr *Grant) settle(fl *flight, usd float64) {
	var held, charged []*Pool
	if fl != nil && fl.hold != nil {
		held = fl.pools
	}
	if usd > 0 {
		charged = gr.root().pools
	}
	if len(held)+len(charged) > 0 {
		pools := sortPools(append(slices.Clone(held), charged...))
		lockPools(pools)
		for _, p := range held {
			p.unholdLocked(fl.held.usd)
		}
		for _, p := range charged {
			p.spent += usd
		}
		unlockPools(pools)
	}
	if fl == nil || fl.hold == nil {
		return
	}
	for x := gr; x != nil; x = x.parent {
		x.held.tokens -= fl.held.tokens
		x.held.usd -= fl.held.usd
		if x.holds--; x.holds == 0 { // no sum of floats drifts while nothing is held
			x.held = spend{}
		}
	}
	fl.hold, fl.held, fl.pools = nil, spend{}, nil
}

// arrived tells a TrafficObserver that a request arrived at.
func (gr *Grant) arrived(at time.Time) {
	if to, ok := gr.root().obs.(TrafficObserver); ok {
		to.Arrived(at)
	}
}

// gone tells a TrafficObserver that a request that arrived ended at
// without a record.
func (gr *Grant) gone(at time.Time) {
	if to, ok := gr.root().obs.(TrafficObserver); ok {
		to.Gone(at)
	}
}

// report counts rec (of fl, nil for a refusal: its hold gives way to what
// it cost, at once), then tells the observer.
func (gr *Grant) report(rec Record, fl *flight) {
	gr.mu.Lock()
	var cost float64
	if !rec.Refused {
		cost = rec.CostUSD
	}
	gr.settle(fl, cost)
	if p := gr.parent; p != nil {
		// A slice's request is its run's too: counted in both, told to
		// the run's observer (its budgets count its sub-agents).
		gr.countLocked(rec)
		rec.Child = gr.agentID
		p.countLocked(rec)
		gr.mu.Unlock()
		if p.obs != nil {
			p.obs.Request(rec)
		}
		return
	}
	gr.countLocked(rec)
	gr.mu.Unlock()
	if gr.obs != nil {
		gr.obs.Request(rec)
	}
}

// countLocked counts rec in the grant's figures (gr.mu held).
func (gr *Grant) countLocked(rec Record) {
	if !rec.Refused {
		gr.spent.tokens += rec.Tokens()
		gr.spent.usd += rec.CostUSD
	}
	if gr.first.IsZero() {
		gr.first = rec.At
	}
	gr.last = rec.At
	switch {
	case rec.Refused:
		gr.refused++
	default:
		gr.requests++
		if !rec.Cut && (rec.Status >= 400 || rec.Err != "") {
			gr.errors++
		}
		if rec.Incomplete {
			gr.incomplete++
		}
		if rec.UsageUnknown {
			gr.usageUnknown++
		}
		if rec.OverBudget != "" {
			gr.streamsCut++
			gr.overshootTokens += rec.OvershootTokens
			gr.overshootUSD += rec.OvershootUSD
		}
		if rec.Model != "" || rec.Tokens() > 0 {
			m := gr.models[rec.Model]
			if m == nil {
				m = &certs.ModelUsage{Model: rec.Model, Priced: true}
				gr.models[rec.Model] = m
			}
			m.Requests++
			m.InputTokens += rec.InputTokens
			m.OutputTokens += rec.OutputTokens
			m.CachedInputTokens += rec.CachedInputTokens
			m.CostUSD += rec.CostUSD
			if rec.Tokens() > 0 && !rec.Priced {
				m.Priced = false
			}
			if rec.UsageUnknown {
				m.UsageUnknown++
			}
		}
	}
}

// Metered is a snapshot of what the grant's requests used so far.
func (gr *Grant) Metered() Metered {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	return gr.meteredLocked()
}

func (gr *Grant) meteredLocked() Metered {
	m := Metered{Incomplete: gr.incomplete, InFlight: len(gr.inflight), Metered: certs.Metered{Requests: gr.requests, Refused: gr.refused, Errors: gr.errors,
		UsageUnknown: gr.usageUnknown, StreamsCut: gr.streamsCut, OvershootTokens: gr.overshootTokens, OvershootUSD: gr.overshootUSD,
		CostKnown: gr.usageUnknown == 0, FirstRequestAt: gr.first, LastRequestAt: gr.last,
		Models: make([]certs.ModelUsage, 0, len(gr.models))}}
	if gr.revoked != nil {
		m.RevokedAt = gr.revoked.At
	}
	if gr.pause != nil {
		m.Held = len(gr.pause.waiting)
	}
	for _, mu := range gr.models {
		m.Models = append(m.Models, *mu)
		m.Tokens += mu.InputTokens + mu.OutputTokens
		m.CostUSD += mu.CostUSD
		m.CostKnown = m.CostKnown && mu.Priced
	}
	sort.Slice(m.Models, func(i, j int) bool { return m.Models[i].Model < m.Models[j].Model })
	for _, s := range gr.slices {
		sm := s.meteredLocked()
		m.Children = append(m.Children, certs.ChildRun{Run: s.agentID, Requests: sm.Requests, Tokens: sm.Tokens, CostUSD: sm.CostUSD})
	}
	return m
}
