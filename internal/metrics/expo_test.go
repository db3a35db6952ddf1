// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"bufio"
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Label values and help text are escaped as the format says, and the
// parser reads back exactly what was written.
func TestExpositionEscapes(t *testing.T) {
	var b bytes.Buffer
	e := &expo{w: bufio.NewWriter(&b)}
	e.family("x_total", "counter", "a \\ help\nwith a newline and \"quotes\"")
	e.sample("x_total", 3, "agent", "a\"b\\c\nd", "check", "é")
	e.family("y", "gauge", "infinities")
	e.sample("y", math.Inf(1), "k", "+")
	e.sample("y", math.Inf(-1), "k", "-")
	require.NoError(t, e.w.Flush())
	assert.Equal(t, `# HELP x_total a \\ help\nwith a newline and "quotes"
# TYPE x_total counter
x_total{agent="a\"b\\c\nd",check="é"} 3
# HELP y infinities
# TYPE y gauge
y{k="+"} +Inf
y{k="-"} -Inf
`, b.String())

	mfs, err := parseText(&b)
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "x_total" {
			got := map[string]string{}
			for _, l := range mf.GetMetric()[0].GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			assert.Equal(t, map[string]string{"agent": "a\"b\\c\nd", "check": "é"}, got)
			assert.Equal(t, "a \\ help\nwith a newline and \"quotes\"", mf.GetHelp())
		}
	}
}

// A full scrape parses, and carries the process's own series.
func TestExpositionHasProcessSeries(t *testing.T) {
	m := New(Options{})
	script(m)
	mfs, err := gather(m)
	require.NoError(t, err)
	names := map[string]float64{}
	for _, mf := range mfs {
		if len(mf.GetMetric()) == 1 {
			mt := mf.GetMetric()[0]
			names[mf.GetName()] = mt.GetGauge().GetValue() + mt.GetCounter().GetValue()
		}
	}
	for _, n := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_cpu_seconds_total",
		"process_resident_memory_bytes", "process_open_fds", "process_max_fds", "process_start_time_seconds"} {
		assert.Greater(t, names[n], 0.0, n)
	}
}

// A histogram's buckets are cumulative and a value on a bound counts in it.
func TestHistogramBuckets(t *testing.T) {
	h := newHistogram("h", "h", []float64{1, 2})
	for _, v := range []float64{0.5, 1, 1.5, 2, 3} {
		h.observe(v)
	}
	var b bytes.Buffer
	e := &expo{w: bufio.NewWriter(&b)}
	h.write(e)
	require.NoError(t, e.w.Flush())
	assert.Contains(t, b.String(), "h_bucket{le=\"1\"} 2\nh_bucket{le=\"2\"} 4\nh_bucket{le=\"+Inf\"} 5\nh_sum 8\nh_count 5\n")
}
