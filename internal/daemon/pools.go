// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"strings"
	"sync"
	"time"

	"github.com/hermeskill/hermeskilld/internal/budgets"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/gateway"
)

// pools make the budgets across runs caps at the gateway: one
// gateway.Pool per budget, its limit the budget's kill amount (none once
// lifted), its spent the book's for the window. The gateway counts each
// record in the pools at once, and the book is charged from the same
// records a moment later (meterBudgets); at each of its passes the pool
// is raised to the book when the book counts more, and set to it when a
// window starts. A request of a run that does not fit in a pool is
// refused (a stream is cut), and the budget trips (Book.Trip): the book
// stays the truth, and crosses kill only by what the gateway cannot
// bound, a request with no output bound sent alone.
type pools struct {
	mu   sync.Mutex
	m    map[string]*pooled // by budget name
	key  string             // the budgets' names and selectors at the last sync
	full map[string]bool    // budgets a request did not fit in, to trip
}

// pooled is one budget's pool.
type pooled struct {
	def   config.Budget
	pool  *gateway.Pool
	start time.Time // of the window the pool counts
}

// syncPools brings the pools in step with the book at now: one per
// budget, each with its limit, its window's spend. It reports whether the
// budgets or their selectors changed (the runs' pools must be set again:
// setRunPools).
func (d *Daemon) syncPools() bool {
	list := d.budgets.List(d.now())
	p := &d.pools
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]*pooled{}
	}
	var key strings.Builder
	seen := make(map[string]bool, len(list))
	for _, st := range list {
		seen[st.Name] = true
		key.WriteString(st.Name + "\x00" + st.Selector + "\x00")
		e := p.m[st.Name]
		if e == nil {
			e = &pooled{pool: gateway.NewPool(st.Name)}
			p.m[st.Name] = e
		}
		e.def = st.Budget
		if !e.start.Equal(st.Start) {
			e.pool.SetSpent(st.SpentUSD)
			e.start = st.Start
		} else {
			e.pool.CatchUp(st.SpentUSD)
		}
		limit := st.Kill
		if st.State == budgets.StateLifted {
			limit = 0
		}
		e.pool.SetLimit(limit, budgets.Window(st.Per))
	}
	for name := range p.m {
		if !seen[name] {
			delete(p.m, name)
		}
	}
	changed := key.String() != p.key
	p.key = key.String()
	return changed
}

// poolsFor are the pools of the budgets agent a belongs to; none in
// shadow mode, whose requests nothing refuses (its spend still reaches
// the pools through the book).
func (d *Daemon) poolsFor(a *config.Agent) []*gateway.Pool {
	if a == nil || a.Mode == config.ModeShadow {
		return nil
	}
	d.pools.mu.Lock()
	defer d.pools.mu.Unlock()
	var out []*gateway.Pool
	for _, e := range d.pools.m {
		if e.def.Sel.Matches(a.Labels) {
			out = append(out, e.pool)
		}
	}
	return out
}

// setRunPools gives every live run the pools of the budgets it belongs
// to now.
func (d *Daemon) setRunPools() {
	for _, s := range d.runningSlots() {
		s.mu.Lock()
		r, a := s.run, s.cfg
		s.mu.Unlock()
		if r != nil {
			r.SetPools(d.poolsFor(a)...)
		}
	}
}

// noteFull has the budget name tripped at the next pass of meterBudgets:
// a request of one of its runs did not fit in what it had left.
func (d *Daemon) noteFull(name string) {
	d.pools.mu.Lock()
	if d.pools.full == nil {
		d.pools.full = map[string]bool{}
	}
	d.pools.full[name] = true
	d.pools.mu.Unlock()
	d.kickBudgets()
}

// tripFull trips the budgets a request did not fit in (noteFull), and
// acts on it as on a crossing of kill.
func (d *Daemon) tripFull() {
	d.pools.mu.Lock()
	full := d.pools.full
	d.pools.full = nil
	d.pools.mu.Unlock()
	for name := range full {
		if c, ok := d.budgets.Trip(name, d.now()); ok {
			d.crossed(c)
		}
	}
}
