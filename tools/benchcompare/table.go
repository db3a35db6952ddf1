// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Row is one line of the table. Empty cells print as "—".
type Row struct {
	Group  string // "1 launch", …
	Name   string // what was measured
	N      int    // samples; 0 for a single measurement
	P50    string // the median, or the one value
	Spread string // p10 – p90
	P99    string
	Max    string
	Versus string // ratio or difference against the peer or floor
	Target string
	OK     *bool // nil: no target
}

// check returns a pointer to ok, for Row.OK.
func check(ok bool) *bool { return &ok }

// checkLE is check(v ≤ limit), nil when v is unknown.
func checkLE(v, limit float64) *bool {
	if math.IsNaN(v) {
		return nil
	}
	return check(v <= limit)
}

// skipped is a row that was not measured, with why.
func skipped(group, name, why string) Row {
	return Row{Group: group, Name: name, P50: "skipped: " + why}
}

// failed is a row whose measurement failed, with the error.
func failed(group, name string, err error) Row {
	return Row{Group: group, Name: name, P50: "FAILED: " + oneLine(err.Error())}
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// durRow is a row of a duration figure (samples in ms).
func durRow(group, name string, ms []float64, signed bool) (Row, Summary) {
	s := Summarize(ms)
	f := fmtMs
	if signed {
		f = fmtSignedMs
	}
	r := Row{Group: group, Name: name, N: s.N}
	if s.N == 0 {
		r.P50 = "no samples"
		return r, s
	}
	r.P50, r.P99, r.Max = f(s.P50), f(s.P99), f(s.Max)
	r.Spread = spread(f, s.P10, s.P90)
	return r, s
}

// writeTable prints rows as one markdown table.
func writeTable(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "| group | measurement | n | p50 | p10 – p90 | p99 | max | vs | target | |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |")
	for _, r := range rows {
		n := "1"
		if r.N > 0 {
			n = fmt.Sprint(r.N)
		}
		if strings.HasPrefix(r.P50, "skipped") || strings.HasPrefix(r.P50, "FAILED") || r.P50 == "no samples" {
			n = "0"
		}
		ok := ""
		if r.OK != nil {
			ok = "✗"
			if *r.OK {
				ok = "✓"
			}
		}
		cells := []string{r.Group, r.Name, n, r.P50, r.Spread, r.P99, r.Max, r.Versus, r.Target, ok}
		for i, c := range cells {
			if c == "" && i < len(cells)-1 {
				c = "—"
			}
			cells[i] = oneLine(c)
		}
		fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
	}
}
