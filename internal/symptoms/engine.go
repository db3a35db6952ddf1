// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"math"
	"time"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
)

// maxLog bounds the symptoms kept for the certificate; the first terminal
// symptom is always kept.
const maxLog = 256

// Config is what the engine checks: the agent's checks plus the stop
// timeout that applies after the agent announced STOPPING=1 (its term-grace).
type Config struct {
	config.Checks
	StopTimeout time.Duration
	// Metered: the agent's LLM traffic goes through hermeskilld's gateway,
	// so the tokens and cost budgets use what was metered on the wire
	// (ObserveMetered); what the agent reports itself is kept beside it
	// (State.Tokens, State.CostUSD) and decides nothing. The same goes for
	// tool calls: tool_loop counts the calls the wire shows the model
	// asking for, and an agent's own TOOL= reports (the same calls, as it
	// runs them) are kept (State.ReportedTool) and count for nothing, so
	// no call is counted twice.
	Metered bool
	// Shadow keeps every check running after a terminal symptom, so that
	// each check that would have killed the agent is reported, once: shadow
	// mode records them all, where enforcing stops at the first. Terminal
	// still returns the first.
	Shadow bool
}

// State is what the agent reported about itself, for `ps` and the certificate.
type State struct {
	Started        time.Time
	Ready          bool
	ReadyAt        time.Time
	Status         string
	Stopping       bool
	MainPID        int
	Errno          *int
	Progress       uint64
	LastProgressAt time.Time
	Tokens         uint64
	CostUSD        float64
	// Metered figures (Config.Metered): what the gateway counted.
	MeteredTokens  uint64
	MeteredCostUSD float64
	// OwnProgress: the agent reported PROGRESS= itself, and Progress is
	// its counter. Until then, with the gateway, Progress counts the
	// LLM requests answered (wire.go).
	OwnProgress bool
	// WireRequests counts the run's requests that reached the gateway;
	// InFlight is how many of them have not ended yet.
	WireRequests uint64
	InFlight     int
	// CostUnknown: a metered request used a model with no price.
	CostUnknown bool
	// UsageUnknown: a metered request's usage was never read and it was
	// charged at its reservation.
	UsageUnknown bool
	// LastTool is the last tool call tool_loop counted: the agent's own
	// report (TOOL=), or with Config.Metered the wire's.
	LastTool string
	// ReportedTool and ReportedTools are the agent's own TOOL= reports:
	// the last one and how many.
	ReportedTool     string
	ReportedTools    uint64
	LastHeartbeat    time.Time
	Heartbeats       uint64
	Messages         uint64
	Errors           uint64
	LastError        string
	ErrorStreak      int
	DumpSignal       string
	HeartbeatTimeout time.Duration
	Warnings         int
	// EgressRefusals and EgressBytes are what the egress proxy refused
	// and passed (both ways) over the run (network: allowlist).
	EgressRefusals uint64
	EgressBytes    uint64
}

// Sample is one kernel measurement of the agent's process tree.
type Sample struct {
	RSSBytes   int64   // tree RSS, or the cgroup's memory.current
	CPUPercent float64 // tree CPU over the last interval; 100 = one core
	Procs      int     // processes plus threads
	FDs        int     // open descriptors; only meaningful when HaveFDs
	HaveFDs    bool
	// Denials is what Landlock refused the agent so far; only
	// meaningful when HaveDenials (the kernel's audit log is read).
	Denials     int
	HaveDenials bool
}

// Engine evaluates one agent's checks. It is not safe for concurrent use:
// one goroutine (the agent's supervisor loop) owns it.
type Engine struct {
	cfg      Config
	st       State
	beatSeen bool

	// The latest instants that EXTEND_TIMEOUT_USEC asked for, unclamped
	// (deadlines applies max_extension): before the first heartbeat, since
	// the last heartbeat, and since STOPPING=1.
	startupExtend   time.Time
	heartbeatExtend time.Time
	stopExtend      time.Time
	stoppingAt      time.Time
	// watchdog is the agent's WATCHDOG_USEC before clamping; 0 = none.
	watchdog time.Duration

	tools   toolHistory
	rates   rates
	egress  egressMeters
	sustain map[sustainKey]time.Time // when a kernel condition began to hold
	warned  map[Check]bool
	fired   map[Check]bool
	// overBudget is a budget's refusal that waits for the requests in
	// flight to end (OverBudget), until overBudgetSince + OverBudgetSettle.
	overBudget      *Symptom
	overBudgetSince time.Time
	terminal        *Symptom
	manual          bool // an operator's kill: real in every mode
	log             []Symptom
	// resumedAt is the end of the last pause (Resume): the liveness
	// deadlines count from it at the earliest.
	resumedAt time.Time
}

// New starts evaluating at start (the agent's start time).
func New(cfg Config, start time.Time) *Engine {
	e := &Engine{
		sustain: make(map[sustainKey]time.Time),
		warned:  make(map[Check]bool),
		fired:   make(map[Check]bool),
	}
	e.st.Started = start
	e.st.LastProgressAt = start
	e.setConfig(cfg, start)
	return e
}

// Reconfigure applies new thresholds at once (a live edit of the agent's
// file). Clocks already running keep their origin: a shorter heartbeat
// timeout can fire immediately, and so can a budget (tokens, cost, steps,
// error_streak, tool_loop) that what the agent already reported is over,
// and a rate that its window already holds more than (a new per keeps
// what the old window held, each amount no longer than the new per);
// kernel checks apply at the next sample. The agent's own WATCHDOG_USEC is
// kept, clamped to the new bounds. A check turned off forgets its clocks
// and its warning, so turned on again it starts afresh.
func (e *Engine) Reconfigure(cfg Config, now time.Time) []Symptom {
	e.setConfig(cfg, now)
	for k := range e.sustain {
		if !e.enabled(k.check) {
			delete(e.sustain, k)
		}
	}
	for c := range e.warned {
		if !e.enabled(c) {
			delete(e.warned, c)
		}
	}
	return append(append(append(e.Tick(now), e.reported(now)...), e.ratesNow(now)...), e.egressNow(now)...)
}

func (e *Engine) setConfig(cfg Config, now time.Time) {
	e.cfg = cfg
	e.st.HeartbeatTimeout = e.heartbeatTimeout()
	e.tools.resize(cfg.ToolLoop)
	e.rates.resize(cfg.Checks, e.st.Started, now)
	e.egress.resize(cfg.Egress, e.st.Started, now)
}

// enabled reports whether a threshold check is on in the current config.
func (e *Engine) enabled(c Check) bool {
	switch c {
	case Memory:
		return e.cfg.Memory != nil
	case Procs:
		return e.cfg.Procs != nil
	case FDs:
		return e.cfg.FDs != nil
	case CPUSpin:
		return e.cfg.CPUSpin != nil && e.cfg.CPUSpin.Percent > 0
	case Tokens:
		return e.cfg.Tokens != nil
	case Cost:
		return e.cfg.Cost != nil
	case CostRate:
		return e.cfg.CostRate != nil
	case RequestsRate:
		return e.cfg.RequestsRate != nil
	case TokensRate:
		return e.cfg.TokensRate != nil
	case ErrorStreak:
		return e.cfg.ErrorStreak != nil
	case Steps:
		return e.cfg.Steps != nil
	case Denials:
		return e.cfg.Denials != nil
	case Egress:
		return e.cfg.Egress != nil
	}
	return true
}

// State returns what the agent reported so far.
func (e *Engine) State() State { return e.st }

// Log returns every symptom recorded, oldest first.
func (e *Engine) Log() []Symptom { return append([]Symptom(nil), e.log...) }

// Terminal returns the first terminal symptom, if one fired.
func (e *Engine) Terminal() (Symptom, bool) {
	if e.terminal == nil {
		return Symptom{}, false
	}
	return *e.terminal, true
}

// Manual records an operator's kill request as the terminal symptom (unless
// one already fired: then it is logged, and first reports false). An
// operator's kill is carried out in shadow mode too: from then on no
// deadline is armed in any mode.
func (e *Engine) Manual(operator, reason string, now time.Time) (s Symptom, first bool) {
	e.manual = true
	msg := "killed by " + operator
	if reason != "" {
		msg += ": " + reason
	}
	s = Symptom{At: now, Check: Manual, Severity: Terminal, Observed: operator, Threshold: "", Message: msg,
		Operator: operator, Reason: reason}
	first = e.terminal == nil
	e.record(s)
	return s, first
}

// HostStop records a stop the host decided for a reason of its own, not
// the agent's (check ControlPlaneUnreachable; InternalError when its
// kernel checks went blind), as the terminal symptom;
// like Manual it is carried out in shadow mode too, and first reports
// false when a terminal symptom fired before.
func (e *Engine) HostStop(check Check, observed, msg string, now time.Time) (s Symptom, first bool) {
	e.manual = true
	s = Symptom{At: now, Check: check, Severity: Terminal, Observed: observed, Message: msg}
	first = e.terminal == nil
	e.record(s)
	return s, first
}

// Exceeded is a limit decided outside the run (check Budget: a budget
// across runs its spend belongs to): a terminal symptom at now, once per
// check, like the run's own checks.
func (e *Engine) Exceeded(s Symptom, now time.Time) []Symptom {
	out := e.Tick(now)
	s.At, s.Severity = now, Terminal
	return append(out, e.fire(s)...)
}

// Observe applies one authenticated message received at now and returns
// the symptoms it caused. Deadlines are evaluated at now first, so a
// heartbeat read after its deadline passed cannot rescue the agent.
func (e *Engine) Observe(m *heartbeat.Message, now time.Time) []Symptom {
	out := e.Tick(now)
	e.st.Messages++
	if m.Has(heartbeat.FieldReady) && !e.st.Ready {
		e.st.Ready, e.st.ReadyAt = true, now
		e.beat(now)
	}
	if m.Has(heartbeat.FieldWatchdog) {
		e.st.Heartbeats++
		e.beat(now)
	}
	if m.Has(heartbeat.FieldWatchdogUSec) {
		e.setWatchdog(usec(m.WatchdogUSec), now)
	}
	// STOPPING before EXTEND_TIMEOUT_USEC: "STOPPING=1\nEXTEND_TIMEOUT_USEC=N"
	// in one datagram extends the stop deadline, not the startup one.
	if m.Has(heartbeat.FieldStopping) && !e.st.Stopping {
		e.st.Stopping, e.stoppingAt = true, now
	}
	if m.Has(heartbeat.FieldExtendTimeoutUSec) {
		out = append(out, e.extend(usec(m.ExtendTimeoutUSec), now)...)
	}
	if m.Has(heartbeat.FieldStatus) {
		e.st.Status = m.Status
	}
	if m.Has(heartbeat.FieldMainPID) {
		e.st.MainPID = m.MainPID
	}
	if m.Has(heartbeat.FieldErrno) {
		v := m.Errno
		e.st.Errno = &v
	}
	if m.Has(heartbeat.FieldDumpSignal) {
		e.st.DumpSignal = m.DumpSignal
	}
	if m.Has(heartbeat.FieldProgress) {
		held := e.progressHeld()
		e.ownProgress()
		out = append(out, e.progress(m.Progress, now)...)
		if held {
			// A request in flight held the progress deadline; the agent's
			// own counter ends the hold, so a deadline that passed
			// meanwhile (no increase since) fires now, as at the end of
			// the flight.
			out = append(out, e.Tick(now)...)
		}
	}
	var addTokens uint64
	var addCost float64
	if m.Has(heartbeat.FieldTokens) {
		addTokens = m.Tokens - min(e.st.Tokens, m.Tokens)
		e.st.Tokens = m.Tokens
		if !e.cfg.Metered {
			out = append(out, e.budgetInt(Tokens, "tokens", sat(m.Tokens), e.cfg.Tokens, now)...)
		}
	}
	if m.Has(heartbeat.FieldCostUSD) {
		addCost = max(m.CostUSD-e.st.CostUSD, 0)
		e.st.CostUSD = m.CostUSD
		if !e.cfg.Metered {
			out = append(out, e.cost(now)...)
		}
	}
	if (addTokens > 0 || addCost > 0) && !e.cfg.Metered {
		out = append(out, e.rateSpent(addTokens, addCost, now)...)
		out = append(out, e.rateRequest(now)...)
	}
	if m.Has(heartbeat.FieldTool) {
		e.st.ReportedTool = m.Tool
		e.st.ReportedTools++
		if !e.cfg.Metered {
			e.st.LastTool = m.Tool
			out = append(out, e.toolCall(m.Tool, m.ToolArgsSHA256, now)...)
		}
	}
	if m.Has(heartbeat.FieldError) {
		out = append(out, e.errorSeen(m.Error, now)...)
	}
	if m.Has(heartbeat.FieldTrigger) {
		msg := "agent asked to be killed (WATCHDOG=trigger)"
		if e.st.Status != "" {
			msg += ": " + e.st.Status
		}
		out = append(out, e.fire(Symptom{At: now, Check: SelfReported, Severity: Terminal,
			Observed: "WATCHDOG=trigger", Threshold: "", Message: msg})...)
	}
	return out
}

// beat records a heartbeat (READY counts as one). The first one ends the
// startup: the heartbeat deadline replaces the startup deadline, and the
// no-progress clock starts. A heartbeat also ends any extension of the
// heartbeat deadline: the agent is back, the deadline is now + timeout.
func (e *Engine) beat(now time.Time) {
	e.st.LastHeartbeat = now
	e.heartbeatExtend = time.Time{}
	if !e.beatSeen {
		e.beatSeen = true
		e.st.LastProgressAt = later(e.st.LastProgressAt, now)
	}
}

// setWatchdog applies WATCHDOG_USEC. Once heartbeats flow it restarts the
// heartbeat clock, as systemd does; before the first one it only sets the
// timeout that will apply (it is no heartbeat: the startup deadline stays).
func (e *Engine) setWatchdog(d time.Duration, now time.Time) {
	if d == 0 {
		d = math.MaxInt64 // systemd: no watchdog; here the max applies
	}
	e.watchdog = d
	e.st.HeartbeatTimeout = e.heartbeatTimeout()
	if e.beatSeen {
		e.st.LastHeartbeat = now
		e.heartbeatExtend = time.Time{}
	}
}

// heartbeatTimeout is the configured heartbeat timeout, or the agent's
// WATCHDOG_USEC clamped to [HeartbeatTimeoutMin, HeartbeatTimeoutMax] (the
// max defaulting to HeartbeatTimeout): an agent may tighten its watchdog,
// not loosen or disable it, and with neither bound set it cannot arm one
// (config.Checks).
func (e *Engine) heartbeatTimeout() time.Duration {
	c := e.cfg
	hi := c.HeartbeatTimeoutMax
	if hi <= 0 {
		hi = c.HeartbeatTimeout
	}
	d := e.watchdog
	if d == 0 || hi <= 0 {
		return c.HeartbeatTimeout
	}
	return min(max(d, c.HeartbeatTimeoutMin), hi)
}

// usec converts a count of microseconds from the wire, saturating:
// USEC_INFINITY (2^64-1) means forever, not a negative duration.
func usec(n uint64) time.Duration {
	if n > math.MaxInt64/uint64(time.Microsecond) {
		return math.MaxInt64
	}
	return time.Duration(n) * time.Microsecond
}

// record appends s to the log and makes it the terminal symptom when it is
// the first terminal one. Until that one fired, the log's last slot is kept
// for it: the certificate must say why the agent died.
func (e *Engine) record(s Symptom) {
	room := maxLog
	if e.terminal == nil {
		if s.Severity == Terminal {
			e.terminal = &s
		} else {
			room--
		}
	}
	if len(e.log) < room {
		e.log = append(e.log, s)
	}
	if s.Severity == Warning {
		e.st.Warnings++
	}
}

// fire records a terminal symptom once per check.
func (e *Engine) fire(s Symptom) []Symptom {
	if e.fired[s.Check] {
		return nil
	}
	e.fired[s.Check] = true
	e.record(s)
	return []Symptom{s}
}

// warn records a warning once per check until rearm(check).
func (e *Engine) warn(s Symptom) []Symptom {
	if e.warned[s.Check] || e.fired[s.Check] {
		return nil
	}
	e.warned[s.Check] = true
	e.record(s)
	return []Symptom{s}
}

func (e *Engine) rearm(c Check) { delete(e.warned, c) }

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
