// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"math"
	"slices"
)

// Summary is the distribution of one figure's samples.
type Summary struct {
	N                            int
	Min, P10, P50, P90, P99, Max float64
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of sorted, interpolating
// linearly between the two nearest ranks (the "type 7" rule of R and
// NumPy's default). NaN when sorted is empty.
func Quantile(sorted []float64, q float64) float64 {
	n := len(sorted)
	switch {
	case n == 0:
		return math.NaN()
	case q <= 0:
		return sorted[0]
	case q >= 1:
		return sorted[n-1]
	}
	h := q * float64(n-1)
	lo := math.Floor(h)
	i := int(lo)
	if i+1 >= n {
		return sorted[n-1]
	}
	return sorted[i] + (h-lo)*(sorted[i+1]-sorted[i])
}

// Summarize sorts a copy of xs and returns its summary; NaNs are dropped.
func Summarize(xs []float64) Summary {
	s := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			s = append(s, x)
		}
	}
	slices.Sort(s)
	if len(s) == 0 {
		nan := math.NaN()
		return Summary{Min: nan, P10: nan, P50: nan, P90: nan, P99: nan, Max: nan}
	}
	return Summary{
		N:   len(s),
		Min: s[0],
		P10: Quantile(s, 0.10),
		P50: Quantile(s, 0.50),
		P90: Quantile(s, 0.90),
		P99: Quantile(s, 0.99),
		Max: s[len(s)-1],
	}
}

// Median is Summarize(xs).P50.
func Median(xs []float64) float64 { return Summarize(xs).P50 }

// Ratio is a/b, NaN when b is 0 or either is NaN.
func Ratio(a, b float64) float64 {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return a / b
}

// Rates turns cumulative counter samples taken at times ts (seconds) into
// the per-interval rates (count/s) between consecutive samples.
func Rates(ts, counts []float64) []float64 {
	var out []float64
	for i := 1; i < len(ts) && i < len(counts); i++ {
		if dt := ts[i] - ts[i-1]; dt > 0 {
			out = append(out, (counts[i]-counts[i-1])/dt)
		}
	}
	return out
}

// fmtMs formats a duration in milliseconds with a precision that suits
// its size; seconds from 1 s up.
func fmtMs(ms float64) string {
	a := math.Abs(ms)
	switch {
	case math.IsNaN(ms):
		return "—"
	case a >= 1000:
		return fmt.Sprintf("%.2f s", ms/1000)
	case a >= 100:
		return fmt.Sprintf("%.0f ms", ms)
	case a >= 10:
		return fmt.Sprintf("%.1f ms", ms)
	case a >= 1:
		return fmt.Sprintf("%.2f ms", ms)
	default:
		return fmt.Sprintf("%.3f ms", ms)
	}
}

// fmtSignedMs is fmtMs with an explicit sign: a lateness or an error.
func fmtSignedMs(ms float64) string {
	if math.IsNaN(ms) || ms < 0 {
		return fmtMs(ms)
	}
	return "+" + fmtMs(ms)
}

// fmtRate formats a count per second: 178k/s, 1.2M/s, 950/s.
func fmtRate(r float64) string {
	switch {
	case math.IsNaN(r):
		return "—"
	case r >= 1e6:
		return fmt.Sprintf("%.2fM/s", r/1e6)
	case r >= 1e4:
		return fmt.Sprintf("%.0fk/s", r/1e3)
	case r >= 1e3:
		return fmt.Sprintf("%.1fk/s", r/1e3)
	default:
		return fmt.Sprintf("%.0f/s", r)
	}
}

// fmtRatio formats a ratio as "×1.85".
func fmtRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "—"
	}
	return fmt.Sprintf("×%.2f", r)
}

// spread formats "lo–hi" with f.
func spread(f func(float64) string, lo, hi float64) string {
	if math.IsNaN(lo) || math.IsNaN(hi) {
		return "—"
	}
	return f(lo) + " – " + f(hi)
}
