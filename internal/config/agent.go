// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/hermeskill/hermeskilld/internal/egress"
	"github.com/hermeskill/hermeskilld/internal/labels"
)

// Mode says whether terminal symptoms are acted on (yaml: mode).
type Mode string

// The modes.
const (
	ModeEnforce Mode = "enforce" // a terminal symptom starts the ladder
	ModeShadow  Mode = "shadow"  // a terminal symptom writes a certificate; nothing is signalled
)

// Network says what the agent's network is (yaml: network).
type Network string

// The network modes.
const (
	NetworkHost        Network = "host"         // the host's: everything the agent's user may reach
	NetworkGatewayOnly Network = "gateway-only" // its own namespace, only loopback: the gateway and the heartbeat sockets
	NetworkAllowlist   Network = "allowlist"    // as gateway-only, plus an egress proxy to the destinations of allow
)

// AfterKill says what the daemon does with an agent it killed (yaml: after_kill).
type AfterKill string

// The after_kill values.
const (
	AfterKillQuarantine AfterKill = "quarantine" // stays down until `hermeskilld release ID`
	AfterKillRestart    AfterKill = "restart"    // restarted with the restart backoff and limits
)

// OnBudget says what a money check's kill threshold does (yaml:
// on_budget): the money checks are those of spend (cost, tokens).
type OnBudget string

// The on_budget values.
const (
	OnBudgetKill  OnBudget = "kill"  // the ladder, as any check
	OnBudgetPause OnBudget = "pause" // the LLM requests held, the tree frozen, until `hermeskilld resume ID` or pause_timeout
)

// DefaultPauseTimeout is pause_timeout's default: how long a paused run
// waits for a resume before it is killed.
const DefaultPauseTimeout = time.Hour

// RestartPolicy says when the daemon restarts an agent that exited by itself
// (yaml: restart.policy).
type RestartPolicy string

// The restart policies.
const (
	RestartNever     RestartPolicy = "never"
	RestartOnFailure RestartPolicy = "on-failure" // a non-zero exit or a death by signal
	RestartAlways    RestartPolicy = "always"
)

// StartupFloor is the least startup_timeout derived from heartbeat_timeout
// (see Normalize); an explicit startup_timeout may be shorter.
const StartupFloor = 10 * time.Second

const (
	// DefaultMaxExtension is max_extension when it is unset or 0: how far
	// the agent's EXTEND_TIMEOUT_USEC messages in a row may push a deadline
	// beyond where it would be without them.
	DefaultMaxExtension = 30 * time.Minute

	defaultSampleInterval = time.Second
	minSampleInterval     = 10 * time.Millisecond
)

// Agent is one supervised agent: an agent file (daemon) or `supervise
// --config FILE` plus flags. Every field is set: DefaultAgent supplies what
// the file does not say. The tags are the schema (see schema.go); the
// docs/configuration.md describes each key.
type Agent struct {
	ID       string            `yaml:"id" config:"nonempty,perfile"`
	Labels   map[string]string `yaml:"labels"`                        // free-form metadata: selected by ps --selector, shown by status
	Command  []string          `yaml:"command" config:"perfile"`      // argv, never run through a shell
	User     string            `yaml:"user" config:"id"`              // name or numeric uid to run as; "" = hermeskilld's own user
	Cwd      string            `yaml:"cwd" config:"nonempty,perfile"` // absolute working directory; "" = hermeskilld's own
	Env      map[string]string `yaml:"env"`                           // added to (and overriding) hermeskilld's environment
	Writable []string          `yaml:"writable" config:"perfile"`     // absolute paths: the only ones the agent may write beneath (Landlock); nil = anywhere
	Network  Network           `yaml:"network" config:"oneof=host|gateway-only|allowlist,perfile"`
	// Allow is network: allowlist's destinations, HOST:PORT each
	// (egress.Parse): the only ones its egress proxy passes.
	Allow     []string  `yaml:"allow" config:"perfile"`
	Mode      Mode      `yaml:"mode" config:"oneof=enforce|shadow"`
	AfterKill AfterKill `yaml:"after_kill" config:"oneof=quarantine|restart"`
	// OnBudget and PauseTimeout: a money check's kill threshold pauses the
	// run instead (pause), for at most PauseTimeout before the kill.
	OnBudget     OnBudget      `yaml:"on_budget" config:"oneof=kill|pause"`
	PauseTimeout time.Duration `yaml:"pause_timeout"`
	Restart      Restart       `yaml:"restart"`
	Escalation   Escalation    `yaml:"escalation"`
	Checks       Checks        `yaml:"checks"`
	Gateway      Gateway       `yaml:"gateway" config:"perfile"` // supervise only: the daemon's gateway is in its own file
	// ControlPlane is supervise only (the daemon's is in its own file):
	// where supervise delivers its certificates and polls for kill
	// directives; nil = none. ParseAgent refuses it under the daemon.
	ControlPlane *ControlPlane `yaml:"control_plane" config:"perfile"`
	Source       string        // the file it came from; "" for flags only
}

// Gateway puts the agent's LLM traffic through hermeskilld (yaml:
// gateway): the agent gets base URLs on loopback and a per-run handle, the
// provider keys stay with hermeskilld, and spend and tool calls are metered
// on the wire. Off when no upstream is set.
type Gateway struct {
	// Upstreams are "NAME=URL" or "NAME=URL,style=openai|anthropic"
	// (supervise --llm-upstream).
	Upstreams []string `yaml:"upstreams"`
	// KeyFiles maps an upstream's name to the file of its provider key,
	// not readable by group or others (supervise --llm-key-file NAME=PATH).
	KeyFiles map[string]string `yaml:"key_files"`
	// Prices is the price file: USD per million tokens by model
	// (supervise --llm-prices).
	Prices string `yaml:"prices"`
	// Listen is where the gateway listens, on loopback (default
	// 127.0.0.1 on a free port).
	Listen string `yaml:"listen" config:"listen"`
	// DefaultMaxOutputTokens is the output a request that names no bound
	// (max_tokens and the like) is reserved against the budget (default
	// 4096).
	DefaultMaxOutputTokens int64 `yaml:"default_max_output_tokens"`
	// UpstreamIdleConns bounds the idle upstream connections kept for
	// reuse, per upstream and in total (default: the gateway's bound on
	// the agents' connections, the concurrency it admits).
	UpstreamIdleConns int `yaml:"upstream_idle_conns"`

	// ParentRun and Keys are never in a file: supervise sets them when it
	// runs inside a supervised run whose gateway it forwards through
	// (gateway.ParentFromEnv). ParentRun is that run's agent id; Keys are
	// the upstreams' keys by name (the parent's handle).
	ParentRun string
	Keys      map[string]string
}

// On reports whether the gateway is configured.
func (g Gateway) On() bool { return len(g.Upstreams) > 0 }

// Restart is the daemon's restart policy for one agent (yaml: restart).
type Restart struct {
	Policy      RestartPolicy `yaml:"policy" config:"oneof=never|on-failure|always"`
	Backoff     time.Duration `yaml:"backoff"`      // first delay before a restart, doubled each time
	MaxBackoff  time.Duration `yaml:"max_backoff"`  // cap of the delay
	MaxRestarts int           `yaml:"max_restarts"` // restarts allowed within window before the agent is left down as crash-looping; 0 = no limit
	Window      time.Duration `yaml:"window"`       // the crash-loop window
	StableAfter time.Duration `yaml:"stable_after"` // a run this long resets the backoff
}

// Escalation is the kill ladder's timing (yaml: escalation).
type Escalation struct {
	CoopSignal syscall.Signal `yaml:"coop_signal"` // 0 = none: the cooperative stage is skipped
	CoopGrace  time.Duration  `yaml:"coop_grace"`  // wait after the cooperative stop
	TermGrace  time.Duration  `yaml:"term_grace"`  // wait after SIGTERM, also the stop_timeout after STOPPING=1
	DumpWait   time.Duration  `yaml:"dump_wait"`   // wait after the agent's DUMP_SIGNAL for its stack traces
	AckWait    time.Duration  `yaml:"ack_wait"`    // wait for the client's acknowledgement of STOP before the cooperative signal
}

// EffectiveAckWait is how long the ladder waits for a client to
// acknowledge the STOP directive before it sends the cooperative signal:
// ack_wait, but at most half of coop_grace, so that an agent whose client
// does not answer still has the signal's half of the grace.
func (e Escalation) EffectiveAckWait() time.Duration {
	return min(e.AckWait, e.CoopGrace/2)
}

// DefaultAckWait is escalation.ack_wait's default. The clients answer a
// STOP within a few milliseconds on an idle machine (p99 tens of ms); the
// bound leaves room for a loaded one, and costs only agents whose client
// does not answer, which get the cooperative signal that much later.
const DefaultAckWait = 250 * time.Millisecond

// DefaultAgent returns an agent with every built-in default and no id,
// command or checks: what `supervise` uses without --config.
func DefaultAgent() *Agent {
	return &Agent{
		Labels:       map[string]string{},
		Env:          map[string]string{},
		Mode:         ModeEnforce,
		Network:      NetworkHost,
		AfterKill:    AfterKillQuarantine,
		OnBudget:     OnBudgetKill,
		PauseTimeout: DefaultPauseTimeout,
		Restart: Restart{
			Policy:      RestartNever,
			Backoff:     time.Second,
			MaxBackoff:  5 * time.Minute,
			MaxRestarts: 5,
			Window:      10 * time.Minute,
			StableAfter: time.Minute,
		},
		Escalation: Escalation{
			CoopSignal: syscall.SIGINT,
			CoopGrace:  10 * time.Second,
			TermGrace:  5 * time.Second,
			DumpWait:   200 * time.Millisecond,
			AckWait:    DefaultAckWait,
		},
		Checks: Checks{
			HeartbeatTimeoutMin: 100 * time.Millisecond,
			MaxExtension:        DefaultMaxExtension,
			SampleInterval:      defaultSampleInterval,
		},
	}
}

// Clone returns a deep copy of a.
func (a *Agent) Clone() *Agent {
	c := *a
	deepCopy(reflect.ValueOf(&c).Elem())
	return &c
}

// Describe lists the escalation keys as `hermeskilld status` shows them,
// in the order of the schema: {coop_signal SIGINT}, {coop_grace 10s}, ….
func (e Escalation) Describe() []KV { return describeKeys(reflect.ValueOf(e), true) }

// Normalize fills the defaults that derive from other fields. Call it once,
// after flags were applied on top of a file, before Validate:
//   - startup_timeout = heartbeat_timeout, but at least StartupFloor, when
//     unset: an agent that never beats must still die, but an interpreter
//     that takes a few seconds to load its imports is not wedged (a tight
//     heartbeat timeout applies once the agent said READY or beat);
//   - heartbeat_timeout_max = heartbeat_timeout when unset (an agent may
//     tighten its watchdog but not loosen it);
//   - heartbeat_timeout_min is lowered to heartbeat_timeout_max when above it;
//   - sample_interval = 1s when unset;
//   - max_extension = DefaultMaxExtension when 0 (an extension is never
//     unbounded);
//   - a check without any threshold (memory: {}) becomes nil.
func (a *Agent) Normalize() {
	c := &a.Checks
	if c.StartupTimeout == 0 && c.HeartbeatTimeout > 0 {
		c.StartupTimeout = max(c.HeartbeatTimeout, StartupFloor)
	}
	if c.HeartbeatTimeoutMax == 0 {
		c.HeartbeatTimeoutMax = c.HeartbeatTimeout
	}
	if c.HeartbeatTimeoutMax > 0 && c.HeartbeatTimeoutMin > c.HeartbeatTimeoutMax {
		c.HeartbeatTimeoutMin = c.HeartbeatTimeoutMax
	}
	if c.SampleInterval == 0 {
		c.SampleInterval = defaultSampleInterval
	}
	if c.MaxExtension == 0 {
		c.MaxExtension = DefaultMaxExtension
	}
	c.dropInactive()
}

// Validate checks a typed agent, typically after Normalize. The daemon
// passes requireIDAndCommand; supervise fills id and command from flags and
// its argv. Errors wrap ErrInvalid and name the agent's Source file (a file
// is validated with lines by ParseAgent already; what remains for Validate
// is what flags changed and missing keys).
func (a *Agent) Validate(requireIDAndCommand bool) error {
	var errs []*Error
	for _, p := range a.problems(requireIDAndCommand) {
		errs = append(errs, &Error{File: a.Source, Key: p.key, Kind: p.kind, Err: errors.New(p.msg)})
	}
	return joinErrors(errs)
}

// The name patterns are compiled on first use: supervise's start-up time
// is a product figure, and most runs never validate a label.
var (
	idRE      = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$`) })
	envNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
)

// reservedEnv are set by hermeskilld for the child: its heartbeat sockets
// (datagram and stream), its id and the systemd names a notify library
// reads. An agent file cannot override them.
var reservedEnv = []string{"HERMESKILL_SOCKET", "HERMESKILL_STREAM_SOCKET", "HERMESKILL_AGENT_ID", "NOTIFY_SOCKET", "WATCHDOG_USEC"}

// problems are what is wrong with a, in the order of the schema: the rules
// of its own keys, then those every key obeys, then those between keys.
func (a *Agent) problems(requireIDAndCommand bool) []problem {
	var ps []problem
	add := func(key, at, format string, args ...any) {
		ps = append(ps, problem{key: key, at: at, kind: ErrBadValue, msg: fmt.Sprintf(format, args...)})
	}
	switch {
	case a.ID == "" && requireIDAndCommand:
		ps = append(ps, problem{key: "id", kind: ErrMissing, msg: "required"})
	case a.ID != "" && !idRE().MatchString(a.ID):
		add("id", "", "%q must be 1-64 letters, digits, '.', '_' or '-', not starting with '.' or '-'", a.ID)
	}
	switch {
	case len(a.Command) == 0 && requireIDAndCommand:
		ps = append(ps, problem{key: "command", kind: ErrMissing, msg: "required: the argv list such as [python3, agent.py]"})
	case len(a.Command) > 0 && a.Command[0] == "":
		add("command", "command[0]", "the program (first element) must not be empty")
	}
	if a.Cwd != "" && !filepath.IsAbs(a.Cwd) {
		add("cwd", "", "%q must be an absolute path", a.Cwd)
	}
	if a.Writable != nil && len(a.Writable) == 0 {
		add("writable", "", "must not be empty: name the paths the agent may write beneath, or leave writable out for files unconfined")
	}
	for i, p := range a.Writable {
		if !filepath.IsAbs(p) {
			add("writable", fmt.Sprintf("writable[%d]", i), "%q must be an absolute path", p)
		}
	}
	switch {
	case a.Network == NetworkAllowlist && len(a.Allow) == 0:
		ps = append(ps, problem{key: "allow", at: "network", kind: ErrMissing, msg: "required with network: allowlist: the destinations the agent may reach, such as [api.github.com:443, \"*.pypi.org:443\"]"})
	case a.Network != NetworkAllowlist && len(a.Allow) > 0:
		ps = append(ps, problem{key: "allow", kind: ErrConflict, msg: fmt.Sprintf("is only for network: allowlist (network is %s)", a.Network)})
	}
	for i, e := range a.Allow {
		if err := egress.ParseEntry(e); err != nil {
			add("allow", fmt.Sprintf("allow[%d]", i), "%v", err)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(a.Env)) {
		switch {
		case !envNameRE().MatchString(k):
			add("env", "env."+k, "%q is not a valid variable name (letters, digits and '_', not starting with a digit)", k)
		case slices.Contains(reservedEnv, k):
			add("env."+k, "", "set by hermeskilld for the agent, cannot be overridden")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(a.Labels)) {
		switch {
		case !labels.ValidKey(k):
			add("labels", "labels."+k, "%q is not a valid label name (%s)", k, labels.KeyRule)
		case len(a.Labels[k]) > labels.MaxValue:
			add("labels."+k, "", "longer than %d bytes", labels.MaxValue)
		}
	}
	ps = append(ps, schemaProblems(reflect.ValueOf(a).Elem(), "")...)
	if a.PauseTimeout == 0 {
		add("pause_timeout", "", "must be above 0: a pause is never endless (the default is %s)", FormatDuration(DefaultPauseTimeout))
	}
	ps = append(ps, a.Restart.problems()...)
	ps = append(ps, a.Escalation.problems()...)
	ps = append(ps, a.ControlPlane.problems()...)
	return append(ps, a.Checks.problems()...)
}

// problems are the rules between the keys of restart.
func (r *Restart) problems() []problem {
	var ps []problem
	if r.Backoff > r.MaxBackoff {
		ps = append(ps, problem{key: "restart.backoff", kind: ErrConflict, msg: fmt.Sprintf("%s is above max_backoff %s", FormatDuration(r.Backoff), FormatDuration(r.MaxBackoff))})
	}
	if r.MaxRestarts > 0 && r.Window == 0 {
		ps = append(ps, problem{key: "restart.window", kind: ErrConflict, msg: "must be above 0 when max_restarts is set"})
	}
	return ps
}

// problems: SIGKILL and SIGSTOP cannot be caught (signal(7)), so they are
// no cooperative stop.
func (e *Escalation) problems() []problem {
	switch e.CoopSignal {
	case syscall.SIGKILL, syscall.SIGSTOP:
		return []problem{{key: "escalation.coop_signal", kind: ErrBadValue, msg: SignalName(e.CoopSignal) + " cannot be caught, so it is no cooperative stop (use none to skip that stage)"}}
	}
	return nil
}
