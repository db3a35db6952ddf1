// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package denials

import (
	"maps"
	"sync"
	"time"
)

// Denial is one refused access.
type Denial struct {
	// Blockers is what refused it, as the kernel names it: fs.write_file,
	// fs.make_reg, fs.remove_file, …, scope.signal.
	Blockers string `json:"blockers"`
	// Target is the path, or the process signalled ("pid 42 (hermeskilld)").
	Target string `json:"target,omitempty"`
	PID    int    `json:"pid,omitempty"`
	serial uint64 // the audit event's
}

// Summary is what a counter counted.
type Summary struct {
	Count     int            `json:"count"`
	ByBlocker map[string]int `json:"by_blocker,omitempty"`
	// Recent are the last denials seen (at most 8).
	Recent []Denial `json:"recent,omitempty"`
}

// Counter counts one agent's denials.
type Counter struct {
	r    *Reader
	owns func(pid int) bool

	mu        sync.Mutex
	seen      map[uint64]int // per domain: the denials read
	total     map[uint64]int // per domain: the kernel's own total, once it is gone
	byBlocker map[string]int
	recent    []Denial
	// totalled is closed and replaced when a domain's total arrives.
	totalled chan struct{}
}

// Track counts the denials of the processes owns reports as the agent's.
// owns is called with the Reader's lock held, from its goroutine: it must
// be quick and must not call the Reader.
func (r *Reader) Track(owns func(pid int) bool) *Counter {
	c := &Counter{r: r, owns: owns, seen: map[uint64]int{}, total: map[uint64]int{}, byBlocker: map[string]int{},
		totalled: make(chan struct{})}
	r.mu.Lock()
	r.tracked[c] = struct{}{}
	r.mu.Unlock()
	return c
}

// Untrack stops attributing new domains to c; what it counted stays.
func (c *Counter) Untrack() {
	c.r.mu.Lock()
	if c.r.lastCounter == c {
		c.r.lastCounter = nil
	}
	delete(c.r.tracked, c)
	for dom, owner := range c.r.domains {
		if owner == c {
			delete(c.r.domains, dom)
		}
	}
	c.r.mu.Unlock()
}

func (c *Counter) add(domain uint64, d Denial) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[domain]++
	c.byBlocker[d.Blockers]++
	if len(c.recent) == recentDenials {
		copy(c.recent, c.recent[1:])
		c.recent = c.recent[:recentDenials-1]
	}
	c.recent = append(c.recent, d)
}

// setPID gives the denials of audit event serial the pid that made them.
func (c *Counter) setPID(serial uint64, pid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.recent {
		if c.recent[i].serial == serial {
			c.recent[i].PID = pid
		}
	}
}

func (c *Counter) final(domain uint64, n int) {
	c.mu.Lock()
	c.total[domain] = n
	close(c.totalled)
	c.totalled = make(chan struct{})
	c.mu.Unlock()
}

// Settle waits, at most d, for the kernel's own total of every domain
// that denied the agent something: a domain is gone once its last process
// is, and its total then arrives within milliseconds. It returns at once
// for an agent that was denied nothing.
func (c *Counter) Settle(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		c.mu.Lock()
		open, wait := false, c.totalled
		for dom := range c.seen {
			if _, ok := c.total[dom]; !ok {
				open = true
			}
		}
		c.mu.Unlock()
		if !open {
			return
		}
		select {
		case <-wait:
		case <-t.C:
			return
		}
	}
}

// Count is the agent's denials so far.
func (c *Counter) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.countLocked()
}

func (c *Counter) countLocked() int {
	n := 0
	for dom, seen := range c.seen {
		n += max(seen, c.total[dom])
	}
	for dom, total := range c.total {
		if _, ok := c.seen[dom]; !ok {
			n += total
		}
	}
	return n
}

// Summary is the agent's denials so far, for its certificate.
func (c *Counter) Summary() Summary {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Summary{Count: c.countLocked(), ByBlocker: maps.Clone(c.byBlocker), Recent: append([]Denial(nil), c.recent...)}
}
