package config

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"
)

// rawAgent is an agent file (or a daemon's defaults section) as written:
// a nil field was not set, so merging can tell "not set" from "set to the
// zero value" (heartbeat_timeout: 0 turns off an inherited check).
type rawAgent struct {
	ID         *string
	Labels     map[string]string // nil: not set
	Command    []string          // nil: not set
	User       *string
	Cwd        *string
	Env        map[string]string // nil: not set
	Mode       *Mode
	AfterKill  *AfterKill
	Restart    rawRestart
	Escalation rawEscalation
	Checks     rawChecks
}

type rawRestart struct {
	Policy      *RestartPolicy
	Backoff     *time.Duration
	MaxBackoff  *time.Duration
	MaxRestarts *int
	Window      *time.Duration
	StableAfter *time.Duration
}

type rawEscalation struct {
	CoopSignal *syscall.Signal
	CoopGrace  *time.Duration
	TermGrace  *time.Duration
	DumpWait   *time.Duration
}

// rawChecks: the timeouts merge one by one; a threshold check (memory, …)
// is one value, replaced as a whole. A check set to {} or to no value is
// non-nil here and nil once resolved: it turns off an inherited check.
type rawChecks struct {
	StartupTimeout      *time.Duration
	HeartbeatTimeout    *time.Duration
	HeartbeatTimeoutMin *time.Duration
	HeartbeatTimeoutMax *time.Duration
	ProgressTimeout     *time.Duration
	MaxRuntime          *time.Duration
	MaxExtension        *time.Duration
	SampleInterval      *time.Duration
	Memory              *Sustained
	CPUSpin             *CPUSpin
	Procs               *Sustained
	FDs                 *Sustained
	Tokens              *Limit
	Cost                *CostLimit
	ToolLoop            *ToolLoop
	ErrorStreak         *Limit
	Steps               *Limit
}

// defaultableKeys are the agent keys a daemon's defaults section may set.
var defaultableKeys = []string{"labels", "user", "env", "mode", "after_kill", "restart", "escalation", "checks"}

// Defaults are the daemon file's `defaults:` section: agent settings every
// agent file inherits unless it sets them itself. The zero value (or a nil
// *Defaults) means no defaults beyond the built-in ones.
type Defaults struct {
	raw rawAgent
}

// Agent returns what an agent file that sets nothing would get: the
// built-in defaults overlaid with these (not normalized).
func (d *Defaults) Agent() *Agent {
	if d == nil {
		return DefaultAgent()
	}
	return resolve(d.raw)
}

// LoadAgent reads and parses an agent file; see ParseAgent.
func LoadAgent(path string, defaults *Defaults) (*Agent, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("agent file: %w", err)
	}
	return ParseAgent(data, path, defaults)
}

// ParseAgent parses an agent file named source over defaults (nil: none),
// field by field: a key set in the file wins, a key it does not set is
// inherited; labels and env are merged (the file's keys win); a threshold
// check set in the file (memory: …) replaces that check of the defaults as
// a whole, and memory: {} turns it off. An empty document is valid (all
// defaults). id and command are not required here (see Validate).
//
// The result is not normalized: apply overrides (flags), then call
// Normalize and Validate. Every error wraps ErrInvalid and names
// source:line; several are joined.
func ParseAgent(data []byte, source string, defaults *Defaults) (*Agent, error) {
	d := newDecoder(source)
	root, ok := d.document(data)
	var raw rawAgent
	if ok && root != nil {
		raw = d.agent(root, "", false)
	}
	if len(d.errs) > 0 {
		return nil, d.err()
	}
	if defaults != nil {
		raw = overlay(defaults.raw, raw)
	}
	a := resolve(raw)
	a.Source = source
	d.report(semanticProblems(raw, a), "")
	if len(d.errs) > 0 {
		return nil, d.err()
	}
	return a, nil
}

// semanticProblems validates a resolved agent as it will run (normalized),
// plus what only the raw layer knows: whether heartbeat_timeout_min was
// set explicitly (Normalize lowers the default one silently).
func semanticProblems(r rawAgent, a *Agent) []problem {
	n := a.Clone()
	n.Normalize()
	var ps []problem
	if r.Checks.HeartbeatTimeoutMin != nil {
		lo, hi := *r.Checks.HeartbeatTimeoutMin, n.Checks.HeartbeatTimeoutMax
		if hi > 0 && lo > hi {
			what := "heartbeat_timeout_max"
			if r.Checks.HeartbeatTimeoutMax == nil {
				what = "heartbeat_timeout"
			}
			ps = append(ps, problem{key: "checks.heartbeat_timeout_min", kind: ErrConflict, msg: fmt.Sprintf("%s is above %s %s", FormatDuration(lo), what, FormatDuration(hi))})
		}
	}
	return append(ps, n.problems(false)...)
}

// agent decodes an agent mapping. With onlyDefaultable (the daemon's
// defaults section) the keys that name one agent are refused.
func (d *decoder) agent(n *yaml.Node, path string, onlyDefaultable bool) rawAgent {
	var r rawAgent
	fields := []field{
		{"id", func(p string, v *yaml.Node) { r.ID = ptrIf(d.nonEmpty(v, p)) }},
		{"labels", func(p string, v *yaml.Node) {
			if m, ok := d.stringMap(v, p); ok {
				r.Labels = m
			}
		}},
		{"command", func(p string, v *yaml.Node) {
			if l, ok := d.stringList(v, p); ok {
				if len(l) == 0 {
					d.errorf(deref(v), p, "must not be empty: the argv list such as [python3, agent.py]")
					return
				}
				r.Command = l
			}
		}},
		{"user", func(p string, v *yaml.Node) { r.User = ptrIf(d.nameOrID(v, p)) }},
		{"cwd", func(p string, v *yaml.Node) { r.Cwd = ptrIf(d.nonEmpty(v, p)) }},
		{"env", func(p string, v *yaml.Node) {
			if m, ok := d.stringMap(v, p); ok {
				r.Env = m
			}
		}},
		{"mode", func(p string, v *yaml.Node) {
			if s, ok := d.enum(v, p, string(ModeEnforce), string(ModeShadow)); ok {
				r.Mode = ptr(Mode(s))
			}
		}},
		{"after_kill", func(p string, v *yaml.Node) {
			if s, ok := d.enum(v, p, string(AfterKillQuarantine), string(AfterKillRestart)); ok {
				r.AfterKill = ptr(AfterKill(s))
			}
		}},
		{"restart", func(p string, v *yaml.Node) { d.restart(v, p, &r.Restart) }},
		{"escalation", func(p string, v *yaml.Node) { d.escalation(v, p, &r.Escalation) }},
		{"checks", func(p string, v *yaml.Node) { d.checks(v, p, &r.Checks) }},
	}
	var hint func(string) string
	if onlyDefaultable {
		all := fields
		fields = slices.DeleteFunc(slices.Clone(fields), func(f field) bool { return !slices.Contains(defaultableKeys, f.key) })
		hint = func(key string) string {
			if slices.ContainsFunc(all, func(f field) bool { return f.key == key }) {
				return fmt.Sprintf("%q cannot be defaulted: set it in each agent file (defaults may set %s)", key, strings.Join(defaultableKeys, ", "))
			}
			return ""
		}
	}
	d.mapping(n, path, fields, hint)
	return r
}

func (d *decoder) restart(n *yaml.Node, path string, r *rawRestart) {
	d.mapping(n, path, []field{
		{"policy", func(p string, v *yaml.Node) {
			if s, ok := d.enum(v, p, string(RestartNever), string(RestartOnFailure), string(RestartAlways)); ok {
				r.Policy = ptr(RestartPolicy(s))
			}
		}},
		{"backoff", d.durationTo(&r.Backoff)},
		{"max_backoff", d.durationTo(&r.MaxBackoff)},
		{"max_restarts", func(p string, v *yaml.Node) { r.MaxRestarts = ptrIf(d.smallInt(v, p)) }},
		{"window", d.durationTo(&r.Window)},
		{"stable_after", d.durationTo(&r.StableAfter)},
	}, nil)
}

func (d *decoder) escalation(n *yaml.Node, path string, e *rawEscalation) {
	d.mapping(n, path, []field{
		{"coop_signal", func(p string, v *yaml.Node) { e.CoopSignal = ptrIf(d.signal(v, p)) }},
		{"coop_grace", d.durationTo(&e.CoopGrace)},
		{"term_grace", d.durationTo(&e.TermGrace)},
		{"dump_wait", d.durationTo(&e.DumpWait)},
	}, nil)
}

func (d *decoder) checks(n *yaml.Node, path string, c *rawChecks) {
	d.mapping(n, path, []field{
		{"startup_timeout", d.durationTo(&c.StartupTimeout)},
		{"heartbeat_timeout", d.durationTo(&c.HeartbeatTimeout)},
		{"heartbeat_timeout_min", d.durationTo(&c.HeartbeatTimeoutMin)},
		{"heartbeat_timeout_max", d.durationTo(&c.HeartbeatTimeoutMax)},
		{"progress_timeout", d.durationTo(&c.ProgressTimeout)},
		{"max_runtime", d.durationTo(&c.MaxRuntime)},
		{"max_extension", d.durationTo(&c.MaxExtension)},
		{"sample_interval", d.durationTo(&c.SampleInterval)},
		{"memory", func(p string, v *yaml.Node) { c.Memory = d.sustained(v, p, d.size) }},
		{"cpu_spin", func(p string, v *yaml.Node) { c.CPUSpin = d.cpuSpin(v, p) }},
		{"procs", func(p string, v *yaml.Node) { c.Procs = d.sustained(v, p, d.integer) }},
		{"fds", func(p string, v *yaml.Node) { c.FDs = d.sustained(v, p, d.integer) }},
		{"tokens", func(p string, v *yaml.Node) { c.Tokens = d.limit(v, p) }},
		{"cost", func(p string, v *yaml.Node) { c.Cost = d.costLimit(v, p) }},
		{"tool_loop", func(p string, v *yaml.Node) { c.ToolLoop = d.toolLoop(v, p) }},
		{"error_streak", func(p string, v *yaml.Node) { c.ErrorStreak = d.limit(v, p) }},
		{"steps", func(p string, v *yaml.Node) { c.Steps = d.limit(v, p) }},
	}, nil)
}

func (d *decoder) sustained(n *yaml.Node, path string, threshold func(*yaml.Node, string) (int64, bool)) *Sustained {
	s := &Sustained{}
	d.mapping(n, path, []field{
		{"warn", func(p string, v *yaml.Node) { s.Warn, _ = threshold(v, p) }},
		{"kill", func(p string, v *yaml.Node) { s.Kill, _ = threshold(v, p) }},
		{"for", func(p string, v *yaml.Node) { s.For, _ = d.duration(v, p) }},
	}, nil)
	return s
}

func (d *decoder) limit(n *yaml.Node, path string) *Limit {
	l := &Limit{}
	d.mapping(n, path, []field{
		{"warn", func(p string, v *yaml.Node) { l.Warn, _ = d.integer(v, p) }},
		{"kill", func(p string, v *yaml.Node) { l.Kill, _ = d.integer(v, p) }},
	}, nil)
	return l
}

func (d *decoder) costLimit(n *yaml.Node, path string) *CostLimit {
	l := &CostLimit{}
	d.mapping(n, path, []field{
		{"warn", func(p string, v *yaml.Node) { l.Warn, _ = d.number(v, p) }},
		{"kill", func(p string, v *yaml.Node) { l.Kill, _ = d.number(v, p) }},
	}, nil)
	return l
}

func (d *decoder) cpuSpin(n *yaml.Node, path string) *CPUSpin {
	s := &CPUSpin{}
	d.mapping(n, path, []field{
		{"percent", func(p string, v *yaml.Node) { s.Percent, _ = d.number(v, p) }},
		{"for", func(p string, v *yaml.Node) { s.For, _ = d.duration(v, p) }},
		{"only_without_progress", func(p string, v *yaml.Node) { s.OnlyWithoutProgress, _ = d.boolean(v, p) }},
	}, nil)
	return s
}

// toolLoop accepts {repeats: N} and the short form N.
func (d *decoder) toolLoop(n *yaml.Node, path string) *ToolLoop {
	t := &ToolLoop{}
	if m := deref(n); m != nil && m.Kind == yaml.ScalarNode && !isNull(m) {
		t.Repeats, _ = d.smallInt(m, path)
		return t
	}
	d.mapping(n, path, []field{
		{"repeats", func(p string, v *yaml.Node) { t.Repeats, _ = d.smallInt(v, p) }},
	}, nil)
	return t
}

// durationTo is a field function that stores a duration in *dst.
func (d *decoder) durationTo(dst **time.Duration) func(string, *yaml.Node) {
	return func(p string, v *yaml.Node) { *dst = ptrIf(d.duration(v, p)) }
}

func ptr[T any](v T) *T { return &v }

// ptrIf returns &v when ok, else nil: the value was not set (its error is
// already recorded).
func ptrIf[T any](v T, ok bool) *T {
	if !ok {
		return nil
	}
	return &v
}

// overlay merges top over base field by field (see ParseAgent).
func overlay(base, top rawAgent) rawAgent {
	return rawAgent{
		ID:        pick(top.ID, base.ID),
		Labels:    mergeMaps(base.Labels, top.Labels),
		Command:   pickSlice(top.Command, base.Command),
		User:      pick(top.User, base.User),
		Cwd:       pick(top.Cwd, base.Cwd),
		Env:       mergeMaps(base.Env, top.Env),
		Mode:      pick(top.Mode, base.Mode),
		AfterKill: pick(top.AfterKill, base.AfterKill),
		Restart: rawRestart{
			Policy:      pick(top.Restart.Policy, base.Restart.Policy),
			Backoff:     pick(top.Restart.Backoff, base.Restart.Backoff),
			MaxBackoff:  pick(top.Restart.MaxBackoff, base.Restart.MaxBackoff),
			MaxRestarts: pick(top.Restart.MaxRestarts, base.Restart.MaxRestarts),
			Window:      pick(top.Restart.Window, base.Restart.Window),
			StableAfter: pick(top.Restart.StableAfter, base.Restart.StableAfter),
		},
		Escalation: rawEscalation{
			CoopSignal: pick(top.Escalation.CoopSignal, base.Escalation.CoopSignal),
			CoopGrace:  pick(top.Escalation.CoopGrace, base.Escalation.CoopGrace),
			TermGrace:  pick(top.Escalation.TermGrace, base.Escalation.TermGrace),
			DumpWait:   pick(top.Escalation.DumpWait, base.Escalation.DumpWait),
		},
		Checks: rawChecks{
			StartupTimeout:      pick(top.Checks.StartupTimeout, base.Checks.StartupTimeout),
			HeartbeatTimeout:    pick(top.Checks.HeartbeatTimeout, base.Checks.HeartbeatTimeout),
			HeartbeatTimeoutMin: pick(top.Checks.HeartbeatTimeoutMin, base.Checks.HeartbeatTimeoutMin),
			HeartbeatTimeoutMax: pick(top.Checks.HeartbeatTimeoutMax, base.Checks.HeartbeatTimeoutMax),
			ProgressTimeout:     pick(top.Checks.ProgressTimeout, base.Checks.ProgressTimeout),
			MaxRuntime:          pick(top.Checks.MaxRuntime, base.Checks.MaxRuntime),
			MaxExtension:        pick(top.Checks.MaxExtension, base.Checks.MaxExtension),
			SampleInterval:      pick(top.Checks.SampleInterval, base.Checks.SampleInterval),
			Memory:              pick(top.Checks.Memory, base.Checks.Memory),
			CPUSpin:             pick(top.Checks.CPUSpin, base.Checks.CPUSpin),
			Procs:               pick(top.Checks.Procs, base.Checks.Procs),
			FDs:                 pick(top.Checks.FDs, base.Checks.FDs),
			Tokens:              pick(top.Checks.Tokens, base.Checks.Tokens),
			Cost:                pick(top.Checks.Cost, base.Checks.Cost),
			ToolLoop:            pick(top.Checks.ToolLoop, base.Checks.ToolLoop),
			ErrorStreak:         pick(top.Checks.ErrorStreak, base.Checks.ErrorStreak),
			Steps:               pick(top.Checks.Steps, base.Checks.Steps),
		},
	}
}

func pick[T any](top, base *T) *T {
	if top != nil {
		return top
	}
	return base
}

func pickSlice[T any](top, base []T) []T {
	if top != nil {
		return top
	}
	return base
}

// mergeMaps returns base's entries overridden by top's; nil when both are.
func mergeMaps(base, top map[string]string) map[string]string {
	if base == nil && top == nil {
		return nil
	}
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, top)
	return out
}

// resolve turns a raw agent into a typed one over DefaultAgent. The result
// shares no memory with r.
func resolve(r rawAgent) *Agent {
	a := DefaultAgent()
	set(&a.ID, r.ID)
	maps.Copy(a.Labels, r.Labels)
	a.Command = slices.Clone(r.Command)
	set(&a.User, r.User)
	set(&a.Cwd, r.Cwd)
	maps.Copy(a.Env, r.Env)
	set(&a.Mode, r.Mode)
	set(&a.AfterKill, r.AfterKill)

	set(&a.Restart.Policy, r.Restart.Policy)
	set(&a.Restart.Backoff, r.Restart.Backoff)
	set(&a.Restart.MaxBackoff, r.Restart.MaxBackoff)
	set(&a.Restart.MaxRestarts, r.Restart.MaxRestarts)
	set(&a.Restart.Window, r.Restart.Window)
	set(&a.Restart.StableAfter, r.Restart.StableAfter)

	set(&a.Escalation.CoopSignal, r.Escalation.CoopSignal)
	set(&a.Escalation.CoopGrace, r.Escalation.CoopGrace)
	set(&a.Escalation.TermGrace, r.Escalation.TermGrace)
	set(&a.Escalation.DumpWait, r.Escalation.DumpWait)

	c, rc := &a.Checks, &r.Checks
	set(&c.StartupTimeout, rc.StartupTimeout)
	set(&c.HeartbeatTimeout, rc.HeartbeatTimeout)
	set(&c.HeartbeatTimeoutMin, rc.HeartbeatTimeoutMin)
	set(&c.HeartbeatTimeoutMax, rc.HeartbeatTimeoutMax)
	set(&c.ProgressTimeout, rc.ProgressTimeout)
	set(&c.MaxRuntime, rc.MaxRuntime)
	set(&c.MaxExtension, rc.MaxExtension)
	set(&c.SampleInterval, rc.SampleInterval)
	c.Memory = clonePtr(rc.Memory)
	c.CPUSpin = clonePtr(rc.CPUSpin)
	c.Procs = clonePtr(rc.Procs)
	c.FDs = clonePtr(rc.FDs)
	c.Tokens = clonePtr(rc.Tokens)
	c.Cost = clonePtr(rc.Cost)
	c.ToolLoop = clonePtr(rc.ToolLoop)
	c.ErrorStreak = clonePtr(rc.ErrorStreak)
	c.Steps = clonePtr(rc.Steps)
	c.dropInactive()
	return a
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}
