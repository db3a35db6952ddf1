// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"reflect"
	"regexp"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/hermeskill/hermeskilld/internal/labels"
)

// The windows of a budget across runs (yaml: budgets[].per).
const (
	PerDay   = "day"   // from 00:00 UTC to the next
	PerMonth = "month" // from the 1st, 00:00 UTC, to the next 1st
)

// Budget is one budget across runs (yaml: an element of budgets): what
// every run whose labels match Selector spends, summed over a window of
// one day or one month (UTC), against a warning and a kill amount in USD.
type Budget struct {
	Name     string  `yaml:"name" config:"nonempty"`       // how it is named in certificates, metrics, `hermeskilld budgets`
	Selector string  `yaml:"selector" config:"nonempty"`   // a label selector, as `kill -l` takes it
	Per      string  `yaml:"per" config:"oneof=day|month"` // the window
	Warn     float64 `yaml:"warn"`                         // USD: an event, an audit line; 0 = none
	Kill     float64 `yaml:"kill"`                         // USD: the matching runs are stopped and held; 0 = none
	// Sel is Selector, parsed.
	Sel labels.Selector
	// Line is where the budget starts in its file.
	Line int
}

var budgetNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`) })

// budgets decodes the daemon's budgets: a list of mappings, each checked
// on its own (a name of letters, digits, '_', '.', '-'; a selector that
// parses; a window; a kill or a warn amount, warn below kill), names
// unique.
func (d *decoder) budgets(n *yaml.Node, path string, v reflect.Value) {
	n = deref(n)
	if isNull(n) {
		v.SetZero()
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, path, "must be a list of budgets such as [{name: team-a, selector: team=a, per: day, kill: 10}], got %s", describe(n))
		return
	}
	out := make([]Budget, 0, len(n.Content))
	first := map[string]int{}
	for i, e := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		e = deref(e)
		d.lines[p] = e.Line
		var b Budget
		before := len(d.errs)
		d.mapping(e, p, reflect.ValueOf(&b).Elem(), scope{})
		b.Line = e.Line
		bad := func(key, format string, args ...any) {
			line := e.Line
			if l, ok := d.lines[p+"."+key]; ok {
				line = l
			}
			d.errorf(&yaml.Node{Line: line, Column: e.Column}, p+"."+key, format, args...)
		}
		for _, k := range []string{"name", "selector", "per"} {
			if !d.sets(p + "." + k) {
				d.fail(e, p+"."+k, ErrMissing, "required")
			}
		}
		if b.Name != "" && !budgetNameRE().MatchString(b.Name) {
			bad("name", "%q must be up to 63 letters, digits, '_', '.', '-', starting with a letter or digit", b.Name)
		}
		if l, dup := first[b.Name]; dup && b.Name != "" {
			bad("name", "duplicate budget %q (first at line %d)", b.Name, l)
		} else if b.Name != "" {
			first[b.Name] = e.Line
		}
		if b.Selector != "" {
			sel, err := labels.Parse(b.Selector)
			if err != nil {
				bad("selector", "%v", err)
			}
			b.Sel = sel
		}
		switch {
		case !d.sets(p+".warn") && !d.sets(p+".kill"):
			d.fail(e, p+".kill", ErrMissing, "a budget needs a kill amount, a warn amount, or both (USD)")
		case b.Warn == 0 && b.Kill == 0:
			if d.lines[p+".kill"] != 0 && len(d.errs) == before {
				bad("kill", "warn and kill are both 0: set one above 0")
			}
		case b.Kill > 0 && b.Warn >= b.Kill:
			bad("warn", "%v must be below kill (%v)", b.Warn, b.Kill)
		}
		out = append(out, b)
	}
	v.Set(reflect.ValueOf(out))
}
