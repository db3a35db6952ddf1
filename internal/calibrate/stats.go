// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package calibrate

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/display"
)

// CheckStats is what `hermeskilld calibrate` reports for one check: how
// often it killed, and, of the kills operators labelled, how many were
// right.
type CheckStats struct {
	Check string `json:"check"` // the certificates' trigger_check
	// Kills counts enforce-mode certificates (the agent was killed);
	// ShadowKills shadow-mode ones (it would have been).
	Kills       int `json:"kills"`
	ShadowKills int `json:"shadow_kills"`
	// Labelled counts the certificates, of either mode, with a label;
	// TruePositives + FalsePositives == Labelled. Shadow certificates
	// count: labelling them is how a threshold is tuned before it is
	// enforced.
	Labelled       int `json:"labelled"`
	TruePositives  int `json:"true_positives"`
	FalsePositives int `json:"false_positives"`
	// Precision is TruePositives / Labelled; nil when nothing is labelled.
	Precision *float64 `json:"precision"`
	// MedianTimeToDeath is the median of terminated_at - triggered_at over
	// the enforce-mode kills that have both; nil when none has.
	MedianTimeToDeath *time.Duration `json:"-"`
	// Reached counts the enforce-mode kills by the stage the ladder
	// reached: "cooperative", "sigterm", "sigkill" (or "none").
	Reached map[string]int `json:"reached"`
}

// MarshalJSON writes MedianTimeToDeath as median_time_to_death_s, seconds
// (null when there is none).
func (s CheckStats) MarshalJSON() ([]byte, error) {
	type plain CheckStats // without the methods
	w := struct {
		plain
		MedianS *float64 `json:"median_time_to_death_s"`
	}{plain: plain(s)}
	if s.MedianTimeToDeath != nil {
		v := s.MedianTimeToDeath.Seconds()
		w.MedianS = &v
	}
	if w.Reached == nil {
		w.Reached = map[string]int{}
	}
	return json.Marshal(w)
}

// UnmarshalJSON is the inverse of MarshalJSON (the median to the
// nanosecond).
func (s *CheckStats) UnmarshalJSON(b []byte) error {
	type plain CheckStats
	var w struct {
		plain
		MedianS *float64 `json:"median_time_to_death_s"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = CheckStats(w.plain)
	if w.MedianS != nil {
		d := time.Duration(*w.MedianS * float64(time.Second))
		s.MedianTimeToDeath = &d
	}
	return nil
}

// Compute draws the statistics of each check from the certificates of
// entries (certs.List; entries that could not be read are skipped) and the
// labels (ReadLabels), one CheckStats per trigger_check, sorted by check.
//
// Only certificates triggered at or after since count (the zero time: all).
// External deaths (trigger_type "external": the OOM killer, …) are not a
// check's decision and are left out. A label counts when it names a
// certificate that counts; when a certificate has several labels the last
// one (in labels' order, which is the file's) wins.
func Compute(entries []certs.Entry, labels []Label, since time.Time) []CheckStats {
	verdict := make(map[string]string, len(labels))
	for _, l := range labels {
		verdict[l.CertID] = l.Verdict
	}
	byCheck := map[string]*CheckStats{}
	ttd := map[string][]time.Duration{}
	for _, e := range entries {
		c := e.Cert
		if c == nil || c.TriggerType == certs.TriggerExternal || c.Mode == certs.ModePaused || c.TriggeredAt.Before(since) {
			continue // a pause record is no kill: the kill, if one follows, has its certificate
		}
		s := byCheck[c.TriggerCheck]
		if s == nil {
			s = &CheckStats{Check: c.TriggerCheck, Reached: map[string]int{}}
			byCheck[c.TriggerCheck] = s
		}
		switch c.Mode {
		case certs.ModeShadow:
			s.ShadowKills++
		default:
			s.Kills++
			s.Reached[c.Escalation.Reached]++
			if !c.TriggeredAt.IsZero() && !c.TerminatedAt.IsZero() && !c.TerminatedAt.Before(c.TriggeredAt) {
				ttd[c.TriggerCheck] = append(ttd[c.TriggerCheck], c.TerminatedAt.Sub(c.TriggeredAt))
			}
		}
		switch verdict[c.CertID] {
		case TruePositive:
			s.Labelled++
			s.TruePositives++
		case FalsePositive:
			s.Labelled++
			s.FalsePositives++
		}
	}
	out := make([]CheckStats, 0, len(byCheck))
	for check, s := range byCheck {
		if s.Labelled > 0 {
			p := float64(s.TruePositives) / float64(s.Labelled)
			s.Precision = &p
		}
		if d, ok := median(ttd[check]); ok {
			s.MedianTimeToDeath = &d
		}
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b CheckStats) int { return strings.Compare(a.Check, b.Check) })
	return out
}

// median of ds (the mean of the middle two for an even count).
func median(ds []time.Duration) (time.Duration, bool) {
	if len(ds) == 0 {
		return 0, false
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	n := len(ds)
	if n%2 == 1 {
		return ds[n/2], true
	}
	return ds[n/2-1] + (ds[n/2]-ds[n/2-1])/2, true
}

// stageOrder is the ladder's order, for Reached in the table.
var stageOrder = []string{certs.ReachedNone, certs.ReachedCooperative, certs.ReachedSigterm, certs.ReachedSigkill}

// RenderTable writes stats as an aligned table for a person:
//
//	CHECK              KILLS  SHADOW  LABELLED  TP  FP  PRECISION  MEDIAN TTD  REACHED
//	heartbeat_timeout  4      0       3         2   1   66.7%      2.5s        cooperative 1, sigterm 1, sigkill 2
//
// A precision or median that does not exist is "-".
func RenderTable(w io.Writer, stats []CheckStats) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tKILLS\tSHADOW\tLABELLED\tTP\tFP\tPRECISION\tMEDIAN TTD\tREACHED")
	for _, s := range stats {
		prec, ttd := "-", "-"
		if s.Precision != nil {
			prec = strconv.FormatFloat(*s.Precision*100, 'f', 1, 64) + "%"
		}
		if s.MedianTimeToDeath != nil {
			ttd = s.MedianTimeToDeath.Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", display.Clean(s.Check), s.Kills, s.ShadowKills,
			s.Labelled, s.TruePositives, s.FalsePositives, prec, ttd, reachedText(s.Reached))
	}
	return tw.Flush()
}

// reachedText is "cooperative 1, sigterm 1, sigkill 2": ladder stages in
// order, then any other value, "-" for none.
func reachedText(r map[string]int) string {
	var parts []string
	for _, st := range stageOrder {
		if n := r[st]; n > 0 {
			parts = append(parts, st+" "+strconv.Itoa(n))
		}
	}
	var other []string
	for st, n := range r {
		if n > 0 && !slices.Contains(stageOrder, st) {
			other = append(other, display.Clean(cmp.Or(st, `""`))+" "+strconv.Itoa(n))
		}
	}
	slices.Sort(other)
	parts = append(parts, other...)
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
