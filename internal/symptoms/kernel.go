// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"fmt"
	"time"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// ObserveSample applies one kernel sample taken at now. Each kernel check
// fires when its condition has held continuously for its `for` duration
// (measured between samples, so its resolution is the sample interval).
func (e *Engine) ObserveSample(s Sample, now time.Time) []Symptom {
	out := e.Tick(now)
	c := e.cfg
	if c.Memory != nil {
		out = append(out, e.sustained(Memory, s.RSSBytes, c.Memory, now, sizeFmt, "RSS")...)
	}
	if c.Procs != nil {
		out = append(out, e.sustained(Procs, int64(s.Procs), c.Procs, now, countFmt, "processes+threads")...)
	}
	if c.FDs != nil && s.HaveFDs {
		out = append(out, e.sustained(FDs, int64(s.FDs), c.FDs, now, countFmt, "open file descriptors")...)
	}
	if c.CPUSpin != nil && c.CPUSpin.Percent > 0 {
		out = append(out, e.cpu(s.CPUPercent, now)...)
	}
	if c.Denials != nil && s.HaveDenials {
		out = append(out, e.denials(int64(s.Denials), now)...)
	}
	return out
}

// denials judges the count of Landlock's refusals: a count that only
// grows, so no `for`.
func (e *Engine) denials(n int64, now time.Time) []Symptom {
	l := e.cfg.Denials
	if l.Kill > 0 && n >= l.Kill {
		return e.fire(Symptom{At: now, Check: Denials, Severity: Terminal, Observed: count(n), Threshold: count(l.Kill),
			Message: fmt.Sprintf("%d accesses refused by its confinement (kill threshold %d)", n, l.Kill)})
	}
	if l.Warn > 0 && n >= l.Warn {
		return e.warn(Symptom{At: now, Check: Denials, Severity: Warning, Observed: count(n), Threshold: count(l.Warn),
			Message: fmt.Sprintf("%d accesses refused by its confinement (warning threshold %d)", n, l.Warn)})
	}
	return nil
}

func sizeFmt(v int64) string  { return config.FormatSize(v) }
func countFmt(v int64) string { return count(v) }

// sustainKey names one sustained condition: a check over its warning
// (Warning) or its kill threshold (Terminal).
type sustainKey struct {
	check Check
	level Severity
}

// held tracks how long a condition has held; it returns the duration (and
// true) while it holds, and forgets it as soon as it does not.
func (e *Engine) held(key sustainKey, cond bool, now time.Time) (time.Duration, bool) {
	if !cond {
		delete(e.sustain, key)
		return 0, false
	}
	since, ok := e.sustain[key]
	if !ok {
		since = now
		e.sustain[key] = now
	}
	return now.Sub(since), true
}

func (e *Engine) sustained(c Check, v int64, l *config.Sustained, now time.Time, f func(int64) string, what string) []Symptom {
	if d, ok := e.held(sustainKey{c, Terminal}, l.Kill > 0 && v > l.Kill, now); ok && d >= l.For {
		obs, thr := over(v, l.Kill, f)
		return e.fire(Symptom{At: now, Check: c, Severity: Terminal, Observed: obs, Threshold: thr,
			Message: fmt.Sprintf("%s %s over kill threshold %s%s", what, obs, thr, forText(l.For))})
	}
	d, ok := e.held(sustainKey{c, Warning}, l.Warn > 0 && v > l.Warn, now)
	if !ok {
		e.rearm(c)
		return nil
	}
	if d >= l.For {
		obs, thr := over(v, l.Warn, f)
		return e.warn(Symptom{At: now, Check: c, Severity: Warning, Observed: obs, Threshold: thr,
			Message: fmt.Sprintf("%s %s over warning threshold %s%s", what, obs, thr, forText(l.For))})
	}
	return nil
}

// over formats a value and the threshold it is over. A size rounded to the
// threshold's text ("2GiB over 2GiB") is given in bytes instead.
func over(v, threshold int64, f func(int64) string) (obs, thr string) {
	obs, thr = f(v), f(threshold)
	if obs == thr {
		obs = count(v) + "B"
	}
	return obs, thr
}

func (e *Engine) cpu(pct float64, now time.Time) []Symptom {
	l := e.cfg.CPUSpin
	key := sustainKey{CPUSpin, Terminal}
	cond := pct >= l.Percent
	if cond && l.OnlyWithoutProgress {
		if since, ok := e.sustain[key]; ok && e.st.LastProgressAt.After(since) {
			delete(e.sustain, key) // progress restarts the spin clock
		}
	}
	d, ok := e.held(key, cond, now)
	if !ok || d < l.For {
		return nil
	}
	msg := fmt.Sprintf("CPU %.0f%% of a core for %s (threshold %.0f%%)", pct, d.Round(time.Millisecond), l.Percent)
	if l.OnlyWithoutProgress {
		msg = fmt.Sprintf("CPU %.0f%% of a core for %s without progress (threshold %.0f%%)", pct, d.Round(time.Millisecond), l.Percent)
	}
	return e.fire(Symptom{At: now, Check: CPUSpin, Severity: Terminal,
		Observed: fmt.Sprintf("%.0f%%", pct), Threshold: fmt.Sprintf("%.0f%% for %s", l.Percent, l.For), Message: msg})
}

func forText(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return " for " + d.String()
}
