// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"bufio"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// This file writes the Prometheus text exposition format (version 0.0.4)
// itself. client_golang, the usual choice, costs every start of the binary
// 1.5–5 ms of package initialisation here (its default registry's Go and
// process collectors, protobuf descriptors, and a read of the executable
// by protobuf's detrand), paid by every `supervise` and every keeper
// whether or not it serves metrics; a few counters, a histogram and
// series computed at scrape time need none of it. The format's tests parse
// what is written here with prometheus/common's own parser.

// expo writes one exposition: families in the order written, each with
// its HELP and TYPE lines once.
type expo struct {
	w   *bufio.Writer
	buf []byte
}

// family starts a family. typ is counter, gauge or histogram.
func (e *expo) family(name, typ, help string) {
	e.buf = append(e.buf[:0], "# HELP "...)
	e.buf = append(e.buf, name...)
	e.buf = append(e.buf, ' ')
	e.buf = appendEscaped(e.buf, help, false)
	e.buf = append(e.buf, "\n# TYPE "...)
	e.buf = append(e.buf, name...)
	e.buf = append(e.buf, ' ')
	e.buf = append(e.buf, typ...)
	e.buf = append(e.buf, '\n')
	_, _ = e.w.Write(e.buf)
}

// sample writes one sample; labels are name, value pairs.
func (e *expo) sample(name string, v float64, labels ...string) {
	e.buf = append(e.buf[:0], name...)
	if len(labels) > 0 {
		e.buf = append(e.buf, '{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = append(e.buf, labels[i]...)
			e.buf = append(e.buf, '=', '"')
			e.buf = appendEscaped(e.buf, labels[i+1], true)
			e.buf = append(e.buf, '"')
		}
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, ' ')
	e.buf = appendValue(e.buf, v)
	e.buf = append(e.buf, '\n')
	_, _ = e.w.Write(e.buf)
}

// appendEscaped escapes a backslash and a newline, and in a label value a
// double quote, as the format requires.
func appendEscaped(b []byte, s string, quote bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

func appendValue(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// counterVec is a counter family with labels; a series appears when first
// incremented.
type counterVec struct {
	name, help string
	labels     []string

	mu     sync.Mutex
	series map[string]*series // by label values joined with labelSep
}

type series struct {
	values []string
	n      float64
}

const labelSep = "\xff" // never in a label value of ours: not UTF-8

func newCounterVec(name, help string, labels ...string) *counterVec {
	return &counterVec{name: name, help: help, labels: labels, series: make(map[string]*series)}
}

// inc adds 1 to the series of values (one per label, in order).
func (c *counterVec) inc(values ...string) {
	key := strings.Join(values, labelSep)
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.series[key]
	if s == nil {
		s = &series{values: slices.Clone(values)}
		c.series[key] = s
	}
	s.n++
}

// deleteWhere drops every series whose label (by name) has value.
func (c *counterVec) deleteWhere(label, value string) {
	i := slices.Index(c.labels, label)
	if i < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, s := range c.series {
		if s.values[i] == value {
			delete(c.series, key)
		}
	}
}

// write writes the family, its series sorted by label values.
func (c *counterVec) write(e *expo) {
	c.mu.Lock()
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range c.series {
			if !yield(k) {
				return
			}
		}
	})
	rows := make([]series, 0, len(keys))
	for _, k := range keys {
		rows = append(rows, *c.series[k])
	}
	c.mu.Unlock()
	if len(c.labels) > 0 && len(rows) == 0 {
		return // a labelled family with no series is not exposed
	}
	e.family(c.name, "counter", c.help)
	if len(c.labels) == 0 && len(rows) == 0 {
		e.sample(c.name, 0)
		return
	}
	pairs := make([]string, 2*len(c.labels))
	for _, r := range rows {
		for i, l := range c.labels {
			pairs[2*i], pairs[2*i+1] = l, r.values[i]
		}
		e.sample(c.name, r.n, pairs...)
	}
}

// histogram is a histogram family without labels.
type histogram struct {
	name, help string
	bounds     []float64 // upper bounds, increasing; +Inf is implied

	mu     sync.Mutex
	counts []uint64 // per bucket, not cumulative; the last is +Inf's
	sum    float64
	count  uint64
}

func newHistogram(name, help string, bounds []float64) *histogram {
	return &histogram{name: name, help: help, bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v) // first bound >= v
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[i]++
	h.sum += v
	h.count++
}

func (h *histogram) write(e *expo) {
	h.mu.Lock()
	counts, sum, count := slices.Clone(h.counts), h.sum, h.count
	h.mu.Unlock()
	e.family(h.name, "histogram", h.help)
	var cum uint64
	for i, le := range h.bounds {
		cum += counts[i]
		e.sample(h.name+"_bucket", float64(cum), "le", strconv.FormatFloat(le, 'g', -1, 64))
	}
	e.sample(h.name+"_bucket", float64(count), "le", "+Inf")
	e.sample(h.name+"_sum", sum)
	e.sample(h.name+"_count", float64(count))
}
