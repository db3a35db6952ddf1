// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
)

// Pool is a budget in USD shared by the grants of several runs: one of
// the daemon's budgets across runs, in its current window. Like a grant's
// own Budget it is a cap enforced before each request is forwarded: a
// request of a grant in the pool (Grant.SetPools) goes only if its worst
// case fits in what the pool's limit leaves once its spent and what the
// requests in flight of all its grants hold are counted, and a stream is
// cut when its running cost no longer fits. Its spent grows with each
// record of its grants; the owner of the budget sets it from its own book
// when a window starts (SetSpent) and keeps it in step (CatchUp).
//
// Locks: a grant's lock is taken before a pool's, and a grant's pools in
// the order they were made (NewPool): never a pool's lock, then a grant's.
type Pool struct {
	name string
	seq  uint64 // the order of the locks

	mu     sync.Mutex
	limit  float64 // 0: none
	window string  // how the refusals name the window: "today"
	spent  float64 // what the window's records cost
	held   float64 // the worst cases of the grants' requests in flight
	holds  int     // those requests
}

var poolSeq atomic.Uint64

// NewPool makes the pool of the budget name, with no limit yet.
func NewPool(name string) *Pool {
	return &Pool{name: name, seq: poolSeq.Add(1)}
}

// Name is the budget's name.
func (p *Pool) Name() string { return p.name }

// SetLimit caps what the pool's requests may cost in its window, USD (0:
// no cap, as for a budget an operator lifted); window is how a refusal
// names the window ("today", "this month"). A lower cap refuses the next
// request that does not fit and cuts a stream in flight at its next event.
func (p *Pool) SetLimit(usd float64, window string) {
	p.mu.Lock()
	p.limit, p.window = usd, window
	p.mu.Unlock()
}

// SetSpent says what the window spent so far, usd: a new window's
// (rolled over), or the book's when the pool is made.
func (p *Pool) SetSpent(usd float64) {
	p.mu.Lock()
	p.spent = usd
	p.mu.Unlock()
}

// CatchUp raises the pool's spent to usd when the owner's book counts
// more (spend the gateway did not meter, or metered before the pool was
// made); a book that counts less is behind the gateway's records and
// changes nothing.
func (p *Pool) CatchUp(usd float64) {
	p.mu.Lock()
	p.spent = max(p.spent, usd)
	p.mu.Unlock()
}

// Use is what the pool counts now: spent in the window and held by the
// requests in flight, USD.
func (p *Pool) Use() (spent, held float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.spent, p.held
}

// sortPools orders pools as their locks are taken, without duplicates.
func sortPools(pools []*Pool) []*Pool {
	out := slices.DeleteFunc(slices.Clone(pools), func(p *Pool) bool { return p == nil })
	slices.SortFunc(out, func(a, b *Pool) int { return cmp.Compare(a.seq, b.seq) })
	return slices.Compact(out)
}

// lockPools locks pools, sorted (sortPools); unlockPools unlocks them.
func lockPools(pools []*Pool) {
	for _, p := range pools {
		p.mu.Lock()
	}
}

func unlockPools(pools []*Pool) {
	for _, p := range pools {
		p.mu.Unlock()
	}
}

// overLocked is the refusal of a request whose worst case res does not
// fit in what the pool leaves, or nil (p.mu held). As for a grant's own
// budget (Grant.overBudget), a request that names no output bound goes
// alone while the window is not spent.
func (p *Pool) overLocked(res *reservation) *cutError {
	if p.limit <= 0 || !res.priced {
		return nil
	}
	used := p.spent + p.held
	alone := !res.bounded && p.holds == 0
	if used+res.usd <= p.limit+budgetSlack || (alone && used < p.limit) {
		return nil
	}
	return &cutError{status: http.StatusTooManyRequests, code: "insufficient_quota", budget: OverPool, pool: p.name,
		msg: fmt.Sprintf("hermeskilld: this request's worst case, $%.4f (%d input tokens estimated, %d output at most), "+
			"does not fit in budget %s: %s of %s spent or held %s", res.usd, res.in, res.out, p.name, dollars(used), dollars(p.limit), p.window)}
}

// cutLocked is the cut of a stream whose running cost is now (now.usd,
// priced) where it held held of the pool, prev being its cost at the last
// check, or nil when it still fits (p.mu held).
func (p *Pool) cutLocked(now, prev spend, held float64) *budgetCut {
	if p.limit <= 0 {
		return nil
	}
	left := p.limit - (p.spent + p.held - held)
	if now.usd <= left+budgetSlack {
		return nil
	}
	return &budgetCut{err: &cutError{code: "budget_reached", budget: OverPool, pool: p.name,
		msg: fmt.Sprintf("hermeskilld cut the stream at budget %s: it had cost $%.4f where $%.4f of %s was left %s",
			p.name, now.usd, max(left, 0), dollars(p.limit), p.window)},
		over: spend{usd: now.usd - max(left, prev.usd)}}
}

// holdLocked adds usd held by one more request (p.mu held).
func (p *Pool) holdLocked(usd float64) {
	p.holds++
	p.held += usd
}

// unholdLocked lets go of usd held by one request (p.mu held).
func (p *Pool) unholdLocked(usd float64) {
	p.held -= usd
	if p.holds--; p.holds == 0 { // no sum of floats drifts while nothing is held
		p.held = 0
	}
}

// dollars formats a budget's amount with cents, or with more digits for
// amounts under a cent.
func dollars(v float64) string {
	if v > 0 && v < 0.01 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}
