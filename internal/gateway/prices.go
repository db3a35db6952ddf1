// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxPricesFile bounds a price file.
const maxPricesFile = 1 << 20

// Price is a model's price in USD per million tokens. CachedInput is what
// an input token read from the provider's prompt cache costs; a price
// file that leaves it out gives it Input's value.
type Price struct {
	Input, Output, CachedInput float64
}

// Prices is a parsed price file. The nil *Prices prices nothing.
type Prices struct {
	exact    map[string]Price
	prefixes []prefixPrice // longest first
	dflt     *Price
}

type prefixPrice struct {
	prefix string
	price  Price
}

// LoadPrices reads and parses the price file at path (ParsePrices).
func LoadPrices(path string) (*Prices, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("prices: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPricesFile+1))
	if err != nil {
		return nil, fmt.Errorf("prices: %w", err)
	}
	if len(data) > maxPricesFile {
		return nil, &PricesError{Source: path, Msg: fmt.Sprintf("over %d bytes", maxPricesFile)}
	}
	return ParsePrices(data, path)
}

// ParsePrices parses a price file read from source (a name for errors):
//
//	models:
//	  gpt-4.1-mini: {input: 0.40, output: 1.60, cached_input: 0.10}
//	  "claude-sonnet-4*": {input: 3.00, output: 15.00, cached_input: 0.30}
//	default_price: {input: 5.00, output: 15.00}
//
// Prices are USD per million tokens, finite and not negative; input and
// output are required. A model key ending in "*" is a prefix. Every error
// is a *PricesError naming source and the line.
func ParsePrices(data []byte, source string) (*Prices, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &PricesError{Source: source, Msg: "YAML syntax: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if len(doc.Content) == 0 {
		return nil, &PricesError{Source: source, Msg: "empty: want models and/or default_price"}
	}
	p := &Prices{exact: map[string]Price{}}
	bad := func(n *yaml.Node, format string, args ...any) error {
		return &PricesError{Source: source, Line: n.Line, Msg: fmt.Sprintf(format, args...)}
	}
	top := deref(doc.Content[0])
	err := eachKey(top, bad, func(k, v *yaml.Node) error {
		switch k.Value {
		case "models":
			return eachKey(v, bad, func(mk, mv *yaml.Node) error {
				pr, err := parsePrice(mv, bad)
				if err != nil {
					return err
				}
				return p.add(mk, pr, bad)
			})
		case "default_price":
			pr, err := parsePrice(v, bad)
			if err != nil {
				return err
			}
			p.dflt = &pr
			return nil
		default:
			return bad(k, "unknown key %q (want models, default_price)", k.Value)
		}
	})
	if err != nil {
		return nil, err
	}
	if len(p.exact) == 0 && len(p.prefixes) == 0 && p.dflt == nil {
		return nil, &PricesError{Source: source, Msg: "no prices: want models and/or default_price"}
	}
	sort.SliceStable(p.prefixes, func(i, j int) bool { return len(p.prefixes[i].prefix) > len(p.prefixes[j].prefix) })
	return p, nil
}

func (p *Prices) add(k *yaml.Node, pr Price, bad func(*yaml.Node, string, ...any) error) error {
	name := k.Value
	prefix, isPrefix := strings.CutSuffix(name, "*")
	switch {
	case name == "" || prefix == "":
		return bad(k, "model %q: want a model name or a prefix ending in '*' (default_price prices every other model)", name)
	case strings.Contains(prefix, "*"):
		return bad(k, "model %q: '*' only at the end", name)
	case isPrefix:
		p.prefixes = append(p.prefixes, prefixPrice{prefix, pr})
	default:
		p.exact[name] = pr
	}
	return nil
}

func parsePrice(n *yaml.Node, bad func(*yaml.Node, string, ...any) error) (Price, error) {
	var pr Price
	var in, out, cached bool
	err := eachKey(n, bad, func(k, v *yaml.Node) error {
		var dst *float64
		switch k.Value {
		case "input":
			dst, in = &pr.Input, true
		case "output":
			dst, out = &pr.Output, true
		case "cached_input":
			dst, cached = &pr.CachedInput, true
		default:
			return bad(k, "unknown key %q (want input, output, cached_input)", k.Value)
		}
		v = deref(v)
		f, err := strconv.ParseFloat(v.Value, 64)
		if v.Kind != yaml.ScalarNode || (v.Tag != "!!int" && v.Tag != "!!float") || err != nil {
			return bad(v, "%s: %q is not a number (USD per million tokens)", k.Value, v.Value)
		}
		if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return bad(v, "%s: %s: want a finite price, not negative", k.Value, v.Value)
		}
		*dst = f
		return nil
	})
	if err != nil {
		return Price{}, err
	}
	if !in || !out {
		return Price{}, bad(n, "a price needs input and output (USD per million tokens)")
	}
	if !cached {
		pr.CachedInput = pr.Input
	}
	return pr, nil
}

// eachKey calls fn for each key and value of the mapping n, refusing
// anything else and duplicate keys.
func eachKey(n *yaml.Node, bad func(*yaml.Node, string, ...any) error, fn func(k, v *yaml.Node) error) error {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		return bad(n, "want a mapping, not %q", n.Value)
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return bad(k, "want a string key")
		}
		if line, dup := seen[k.Value]; dup {
			return bad(k, "%q is already set on line %d", k.Value, line)
		}
		seen[k.Value] = k.Line
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// Lookup finds model's price: its own; else, for a dated snapshot
// ("gpt-4.1-mini-2025-04-14", "claude-sonnet-4-20250514"), the undated
// name's; else the longest prefix that matches; else default_price.
func (p *Prices) Lookup(model string) (Price, bool) {
	if p == nil || model == "" {
		return Price{}, false
	}
	if pr, ok := p.exact[model]; ok {
		return pr, true
	}
	if base, ok := undated(model); ok {
		if pr, ok := p.exact[base]; ok {
			return pr, true
		}
	}
	for _, pp := range p.prefixes {
		if strings.HasPrefix(model, pp.prefix) {
			return pp.price, true
		}
	}
	if p.dflt != nil {
		return *p.dflt, true
	}
	return Price{}, false
}

// Cost is what in input tokens (cachedIn of them read from the prompt
// cache) and out output tokens of model cost, in USD. priced is false when
// the model has no price (Lookup): usd is then 0, which means unknown.
func (p *Prices) Cost(model string, in, out, cachedIn int64) (usd float64, priced bool) {
	pr, ok := p.Lookup(model)
	if !ok {
		return 0, false
	}
	cachedIn = min(max(cachedIn, 0), max(in, 0))
	fresh := max(in, 0) - cachedIn
	usd = (float64(fresh)*pr.Input + float64(cachedIn)*pr.CachedInput + float64(max(out, 0))*pr.Output) / 1e6
	return usd, true
}

// undated strips a snapshot date: "-YYYY-MM-DD" or "-YYYYMMDD" at the end.
func undated(model string) (string, bool) {
	for _, layout := range []string{"-dddd-dd-dd", "-dddddddd"} {
		if len(model) <= len(layout) {
			continue
		}
		tail := model[len(model)-len(layout):]
		ok := true
		for i := range len(layout) {
			if layout[i] == 'd' && (tail[i] < '0' || tail[i] > '9') || layout[i] == '-' && tail[i] != '-' {
				ok = false
				break
			}
		}
		if ok {
			return model[:len(model)-len(layout)], true
		}
	}
	return "", false
}
