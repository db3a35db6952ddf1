// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestQuantile(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct{ q, want float64 }{
		{0, 1}, {1, 10}, {0.5, 5.5}, {0.1, 1.9}, {0.9, 9.1}, {0.99, 9.91}, {-1, 1}, {2, 10},
	} {
		if got := Quantile(s, c.q); !near(got, c.want) {
			t.Errorf("Quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := Quantile([]float64{7}, 0.9); got != 7 {
		t.Errorf("one sample: %v", got)
	}
	if !math.IsNaN(Quantile(nil, 0.5)) {
		t.Error("empty: want NaN")
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{5, 1, math.NaN(), 3, 2, 4})
	if s.N != 5 || s.Min != 1 || s.Max != 5 || s.P50 != 3 || !near(s.P10, 1.4) || !near(s.P90, 4.6) || !near(s.P99, 4.96) {
		t.Errorf("Summarize = %+v", s)
	}
	in := []float64{3, 1, 2}
	Summarize(in)
	if in[0] != 3 {
		t.Error("Summarize sorted its input")
	}
	e := Summarize(nil)
	if e.N != 0 || !math.IsNaN(e.P50) {
		t.Errorf("empty: %+v", e)
	}
	if m := Median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("Median = %v", m)
	}
}

func TestRatioAndRates(t *testing.T) {
	if !math.IsNaN(Ratio(1, 0)) || !math.IsNaN(Ratio(math.NaN(), 1)) || Ratio(3, 2) != 1.5 {
		t.Error("Ratio")
	}
	r := Rates([]float64{0, 1, 3, 3}, []float64{0, 100, 500, 600})
	if len(r) != 2 || r[0] != 100 || r[1] != 200 {
		t.Errorf("Rates = %v", r)
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{fmtMs(0.1234), "0.123 ms"},
		{fmtMs(2.346), "2.35 ms"},
		{fmtMs(12.34), "12.3 ms"},
		{fmtMs(123.4), "123 ms"},
		{fmtMs(12340), "12.34 s"},
		{fmtMs(math.NaN()), "—"},
		{fmtSignedMs(0.5), "+0.500 ms"},
		{fmtSignedMs(-0.5), "-0.500 ms"},
		{fmtRate(178000), "178k/s"},
		{fmtRate(1500), "1.5k/s"},
		{fmtRate(2.5e6), "2.50M/s"},
		{fmtRate(12), "12/s"},
		{fmtRatio(1.849), "×1.85"},
		{fmtRatio(math.Inf(1)), "—"},
		{spread(fmtMs, 1, 2), "1.00 ms – 2.00 ms"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
