// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The comparisons of client_golang's testutil:
// both sides in the text exposition format, restricted to names, one line
// per sample, sorted (so the order of series and of labels does not matter,
// every value does).

// gather parses what m writes with prometheus/common's own parser, which
// also refuses a malformed exposition (a family split or repeated, a bad
// escape, a bad value).
func gather(m io.WriterTo) ([]*dto.MetricFamily, error) {
	var b bytes.Buffer
	if _, err := m.WriteTo(&b); err != nil {
		return nil, err
	}
	return parseText(&b)
}

func gatherAndCompare(m io.WriterTo, expected string, names ...string) error {
	got, err := gather(m)
	if err != nil {
		return err
	}
	return compare(got, expected, names)
}

func scrapeAndCompare(url, expected string, names ...string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	got, err := parseText(resp.Body)
	if err != nil {
		return err
	}
	return compare(got, expected, names)
}

func gatherAndCount(m io.WriterTo, names ...string) (int, error) {
	got, err := gather(m)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, mf := range got {
		if slices.Contains(names, mf.GetName()) {
			n += len(mf.GetMetric())
		}
	}
	return n, nil
}

func parseText(r io.Reader) ([]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	m, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	var out []*dto.MetricFamily
	for _, mf := range m {
		out = append(out, mf)
	}
	return out, nil
}

func compare(got []*dto.MetricFamily, expected string, names []string) error {
	want, err := parseText(strings.NewReader(expected))
	if err != nil {
		return fmt.Errorf("expected text: %w", err)
	}
	g, err := lines(got, names)
	if err != nil {
		return err
	}
	w, err := lines(want, names)
	if err != nil {
		return err
	}
	if g != w {
		return fmt.Errorf("metrics differ\n--- want\n%s--- got\n%s", w, g)
	}
	return nil
}

func lines(mfs []*dto.MetricFamily, names []string) (string, error) {
	var all []string
	for _, mf := range mfs {
		if len(names) > 0 && !slices.Contains(names, mf.GetName()) {
			continue
		}
		var b bytes.Buffer
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			return "", err
		}
		all = append(all, strings.Split(strings.TrimSpace(b.String()), "\n")...)
	}
	slices.Sort(all)
	return strings.Join(all, "\n") + "\n", nil
}
