package config

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Mode says whether terminal symptoms are acted on (yaml: mode).
type Mode string

// The modes.
const (
	ModeEnforce Mode = "enforce" // a terminal symptom starts the ladder
	ModeShadow  Mode = "shadow"  // a terminal symptom writes a certificate; nothing is signalled
)

// AfterKill says what the daemon does with an agent it killed (yaml: after_kill).
type AfterKill string

// The after_kill values.
const (
	AfterKillQuarantine AfterKill = "quarantine" // stays down until `hermeskilld release ID`
	AfterKillRestart    AfterKill = "restart"    // restarted with the restart backoff and limits
)

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

// Built-in defaults; DefaultAgent returns them assembled.
const (
	defaultCoopSignal          = syscall.SIGINT
	defaultCoopGrace           = 10 * time.Second
	defaultTermGrace           = 5 * time.Second
	defaultDumpWait            = 200 * time.Millisecond
	defaultSampleInterval      = time.Second
	defaultHeartbeatTimeoutMin = 100 * time.Millisecond
	defaultBackoff             = time.Second
	defaultMaxBackoff          = 5 * time.Minute
	defaultMaxRestarts         = 5
	defaultRestartWindow       = 10 * time.Minute
	defaultStableAfter         = time.Minute
	minSampleInterval          = 10 * time.Millisecond

	// DefaultMaxExtension is max_extension when it is unset or 0: how far
	// the agent's EXTEND_TIMEOUT_USEC messages in a row may push a deadline
	// beyond where it would be without them.
	DefaultMaxExtension = 30 * time.Minute
)

// Agent is one supervised agent: an agent file (daemon) or `supervise
// --config FILE` plus flags. Every field is set: DefaultAgent supplies what
// the file does not say. See the package documentation for each key.
type Agent struct {
	ID         string            // id
	Labels     map[string]string // labels: free-form metadata, shown by ps and in metrics
	Command    []string          // command: argv, never run through a shell
	User       string            // user: name or numeric uid to run as; "" = hermeskilld's own user
	Cwd        string            // cwd: absolute working directory; "" = hermeskilld's own
	Env        map[string]string // env: added to (and overriding) hermeskilld's environment
	Mode       Mode              // mode
	AfterKill  AfterKill         // after_kill
	Restart    Restart           // restart
	Escalation Escalation        // escalation
	Checks     Checks            // checks
	Source     string            // the file it came from; "" for flags only
}

// Restart is the daemon's restart policy for one agent (yaml: restart).
type Restart struct {
	Policy      RestartPolicy // policy: never | on-failure | always (default never)
	Backoff     time.Duration // backoff: first delay before a restart, doubled each time (default 1s)
	MaxBackoff  time.Duration // max_backoff: cap of the delay (default 5m)
	MaxRestarts int           // max_restarts: restarts allowed within window before the agent is left down as crash-looping; 0 = no limit (default 5)
	Window      time.Duration // window: the crash-loop window (default 10m)
	StableAfter time.Duration // stable_after: a run this long resets the backoff (default 1m)
}

// Escalation is the kill ladder's timing (yaml: escalation).
type Escalation struct {
	CoopSignal syscall.Signal // coop_signal: SIGINT | INT | 2 | none; 0 = none (default SIGINT)
	CoopGrace  time.Duration  // coop_grace: wait after the cooperative stop (default 10s)
	TermGrace  time.Duration  // term_grace: wait after SIGTERM, also the stop_timeout after STOPPING=1 (default 5s)
	DumpWait   time.Duration  // dump_wait: wait after the agent's DUMP_SIGNAL for its stack traces (default 200ms)
}

// Checks are the symptom checks (yaml: checks). A zero duration and a nil
// pointer mean the check is off; a non-nil pointer always has at least one
// threshold set.
type Checks struct {
	StartupTimeout      time.Duration // startup_timeout: READY or a first heartbeat within this; defaults to heartbeat_timeout, at least 10s (see Normalize)
	HeartbeatTimeout    time.Duration // heartbeat_timeout: a heartbeat within this; also WATCHDOG_USEC
	HeartbeatTimeoutMin time.Duration // heartbeat_timeout_min: lowest WATCHDOG_USEC an agent may set (default 100ms, lowered to the max when above it)
	HeartbeatTimeoutMax time.Duration // heartbeat_timeout_max: highest WATCHDOG_USEC an agent may set (default heartbeat_timeout)
	ProgressTimeout     time.Duration // progress_timeout: PROGRESS must increase within this
	MaxRuntime          time.Duration // max_runtime: wall-clock limit
	MaxExtension        time.Duration // max_extension: how far EXTEND_TIMEOUT_USEC in a row may push the startup, heartbeat or stop deadline (default DefaultMaxExtension; 0 = the default)
	SampleInterval      time.Duration // sample_interval: how often kernel metrics are read (default 1s)

	Memory      *Sustained // memory: tree RSS in bytes {warn, kill, for}
	CPUSpin     *CPUSpin   // cpu_spin: {percent, for, only_without_progress}
	Procs       *Sustained // procs: processes+threads in the tree {warn, kill, for}
	FDs         *Sustained // fds: open file descriptors in the tree {warn, kill, for}
	Tokens      *Limit     // tokens: cumulative TOKENS {warn, kill}
	Cost        *CostLimit // cost: cumulative COST_USD {warn, kill}
	ToolLoop    *ToolLoop  // tool_loop: {repeats} or a bare number
	ErrorStreak *Limit     // error_streak: ERRORs with no progress between {warn, kill}
	Steps       *Limit     // steps: PROGRESS value {warn, kill}
}

// Sustained is a kernel-sampled threshold that must hold for a while.
type Sustained struct {
	Warn int64         // warn: warning threshold; 0 = no warning
	Kill int64         // kill: terminal threshold; 0 = no kill
	For  time.Duration // for: how long the value must stay above a threshold; 0 = the first sample above
}

// Limit is a threshold on a counter the agent reports.
type Limit struct {
	Warn int64 // warn: 0 = no warning
	Kill int64 // kill: 0 = no kill
}

// CostLimit is a threshold on the agent's reported spend, in USD.
type CostLimit struct {
	Warn float64 // warn: 0 = no warning
	Kill float64 // kill: 0 = no kill
}

// CPUSpin is the CPU spin check.
type CPUSpin struct {
	Percent             float64       // percent: tree CPU in percent of one CPU (as top shows it; 200 = two CPUs busy)
	For                 time.Duration // for: how long it must stay above; 0 = the first sample above
	OnlyWithoutProgress bool          // only_without_progress: fire only while PROGRESS does not increase
}

// ToolLoop is the tool loop check.
type ToolLoop struct {
	Repeats int // repeats: the same call (or cycle of 2-3 calls) this many times in a row; >= 2
}

// DefaultAgent returns an agent with every built-in default and no id,
// command or checks: what `supervise` uses without --config.
func DefaultAgent() *Agent {
	return &Agent{
		Labels:    map[string]string{},
		Env:       map[string]string{},
		Mode:      ModeEnforce,
		AfterKill: AfterKillQuarantine,
		Restart: Restart{
			Policy:      RestartNever,
			Backoff:     defaultBackoff,
			MaxBackoff:  defaultMaxBackoff,
			MaxRestarts: defaultMaxRestarts,
			Window:      defaultRestartWindow,
			StableAfter: defaultStableAfter,
		},
		Escalation: Escalation{
			CoopSignal: defaultCoopSignal,
			CoopGrace:  defaultCoopGrace,
			TermGrace:  defaultTermGrace,
			DumpWait:   defaultDumpWait,
		},
		Checks: Checks{
			HeartbeatTimeoutMin: defaultHeartbeatTimeoutMin,
			MaxExtension:        DefaultMaxExtension,
			SampleInterval:      defaultSampleInterval,
		},
	}
}

// Clone returns a deep copy of a.
func (a *Agent) Clone() *Agent {
	c := *a
	c.Labels = maps.Clone(a.Labels)
	c.Env = maps.Clone(a.Env)
	c.Command = slices.Clone(a.Command)
	c.Checks = a.Checks.clone()
	return &c
}

func (c Checks) clone() Checks {
	c.Memory = clonePtr(c.Memory)
	c.CPUSpin = clonePtr(c.CPUSpin)
	c.Procs = clonePtr(c.Procs)
	c.FDs = clonePtr(c.FDs)
	c.Tokens = clonePtr(c.Tokens)
	c.Cost = clonePtr(c.Cost)
	c.ToolLoop = clonePtr(c.ToolLoop)
	c.ErrorStreak = clonePtr(c.ErrorStreak)
	c.Steps = clonePtr(c.Steps)
	return c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

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

func (c *Checks) dropInactive() {
	if c.Memory != nil && c.Memory.Warn == 0 && c.Memory.Kill == 0 {
		c.Memory = nil
	}
	if c.Procs != nil && c.Procs.Warn == 0 && c.Procs.Kill == 0 {
		c.Procs = nil
	}
	if c.FDs != nil && c.FDs.Warn == 0 && c.FDs.Kill == 0 {
		c.FDs = nil
	}
	if c.CPUSpin != nil && c.CPUSpin.Percent == 0 {
		c.CPUSpin = nil
	}
	if c.Tokens != nil && c.Tokens.Warn == 0 && c.Tokens.Kill == 0 {
		c.Tokens = nil
	}
	if c.ErrorStreak != nil && c.ErrorStreak.Warn == 0 && c.ErrorStreak.Kill == 0 {
		c.ErrorStreak = nil
	}
	if c.Steps != nil && c.Steps.Warn == 0 && c.Steps.Kill == 0 {
		c.Steps = nil
	}
	if c.Cost != nil && c.Cost.Warn == 0 && c.Cost.Kill == 0 {
		c.Cost = nil
	}
	if c.ToolLoop != nil && c.ToolLoop.Repeats == 0 {
		c.ToolLoop = nil
	}
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

// problem is one semantic error of a typed configuration. key is the key
// path shown in the message; at is the key path whose line locates it in a
// file (key when empty).
type problem struct {
	key, at string
	kind    ErrorKind
	msg     string
}

// The name patterns are compiled on first use: supervise's start-up time
// is a product figure, and most runs never validate a label.
var (
	idRE       = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$`) })
	envNameRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
	labelKeyRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_./-]{0,62}$`) })
)

// reservedEnv are set by hermeskilld for the child (DESIGN §2); an agent
// file cannot override them.
var reservedEnv = []string{"HERMESKILL_SOCKET", "HERMESKILL_AGENT_ID", "NOTIFY_SOCKET", "WATCHDOG_USEC"}

const maxLabelValue = 256

func (a *Agent) problems(requireIDAndCommand bool) []problem {
	var ps []problem
	add := func(key, at, format string, args ...any) {
		ps = append(ps, problem{key: key, at: at, kind: ErrBadValue, msg: fmt.Sprintf(format, args...)})
	}
	missing := func(key, msg string) { ps = append(ps, problem{key: key, kind: ErrMissing, msg: msg}) }
	switch {
	case a.ID == "" && requireIDAndCommand:
		missing("id", "required")
	case a.ID != "" && !idRE().MatchString(a.ID):
		add("id", "", "%q must be 1-64 letters, digits, '.', '_' or '-', not starting with '.' or '-'", a.ID)
	}
	switch {
	case len(a.Command) == 0 && requireIDAndCommand:
		missing("command", "required: the argv list such as [python3, agent.py]")
	case len(a.Command) > 0 && a.Command[0] == "":
		add("command", "command[0]", "the program (first element) must not be empty")
	}
	if a.Cwd != "" && !filepath.IsAbs(a.Cwd) {
		add("cwd", "", "%q must be an absolute path", a.Cwd)
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
		case !labelKeyRE().MatchString(k):
			add("labels", "labels."+k, "%q is not a valid label name (up to 63 letters, digits, '_', '.', '/', '-', starting with a letter or '_')", k)
		case len(a.Labels[k]) > maxLabelValue:
			add("labels."+k, "", "longer than %d bytes", maxLabelValue)
		}
	}
	if a.Mode != ModeEnforce && a.Mode != ModeShadow {
		add("mode", "", "must be enforce or shadow, got %q", a.Mode)
	}
	if a.AfterKill != AfterKillQuarantine && a.AfterKill != AfterKillRestart {
		add("after_kill", "", "must be quarantine or restart, got %q", a.AfterKill)
	}
	ps = append(ps, a.Restart.problems()...)
	ps = append(ps, a.Escalation.problems()...)
	ps = append(ps, a.Checks.problems()...)
	return ps
}

func (r *Restart) problems() []problem {
	var ps []problem
	switch r.Policy {
	case RestartNever, RestartOnFailure, RestartAlways:
	default:
		ps = append(ps, problem{key: "restart.policy", kind: ErrBadValue, msg: fmt.Sprintf("must be never, on-failure or always, got %q", r.Policy)})
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"backoff", r.Backoff}, {"max_backoff", r.MaxBackoff}, {"window", r.Window}, {"stable_after", r.StableAfter}} {
		if d.v < 0 {
			ps = append(ps, problem{key: "restart." + d.key, kind: ErrBadValue, msg: "must not be negative"})
		}
	}
	if r.MaxRestarts < 0 {
		ps = append(ps, problem{key: "restart.max_restarts", kind: ErrBadValue, msg: "must not be negative"})
	}
	if r.Backoff > r.MaxBackoff {
		ps = append(ps, problem{key: "restart.backoff", kind: ErrConflict, msg: fmt.Sprintf("%s is above max_backoff %s", FormatDuration(r.Backoff), FormatDuration(r.MaxBackoff))})
	}
	if r.MaxRestarts > 0 && r.Window == 0 {
		ps = append(ps, problem{key: "restart.window", kind: ErrConflict, msg: "must be above 0 when max_restarts is set"})
	}
	return ps
}

func (e *Escalation) problems() []problem {
	var ps []problem
	switch e.CoopSignal {
	case syscall.SIGKILL, syscall.SIGSTOP:
		ps = append(ps, problem{key: "escalation.coop_signal", kind: ErrBadValue, msg: fmt.Sprintf("%s cannot be caught, so it is no cooperative stop (use none to skip that stage)", SignalName(e.CoopSignal))})
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"coop_grace", e.CoopGrace}, {"term_grace", e.TermGrace}, {"dump_wait", e.DumpWait}} {
		if d.v < 0 {
			ps = append(ps, problem{key: "escalation." + d.key, kind: ErrBadValue, msg: "must not be negative"})
		}
	}
	return ps
}

func (c *Checks) problems() []problem {
	var ps []problem
	add := func(key, at, format string, args ...any) {
		ps = append(ps, problem{key: "checks." + key, at: at, kind: ErrBadValue, msg: fmt.Sprintf(format, args...)})
	}
	conflict := func(key, at, format string, args ...any) {
		ps = append(ps, problem{key: "checks." + key, at: at, kind: ErrConflict, msg: fmt.Sprintf(format, args...)})
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"startup_timeout", c.StartupTimeout}, {"heartbeat_timeout", c.HeartbeatTimeout},
		{"heartbeat_timeout_min", c.HeartbeatTimeoutMin}, {"heartbeat_timeout_max", c.HeartbeatTimeoutMax},
		{"progress_timeout", c.ProgressTimeout}, {"max_runtime", c.MaxRuntime}, {"max_extension", c.MaxExtension},
		{"sample_interval", c.SampleInterval},
	} {
		if d.v < 0 {
			add(d.key, "", "must not be negative")
		}
	}
	if c.SampleInterval < minSampleInterval {
		add("sample_interval", "", "must be at least %s", FormatDuration(minSampleInterval))
	}
	if c.HeartbeatTimeoutMax > 0 {
		if c.HeartbeatTimeoutMin > c.HeartbeatTimeoutMax {
			conflict("heartbeat_timeout_min", "", "%s is above heartbeat_timeout_max %s", FormatDuration(c.HeartbeatTimeoutMin), FormatDuration(c.HeartbeatTimeoutMax))
		}
		if c.HeartbeatTimeout > c.HeartbeatTimeoutMax {
			conflict("heartbeat_timeout_max", "", "%s is below heartbeat_timeout %s", FormatDuration(c.HeartbeatTimeoutMax), FormatDuration(c.HeartbeatTimeout))
		}
	}
	sustained := func(key string, s *Sustained, format func(int64) string) {
		if s == nil {
			return
		}
		if s.Warn < 0 || s.Kill < 0 || s.For < 0 {
			add(key, "", "thresholds must not be negative")
		}
		if s.Warn > 0 && s.Kill > 0 && s.Warn > s.Kill {
			conflict(key, "checks."+key+".warn", "warn %s is above kill %s", format(s.Warn), format(s.Kill))
		}
	}
	count := func(n int64) string { return fmt.Sprint(n) }
	sustained("memory", c.Memory, FormatSize)
	sustained("procs", c.Procs, count)
	sustained("fds", c.FDs, count)
	limit := func(key string, l *Limit) {
		if l == nil {
			return
		}
		if l.Warn < 0 || l.Kill < 0 {
			add(key, "", "thresholds must not be negative")
		}
		if l.Warn > 0 && l.Kill > 0 && l.Warn > l.Kill {
			conflict(key, "checks."+key+".warn", "warn %d is above kill %d", l.Warn, l.Kill)
		}
	}
	limit("tokens", c.Tokens)
	limit("error_streak", c.ErrorStreak)
	limit("steps", c.Steps)
	if l := c.Cost; l != nil {
		if l.Warn < 0 || l.Kill < 0 {
			add("cost", "", "thresholds must not be negative")
		}
		if l.Warn > 0 && l.Kill > 0 && l.Warn > l.Kill {
			conflict("cost", "checks.cost.warn", "warn %g is above kill %g", l.Warn, l.Kill)
		}
	}
	if s := c.CPUSpin; s != nil && (s.Percent < 0 || s.For < 0) {
		add("cpu_spin", "", "percent and for must not be negative")
	}
	if t := c.ToolLoop; t != nil && (t.Repeats < 0 || t.Repeats == 1) {
		add("tool_loop", "checks.tool_loop.repeats", "repeats must be at least 2 (or 0 for off), got %d", t.Repeats)
	}
	return ps
}
