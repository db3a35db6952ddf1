// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Checks are the symptom checks (yaml: checks). A zero duration and a nil
// pointer mean the check is off; a non-nil pointer always has at least one
// threshold set. The timeouts merge key by key over the daemon's defaults;
// a check with thresholds is one value, replaced as a whole.
type Checks struct {
	StartupTimeout      time.Duration `yaml:"startup_timeout"`       // READY or a first heartbeat within this; defaults to heartbeat_timeout, at least 10s (see Normalize)
	HeartbeatTimeout    time.Duration `yaml:"heartbeat_timeout"`     // a heartbeat within this; also WATCHDOG_USEC
	HeartbeatTimeoutMin time.Duration `yaml:"heartbeat_timeout_min"` // lowest WATCHDOG_USEC an agent may set (default 100ms, lowered to the max when above it)
	HeartbeatTimeoutMax time.Duration `yaml:"heartbeat_timeout_max"` // highest WATCHDOG_USEC an agent may set (default heartbeat_timeout)
	ProgressTimeout     time.Duration `yaml:"progress_timeout"`      // PROGRESS must increase within this
	MaxRuntime          time.Duration `yaml:"max_runtime"`           // wall-clock limit
	MaxExtension        time.Duration `yaml:"max_extension"`         // how far EXTEND_TIMEOUT_USEC in a row may push the startup, heartbeat or stop deadline (default DefaultMaxExtension; 0 = the default)
	SampleInterval      time.Duration `yaml:"sample_interval"`       // how often kernel metrics are read (default 1s)

	Memory      *Sustained `yaml:"memory" config:"size"` // tree RSS in bytes
	CPUSpin     *CPUSpin   `yaml:"cpu_spin"`
	Procs       *Sustained `yaml:"procs"`        // processes+threads in the tree
	FDs         *Sustained `yaml:"fds"`          // open file descriptors in the tree
	Tokens      *Limit     `yaml:"tokens"`       // cumulative TOKENS
	Cost        *CostLimit `yaml:"cost"`         // cumulative COST_USD
	ToolLoop    *ToolLoop  `yaml:"tool_loop"`    // {repeats} or a bare number
	ErrorStreak *Limit     `yaml:"error_streak"` // ERRORs with no progress between
	Steps       *Limit     `yaml:"steps"`        // the PROGRESS value
	Denials     *Limit     `yaml:"denials"`      // what Landlock refused the agent (writes outside writable:, signals out of its domain)

	// The rates: what was spent, asked for or counted in the last `per`
	// (a sliding window), metered with the gateway as tokens and cost are.
	CostRate     *CostRate `yaml:"cost_rate"`     // USD
	RequestsRate *Rate     `yaml:"requests_rate"` // LLM requests; usage reports without the gateway
	TokensRate   *Rate     `yaml:"tokens_rate"`   // tokens

	// Egress is network: allowlist's: what its egress proxy refused and
	// passed, over the run or within a sliding window.
	Egress *Egress `yaml:"egress"`
}

// Sustained is a kernel-sampled threshold that must hold for a while.
type Sustained struct {
	Warn int64         `yaml:"warn"` // warning threshold; 0 = no warning
	Kill int64         `yaml:"kill"` // terminal threshold; 0 = no kill
	For  time.Duration `yaml:"for"`  // how long the value must stay above a threshold; 0 = the first sample above
}

// Limit is a threshold on a counter the agent reports.
type Limit struct {
	Warn int64 `yaml:"warn"` // 0 = no warning
	Kill int64 `yaml:"kill"` // 0 = no kill
}

// CostLimit is a threshold on the agent's reported spend, in USD.
type CostLimit struct {
	Warn float64 `yaml:"warn"` // 0 = no warning
	Kill float64 `yaml:"kill"` // 0 = no kill
}

// Rate is a threshold on a count within a sliding window: what was added
// in the last Per.
type Rate struct {
	Warn int64         `yaml:"warn"` // 0 = no warning
	Kill int64         `yaml:"kill"` // 0 = no kill
	Per  time.Duration `yaml:"per"`  // the window; required, at least MinRatePer
}

// CostRate is a threshold on spend within a sliding window, in USD.
type CostRate struct {
	Warn float64       `yaml:"warn"` // 0 = no warning
	Kill float64       `yaml:"kill"` // 0 = no kill
	Per  time.Duration `yaml:"per"`  // the window; required, at least MinRatePer
}

// Egress is the egress check: thresholds on the requests the egress proxy
// refused and on the bytes it passed (both ways), counted over the run,
// or within the last Per when it is set.
type Egress struct {
	Refusals     int64         `yaml:"refusals"`                 // kill when the refusals go over this; 0 = none
	RefusalsWarn int64         `yaml:"refusals_warn"`            // warn when they go over this; 0 = none
	Bytes        int64         `yaml:"bytes" config:"size"`      // kill when the bytes go over this; 0 = none
	BytesWarn    int64         `yaml:"bytes_warn" config:"size"` // warn when they go over this; 0 = none
	Per          time.Duration `yaml:"per"`                      // the sliding window, at least MinRatePer; 0 = the whole run
}

// MinRatePer is the shortest window of a rate check. The window is kept in
// steps of a sixtieth of it: a rate limits a loop's spend over seconds to
// hours, not a burst at one instant.
const MinRatePer = time.Second

// CPUSpin is the CPU spin check.
type CPUSpin struct {
	Percent             float64       `yaml:"percent"`               // tree CPU in percent of one CPU (as top shows it; 200 = two CPUs busy)
	For                 time.Duration `yaml:"for"`                   // how long it must stay above; 0 = the first sample above
	OnlyWithoutProgress bool          `yaml:"only_without_progress"` // fire only while PROGRESS does not increase
}

// ToolLoop is the tool loop check.
type ToolLoop struct {
	Repeats int `yaml:"repeats" config:"short"` // the same call (or cycle of 2-3 calls) this many times in a row; >= 2
}

var (
	_ check = (*Sustained)(nil)
	_ check = (*Limit)(nil)
	_ check = (*CostLimit)(nil)
	_ check = (*Rate)(nil)
	_ check = (*CostRate)(nil)
	_ check = (*CPUSpin)(nil)
	_ check = (*ToolLoop)(nil)
	_ check = (*Egress)(nil)
)

func (s *Sustained) active() bool { return s.Warn != 0 || s.Kill != 0 }
func (l *Limit) active() bool     { return l.Warn != 0 || l.Kill != 0 }
func (l *CostLimit) active() bool { return l.Warn != 0 || l.Kill != 0 }
func (s *CPUSpin) active() bool   { return s.Percent != 0 }
func (t *ToolLoop) active() bool  { return t.Repeats != 0 }
func (r *Rate) active() bool      { return r.Warn != 0 || r.Kill != 0 }
func (r *CostRate) active() bool  { return r.Warn != 0 || r.Kill != 0 }
func (e *Egress) active() bool {
	return e.Refusals != 0 || e.RefusalsWarn != 0 || e.Bytes != 0 || e.BytesWarn != 0
}

func (s *Sustained) problems(key string, count func(int64) string) []problem {
	return warnAboveKill(key, s.Warn, s.Kill, count)
}

func (l *Limit) problems(key string, count func(int64) string) []problem {
	return warnAboveKill(key, l.Warn, l.Kill, count)
}

func (l *CostLimit) problems(key string, _ func(int64) string) []problem {
	return warnAboveKill(key, l.Warn, l.Kill, func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) })
}

func (r *Rate) problems(key string, count func(int64) string) []problem {
	return append(perProblems(key, r.Per), warnAboveKill(key, r.Warn, r.Kill, count)...)
}

func (r *CostRate) problems(key string, _ func(int64) string) []problem {
	return append(perProblems(key, r.Per), warnAboveKill(key, r.Warn, r.Kill, func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) })...)
}

// perProblems are those of a rate's window: required, at least MinRatePer.
// A missing one is located at its check.
func perProblems(key string, per time.Duration) []problem {
	switch {
	case per == 0:
		return []problem{{key: key + ".per", at: key, kind: ErrMissing, msg: "required: the window the thresholds count over, such as 1m"}}
	case per < MinRatePer:
		return []problem{{key: key + ".per", kind: ErrBadValue, msg: fmt.Sprintf("must be at least %s, got %s", FormatDuration(MinRatePer), FormatDuration(per))}}
	}
	return nil
}

func (s *CPUSpin) problems(string, func(int64) string) []problem { return nil }

func (e *Egress) problems(key string, _ func(int64) string) []problem {
	var ps []problem
	if e.Per != 0 {
		ps = perProblems(key, e.Per)
	}
	if e.RefusalsWarn > 0 && e.Refusals > 0 && e.RefusalsWarn > e.Refusals {
		ps = append(ps, problem{key: key, at: key + ".refusals_warn", kind: ErrConflict, msg: fmt.Sprintf("refusals_warn %d is above refusals %d", e.RefusalsWarn, e.Refusals)})
	}
	if e.BytesWarn > 0 && e.Bytes > 0 && e.BytesWarn > e.Bytes {
		ps = append(ps, problem{key: key, at: key + ".bytes_warn", kind: ErrConflict, msg: fmt.Sprintf("bytes_warn %s is above bytes %s", FormatSize(e.BytesWarn), FormatSize(e.Bytes))})
	}
	return ps
}

func (t *ToolLoop) problems(key string, _ func(int64) string) []problem {
	if t.Repeats == 1 {
		return []problem{{key: key, at: key + ".repeats", kind: ErrBadValue, msg: "repeats must be at least 2 (or 0 for off), got 1"}}
	}
	return nil
}

// warnAboveKill is the problem of a warning threshold above the kill one,
// located at the warn key.
func warnAboveKill[T int64 | float64](key string, warn, kill T, format func(T) string) []problem {
	if warn > 0 && kill > 0 && warn > kill {
		return []problem{{key: key, at: key + ".warn", kind: ErrConflict, msg: fmt.Sprintf("warn %s is above kill %s", format(warn), format(kill))}}
	}
	return nil
}

func (s *Sustained) describe(count func(int64) string) string {
	return warnKill(s.Warn, s.Kill, count) + forText(s.For)
}

func (l *Limit) describe(count func(int64) string) string { return warnKill(l.Warn, l.Kill, count) }

func (l *CostLimit) describe(func(int64) string) string {
	return warnKill(l.Warn, l.Kill, func(v float64) string { return fmt.Sprintf("$%.2f", v) })
}

func (r *Rate) describe(count func(int64) string) string {
	return warnKill(r.Warn, r.Kill, count) + " per " + FormatDuration(r.Per)
}

func (r *CostRate) describe(func(int64) string) string {
	return warnKill(r.Warn, r.Kill, func(v float64) string { return fmt.Sprintf("$%.2f", v) }) + " per " + FormatDuration(r.Per)
}

func (s *CPUSpin) describe(func(int64) string) string {
	d := fmt.Sprintf("%.0f%%", s.Percent) + forText(s.For)
	if s.OnlyWithoutProgress {
		d += " without progress"
	}
	return d
}

func (t *ToolLoop) describe(func(int64) string) string { return fmt.Sprintf("%d repeats", t.Repeats) }

// describe: "refusals warn 5, kill 20; bytes kill 1GiB per 1m".
func (e *Egress) describe(func(int64) string) string {
	var parts []string
	if e.Refusals != 0 || e.RefusalsWarn != 0 {
		parts = append(parts, "refusals "+warnKill(e.RefusalsWarn, e.Refusals, func(v int64) string { return fmt.Sprint(v) }))
	}
	if e.Bytes != 0 || e.BytesWarn != 0 {
		parts = append(parts, "bytes "+warnKill(e.BytesWarn, e.Bytes, FormatSize))
	}
	d := strings.Join(parts, "; ")
	if e.Per != 0 {
		d += " per " + FormatDuration(e.Per)
	}
	return d
}

// warnKill describes thresholds: "warn 1GiB, kill 2GiB", "kill 256".
func warnKill[T int64 | float64](warn, kill T, format func(T) string) string {
	switch {
	case warn != 0 && kill != 0:
		return "warn " + format(warn) + ", kill " + format(kill)
	case warn != 0:
		return "warn " + format(warn)
	default:
		return "kill " + format(kill)
	}
}

func forText(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return " for " + FormatDuration(d)
}

// Describe lists the checks that are on, in the order of the schema, as
// `hermeskilld status` shows them: {heartbeat_timeout 30s},
// {memory warn 1GiB, kill 2GiB for 10s}, {cost warn $4.00, kill $5.00},
// {cpu_spin 95% for 2m without progress}, {tool_loop 5 repeats}. A key
// whose value is 0 or nil is left out.
func (c Checks) Describe() []KV { return describeKeys(reflect.ValueOf(c), false) }

// dropInactive turns off the checks that have no threshold (memory: {}).
func (c *Checks) dropInactive() {
	for _, v := range fields(reflect.ValueOf(c).Elem()) {
		if ch, ok := v.Interface().(check); ok && !v.IsNil() && !ch.active() {
			v.SetZero()
		}
	}
}

// problems are the rules between the keys of checks; schemaProblems
// applies those of each key.
func (c *Checks) problems() []problem {
	var ps []problem
	conflict := func(key, format string, args ...any) {
		ps = append(ps, problem{key: "checks." + key, kind: ErrConflict, msg: fmt.Sprintf(format, args...)})
	}
	if c.SampleInterval < minSampleInterval {
		ps = append(ps, problem{key: "checks.sample_interval", kind: ErrBadValue, msg: "must be at least " + FormatDuration(minSampleInterval)})
	}
	if c.HeartbeatTimeoutMax > 0 {
		if c.HeartbeatTimeoutMin > c.HeartbeatTimeoutMax {
			conflict("heartbeat_timeout_min", "%s is above heartbeat_timeout_max %s", FormatDuration(c.HeartbeatTimeoutMin), FormatDuration(c.HeartbeatTimeoutMax))
		}
		if c.HeartbeatTimeout > c.HeartbeatTimeoutMax {
			conflict("heartbeat_timeout_max", "%s is below heartbeat_timeout %s", FormatDuration(c.HeartbeatTimeoutMax), FormatDuration(c.HeartbeatTimeout))
		}
	}
	return ps
}
