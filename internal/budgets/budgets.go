// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package budgets keeps the daemon's budgets across runs: for each budget
// of the daemon file (a label selector, a window of a day or a month, warn
// and kill amounts in USD), what the runs it matches spent in the current
// window, whether that crossed its amounts, and whether an operator lifted
// the hold its kill set. The book is persisted in state_dir/budgets.json
// (atomically, fsynced: package atomicfile), so a restart of the daemon
// neither resets a window nor forgets a trip.
//
// Windows are UTC: a day from 00:00 to the next 00:00, a month from the
// 1st at 00:00 to the next 1st. A window rolls over at the first charge,
// lookup or Roll at or after its end: the spend starts again from 0 and a
// trip or a lift of the old window ends with it.
//
// The package decides; it never signals, kills or writes an audit line.
// Every entry point takes now; the daemon passes the clock's time, tests
// an injected one.
package budgets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/hermeskill/hermeskilld/internal/atomicfile"
	"github.com/hermeskill/hermeskilld/internal/config"
)

// States of a budget in its current window.
const (
	StateOK      = "ok"      // below its amounts
	StateWarned  = "warned"  // its spend crossed warn
	StateTripped = "tripped" // its spend crossed kill: matching runs stopped, new ones held
	StateLifted  = "lifted"  // tripped, then lifted by an operator: nothing is held until the window rolls over
)

// Thresholds a charge can cross.
const (
	Warn = "warn"
	Kill = "kill"
)

// Errors.
var (
	// ErrCorrupt: budgets.json cannot be read as the book.
	ErrCorrupt = errors.New("budgets file damaged")
	// ErrUnknown: no budget of that name.
	ErrUnknown = errors.New("no such budget")
	// ErrNotTripped: a lift of a budget that holds nothing.
	ErrNotTripped = errors.New("budget not tripped")
)

// Book is the budgets and their windows. Its methods are safe for
// concurrent use.
type Book struct {
	path string

	mu    sync.Mutex
	defs  []config.Budget
	w     map[string]*window // by budget name
	dirty bool               // changed since the last Save
}

// window is one budget's current window, as budgets.json stores it.
type window struct {
	Per      string    `json:"per"`
	Start    time.Time `json:"start"`
	SpentUSD float64   `json:"spent_usd"`
	Warned   *Mark     `json:"warned,omitempty"`
	Tripped  *Mark     `json:"tripped,omitempty"`
	Lifted   *Mark     `json:"lifted,omitempty"`
}

// Mark is when a window crossed an amount (or was lifted), and by whom.
type Mark struct {
	At       time.Time `json:"at"`
	SpentUSD float64   `json:"spent_usd"`
	Operator string    `json:"operator,omitempty"` // a lift's
	// Full: a trip at a request that did not fit in what was left
	// (Trip), before the spend reached the amount.
	Full bool `json:"full,omitempty"`
}

// file is budgets.json.
type file struct {
	Budgets map[string]*window `json:"budgets"`
}

// Open reads the book at path (none yet: an empty one) and applies defs,
// the daemon file's budgets, at now.
func Open(path string, defs []config.Budget, now time.Time) (*Book, error) {
	b := &Book{path: path, w: map[string]*window{}}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		var f file
		if err := decode(data, &f); err != nil {
			return nil, fmt.Errorf("%s: %w: %w (move it aside to start every budget's window from 0)", path, ErrCorrupt, err)
		}
		for name, w := range f.Budgets {
			if w == nil || w.Start.IsZero() || (w.Per != config.PerDay && w.Per != config.PerMonth) {
				return nil, fmt.Errorf("%s: %w: budget %q has no valid window (move it aside to start every budget's window from 0)", path, ErrCorrupt, name)
			}
			b.w[name] = w
		}
	}
	b.Configure(defs, now)
	return b, nil
}

// decode reads exactly one JSON object of known keys: an unknown key may
// be a misspelt "tripped", and ignoring it would release what is held.
func decode(data []byte, f *file) error {
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		return errors.New("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(f); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON object")
	}
	return nil
}

// Configure applies the daemon file's budgets: a budget keeps its window
// by name (its spend, its marks); a new one starts from 0 at now; a
// removed one is forgotten. A budget whose window changed (day to month)
// keeps its spend and marks until the new window rolls over.
func (b *Book) Configure(defs []config.Budget, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.defs = append([]config.Budget(nil), defs...)
	keep := map[string]*window{}
	for _, d := range defs {
		w := b.w[d.Name]
		switch {
		case w == nil:
			w = &window{Per: d.Per, Start: Start(d.Per, now)}
		case w.Per != d.Per:
			w.Per, w.Start = d.Per, Start(d.Per, now)
		}
		keep[d.Name] = w
	}
	b.w = keep
	b.dirty = true
}

// Start is the start of the window of per (day, month) that holds now, in
// UTC.
func Start(per string, now time.Time) time.Time {
	y, m, d := now.UTC().Date()
	if per == config.PerMonth {
		d = 1
	}
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// End is the end of the window of per that starts at start.
func End(per string, start time.Time) time.Time {
	if per == config.PerMonth {
		return start.AddDate(0, 1, 0)
	}
	return start.AddDate(0, 0, 1)
}

// rollLocked starts a new window for w when now is past its end; it
// reports whether it did.
func (b *Book) rollLocked(w *window, now time.Time) bool {
	if now.Before(End(w.Per, w.Start)) {
		return false
	}
	*w = window{Per: w.Per, Start: Start(w.Per, now)}
	b.dirty = true
	return true
}

// Crossing is a charge that took a budget's window over one of its
// amounts, once per window and threshold.
type Crossing struct {
	Budget    config.Budget
	Threshold string // Warn or Kill
	SpentUSD  float64
	Start     time.Time // of the window
	// Full: a kill at a request that did not fit in what was left (Trip).
	Full bool
}

// Reason says it as certificates and the audit log do: "budget team-a:
// spent $10.02 of $10.00 today".
func (c Crossing) Reason() string {
	limit := c.Budget.Kill
	if c.Threshold == Warn {
		limit = c.Budget.Warn
	}
	r := fmt.Sprintf("budget %s: spent $%.2f of $%.2f %s", c.Budget.Name, c.SpentUSD, limit, Window(c.Budget.Per))
	if c.Full {
		r += "; the next request's worst case did not fit in the rest"
	}
	return r
}

// Window names the window of per as the reasons do: "today", "this
// month".
func Window(per string) string {
	if per == config.PerMonth {
		return "this month"
	}
	return "today"
}

// Charge adds usd, spent by a run with these labels, to the window of
// every budget that matches them, and returns the amounts it crossed (in
// the order of the daemon file; a kill after a warn when one charge
// crosses both). A lifted window is charged but never trips again before
// it rolls over: the operator decided.
func (b *Book) Charge(labels map[string]string, usd float64, now time.Time) []Crossing {
	if !(usd > 0) {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Crossing
	for _, d := range b.defs {
		if !d.Sel.Matches(labels) {
			continue
		}
		w := b.w[d.Name]
		b.rollLocked(w, now)
		w.SpentUSD += usd
		b.dirty = true
		cross := func(th string, amount float64, m **Mark) {
			if amount > 0 && *m == nil && w.SpentUSD >= amount {
				*m = &Mark{At: now.UTC(), SpentUSD: w.SpentUSD}
				out = append(out, Crossing{Budget: d, Threshold: th, SpentUSD: w.SpentUSD, Start: w.Start})
			}
		}
		cross(Warn, d.Warn, &w.Warned)
		if w.Lifted == nil {
			cross(Kill, d.Kill, &w.Tripped)
		}
	}
	return out
}

// Held returns the first tripped budget (not lifted) that matches
// labels, in its current window at now.
func (b *Book) Held(labels map[string]string, now time.Time) (Crossing, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range b.defs {
		w := b.w[d.Name]
		b.rollLocked(w, now)
		if w.Tripped != nil && w.Lifted == nil && d.Sel.Matches(labels) {
			return Crossing{Budget: d, Threshold: Kill, SpentUSD: w.Tripped.SpentUSD, Start: w.Start, Full: w.Tripped.Full}, true
		}
	}
	return Crossing{}, false
}

// Trip trips the budget name at now, before its spend reached its kill
// amount: a request of a run it matches did not fit in what its window
// had left (the gateway refused it, or cut its stream). It returns the
// crossing, or false when the budget is unknown, has no kill amount, or
// is tripped or lifted in its window already.
func (b *Book) Trip(name string, now time.Time) (Crossing, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range b.defs {
		if d.Name != name {
			continue
		}
		w := b.w[name]
		b.rollLocked(w, now)
		if d.Kill <= 0 || w.Tripped != nil || w.Lifted != nil {
			return Crossing{}, false
		}
		w.Tripped = &Mark{At: now.UTC(), SpentUSD: w.SpentUSD, Full: true}
		b.dirty = true
		return Crossing{Budget: d, Threshold: Kill, SpentUSD: w.SpentUSD, Start: w.Start, Full: true}, true
	}
	return Crossing{}, false
}

// Roll rolls over every window past its end at now and returns the names
// of those that were tripped (what they held may start again).
func (b *Book) Roll(now time.Time) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var freed []string
	for _, d := range b.defs {
		w := b.w[d.Name]
		held := w.Tripped != nil && w.Lifted == nil
		if b.rollLocked(w, now) && held {
			freed = append(freed, d.Name)
		}
	}
	return freed
}

// NextRoll is the earliest end of a window after now (zero: no budget).
func (b *Book) NextRoll() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	var next time.Time
	for _, d := range b.defs {
		if e := End(d.Per, b.w[d.Name].Start); next.IsZero() || e.Before(next) {
			next = e
		}
	}
	return next
}

// Lift ends the hold of a tripped budget until its window rolls over.
func (b *Book) Lift(name, operator string, now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	w, ok := b.w[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknown, name)
	}
	b.rollLocked(w, now)
	if w.Tripped == nil || w.Lifted != nil {
		return fmt.Errorf("%w: %s", ErrNotTripped, name)
	}
	w.Lifted = &Mark{At: now.UTC(), SpentUSD: w.SpentUSD, Operator: operator}
	b.dirty = true
	return nil
}

// Status is one budget and its current window.
type Status struct {
	config.Budget
	Start, End time.Time
	SpentUSD   float64
	State      string
	// Since is when the window entered its state (zero for ok).
	Since time.Time
}

// List is every budget at now, in the order of the daemon file.
func (b *Book) List(now time.Time) []Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Status, 0, len(b.defs))
	for _, d := range b.defs {
		w := b.w[d.Name]
		b.rollLocked(w, now)
		st := Status{Budget: d, Start: w.Start, End: End(w.Per, w.Start), SpentUSD: w.SpentUSD, State: StateOK}
		switch {
		case w.Lifted != nil:
			st.State, st.Since = StateLifted, w.Lifted.At
		case w.Tripped != nil:
			st.State, st.Since = StateTripped, w.Tripped.At
		case w.Warned != nil:
			st.State, st.Since = StateWarned, w.Warned.At
		}
		out = append(out, st)
	}
	return out
}

// Save writes the book if it changed since the last Save: atomically and
// durably (a crash leaves the old file or the new one, never a part).
func (b *Book) Save() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.dirty {
		return nil
	}
	data, err := json.MarshalIndent(file{Budgets: b.w}, "", "  ") // map keys sorted: a stable file
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(b.path, append(data, '\n'), 0o640); err != nil {
		return err
	}
	b.dirty = false
	return nil
}
