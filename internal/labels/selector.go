// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package labels holds agents' labels and the one selector that every verb
// (ps, kill, revoke, the control API, standing revocations) matches them
// with.
//
// A selector is a comma-separated list of requirements, all of which must
// hold, with the equality-based semantics of Kubernetes label selectors:
//
//	team=research   the label team is present and its value is "research"
//	team==research  the same
//	team=           the label team is present and empty
//	team!=research  team is absent, or present with another value
//	team            the label team is present, with any value
//	!team           the label team is absent
//
// Parsing is strict: an empty selector, an empty requirement ("a=1,,b=2"),
// a malformed label name, or two requirements on one label that cannot
// both hold is an error, never "match all".
package labels

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// MaxValue is the longest label value, in bytes.
const MaxValue = 256

var keyRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_./-]{0,62}$`) })

// ValidKey reports whether k is a label name: up to 63 letters, digits,
// '_', '.', '/', '-', starting with a letter or '_'.
func ValidKey(k string) bool { return keyRE().MatchString(k) }

// KeyRule says, for error messages, what ValidKey accepts.
const KeyRule = "up to 63 letters, digits, '_', '.', '/', '-', starting with a letter or '_'"

// Op is a requirement's operator.
type Op uint8

const (
	Equals    Op = iota + 1 // k=v, k==v
	NotEquals               // k!=v
	Exists                  // k
	NotExists               // !k
)

// Requirement is one term of a selector.
type Requirement struct {
	Key   string
	Op    Op
	Value string // for Equals and NotEquals
}

// Matches reports whether labels satisfy r. A missing label is never the
// same as an empty one.
func (r Requirement) Matches(labels map[string]string) bool {
	v, ok := labels[r.Key]
	switch r.Op {
	case Equals:
		return ok && v == r.Value
	case NotEquals:
		return !ok || v != r.Value
	case Exists:
		return ok
	case NotExists:
		return !ok
	}
	return false // an unknown operator never matches: fail closed on the side of selecting nothing
}

func (r Requirement) String() string {
	switch r.Op {
	case Equals:
		return r.Key + "=" + r.Value
	case NotEquals:
		return r.Key + "!=" + r.Value
	case Exists:
		return r.Key
	case NotExists:
		return "!" + r.Key
	}
	return "?" + r.Key
}

// Selector is a conjunction of requirements. The zero Selector is empty:
// it selects by nothing, and callers must treat "no selector" explicitly
// (Empty) — it is never produced by Parse.
type Selector struct {
	reqs []Requirement // sorted by key, then operator, then value
}

// Parse reads a selector (see the package comment).
func Parse(s string) (Selector, error) {
	if strings.TrimSpace(s) == "" {
		return Selector{}, fmt.Errorf("empty selector")
	}
	var reqs []Requirement
	for i, term := range strings.Split(s, ",") {
		term = strings.TrimSpace(term)
		if term == "" {
			return Selector{}, fmt.Errorf("selector %q: requirement %d is empty", s, i+1)
		}
		r, err := parseTerm(term)
		if err != nil {
			return Selector{}, fmt.Errorf("selector %q: %w", s, err)
		}
		reqs = append(reqs, r)
	}
	sel, err := build(reqs)
	if err != nil {
		return Selector{}, fmt.Errorf("selector %q: %w", s, err)
	}
	return sel, nil
}

// MustParse is Parse for constants in tests and examples.
func MustParse(s string) Selector {
	sel, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return sel
}

func parseTerm(term string) (Requirement, error) {
	var r Requirement
	switch {
	case strings.HasPrefix(term, "!") && !strings.ContainsAny(term, "="):
		r = Requirement{Key: strings.TrimSpace(term[1:]), Op: NotExists}
	case strings.Contains(term, "!="):
		k, v, _ := strings.Cut(term, "!=")
		r = Requirement{Key: strings.TrimSpace(k), Op: NotEquals, Value: strings.TrimSpace(v)}
	case strings.Contains(term, "=="):
		k, v, _ := strings.Cut(term, "==")
		r = Requirement{Key: strings.TrimSpace(k), Op: Equals, Value: strings.TrimSpace(v)}
	case strings.Contains(term, "="):
		k, v, _ := strings.Cut(term, "=")
		r = Requirement{Key: strings.TrimSpace(k), Op: Equals, Value: strings.TrimSpace(v)}
	default:
		r = Requirement{Key: term, Op: Exists}
	}
	switch {
	case r.Key == "":
		return r, fmt.Errorf("%q: no label name", term)
	case !ValidKey(r.Key):
		return r, fmt.Errorf("%q: %q is not a label name (%s)", term, r.Key, KeyRule)
	case strings.ContainsAny(r.Value, "=!"):
		return r, fmt.Errorf("%q: the value may not hold '=' or '!'", term)
	case len(r.Value) > MaxValue:
		return r, fmt.Errorf("%q: the value is longer than %d bytes", term, MaxValue)
	}
	return r, nil
}

// build sorts and deduplicates reqs, and refuses a selector that no labels
// could ever satisfy: a typo that would silently select nothing (or, read
// the other way, a rule that looks meant to select something) is an error.
func build(reqs []Requirement) (Selector, error) {
	slices.SortFunc(reqs, func(a, b Requirement) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		if a.Op != b.Op {
			return int(a.Op) - int(b.Op)
		}
		return strings.Compare(a.Value, b.Value)
	})
	reqs = slices.Compact(reqs)
	for i := 0; i < len(reqs); {
		j := i
		for j < len(reqs) && reqs[j].Key == reqs[i].Key {
			j++
		}
		if err := satisfiable(reqs[i:j]); err != nil {
			return Selector{}, err
		}
		i = j
	}
	return Selector{reqs: reqs}, nil
}

// satisfiable: the requirements on one key can all hold at once.
func satisfiable(rs []Requirement) error {
	var eq []string
	var exists, absent bool
	ne := map[string]bool{}
	for _, r := range rs {
		switch r.Op {
		case Equals:
			eq = append(eq, r.Value)
		case NotEquals:
			ne[r.Value] = true
		case Exists:
			exists = true
		case NotExists:
			absent = true
		}
	}
	key := rs[0].Key
	switch {
	case len(eq) > 1:
		return fmt.Errorf("label %q cannot equal both %q and %q", key, eq[0], eq[1])
	case absent && (exists || len(eq) > 0):
		return fmt.Errorf("label %q cannot be both absent and present", key)
	case len(eq) == 1 && ne[eq[0]]:
		return fmt.Errorf("label %q cannot both equal and not equal %q", key, eq[0])
	}
	return nil
}

// And is the conjunction of a and b (either may be empty).
func And(a, b Selector) (Selector, error) {
	return build(append(slices.Clone(a.reqs), b.reqs...))
}

// FromMap is the selector of equality requirements k=v, one per entry: the
// form selectors had before the operators, still read from older
// requests and stored rules.
func FromMap(m map[string]string) (Selector, error) {
	var reqs []Requirement
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !ValidKey(k) {
			return Selector{}, fmt.Errorf("%q is not a label name (%s)", k, KeyRule)
		}
		reqs = append(reqs, Requirement{Key: k, Op: Equals, Value: m[k]})
	}
	return build(reqs)
}

// Empty reports whether the selector has no requirement.
func (s Selector) Empty() bool { return len(s.reqs) == 0 }

// Requirements returns a copy of the requirements, sorted.
func (s Selector) Requirements() []Requirement { return slices.Clone(s.reqs) }

// Matches reports whether labels satisfy every requirement. The empty
// selector matches nothing: selecting "everything" must be said in other
// words by the caller.
func (s Selector) Matches(labels map[string]string) bool {
	if len(s.reqs) == 0 {
		return false
	}
	for _, r := range s.reqs {
		if !r.Matches(labels) {
			return false
		}
	}
	return true
}

// String is the canonical form, which Parse reads back.
func (s Selector) String() string {
	parts := make([]string, len(s.reqs))
	for i, r := range s.reqs {
		parts[i] = r.String()
	}
	return strings.Join(parts, ",")
}

// MarshalJSON writes the canonical string.
func (s Selector) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON reads a selector string, or an object of label=value
// pairs (equality requirements) as older clients and stored rules hold.
// An empty string or object is the empty selector; anything malformed is
// an error.
func (s *Selector) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err == nil {
		if str == "" {
			*s = Selector{}
			return nil
		}
		sel, err := Parse(str)
		if err != nil {
			return err
		}
		*s = sel
		return nil
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("a selector is a string such as \"team=research,!canary\"")
	}
	sel, err := FromMap(m)
	if err != nil {
		return fmt.Errorf("selector: %w", err)
	}
	*s = sel
	return nil
}

// IsZero lets `omitzero` leave an empty selector out of JSON.
func (s Selector) IsZero() bool { return s.Empty() }

// Flag is a pflag.Value for --selector: repeated flags are combined (all
// must hold).
type Flag struct{ Sel Selector }

func (f *Flag) String() string { return f.Sel.String() }
func (f *Flag) Type() string   { return "selector" }
func (f *Flag) Set(v string) error {
	sel, err := Parse(v)
	if err != nil {
		return err
	}
	both, err := And(f.Sel, sel)
	if err != nil {
		return err
	}
	f.Sel = both
	return nil
}
