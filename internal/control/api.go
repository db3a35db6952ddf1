// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package control is the daemon's operator API: HTTP/1.1 + JSON on the Unix
// socket runtime_dir/control.sock (as Docker's API is), callers identified
// by SO_PEERCRED, and the client the hermeskilld subcommands use.
//
// The types of this file are the wire format, version APIVersion (the
// paths' /v1/ prefix): they belong to the API, not to the packages that
// fill them, so a field renamed inside hermeskilld never changes what
// clients receive. Within a version fields are only ever added; docs/
// operations.md describes them.
//
// Authorisation: root and members of the operators group may
// change things (kill, estop, release, stop, start, restart, revoke,
// resume);
// members of the read group, and the operators, may read (list, status,
// certificates, events, agents' output logs); everyone else
// gets 403. Every changing request is passed to the Backend's audit hook
// with the caller's uid before it is acted on.
package control

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/hermeskill/hermeskilld/internal/labels"
)

// APIVersion is the version of the wire format, the prefix of every path.
const APIVersion = "v1"

// Errors a Backend returns; the server maps them to HTTP statuses and the
// client maps the statuses back, so errors.Is works on both sides.
var (
	ErrNotFound  = errors.New("no such agent")              // 404
	ErrConflict  = errors.New("not possible in this state") // 409
	ErrBadInput  = errors.New("bad request")                // 400
	ErrForbidden = errors.New("permission denied")          // 403
	// ErrNoDaemon: the control socket does not exist or refuses
	// connections (client side only).
	ErrNoDaemon = errors.New("hermeskilld daemon is not running")
	// ErrSocketInUse: another daemon is listening on the control socket
	// (server side only).
	ErrSocketInUse = errors.New("control socket in use by a running daemon")
)

// Agent states as the daemon reports them.
const (
	StateStarting    = "starting"
	StateRunning     = "running"
	StateStopping    = "stopping"
	StatePaused      = "paused"      // a money check paused it (on_budget: pause): LLM requests held, tree frozen, until resume
	StateBackoff     = "backoff"     // exited; restarting after a delay
	StateExited      = "exited"      // exited; not restarted (policy)
	StateFailed      = "failed"      // crash loop: restart limit reached
	StateQuarantined = "quarantined" // killed; down until released
	StateEstopped    = "estopped"    // down because of the e-stop
	StateInvalid     = "invalid"     // its file does not parse; never started
	StateRevoked     = "revoked"     // a standing revocation matches it: down, its LLM access withdrawn
)

// AgentInfo is one row of `hermeskilld ps`. Times unknown are left out.
type AgentInfo struct {
	ID              string            `json:"id"`
	State           string            `json:"state"`
	PID             int               `json:"pid,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	StartedAt       time.Time         `json:"started_at,omitzero"`
	LastHeartbeatAt time.Time         `json:"last_heartbeat_at,omitzero"`
	Progress        uint64            `json:"progress"`
	// CostUSD and Tokens are the run's effective figures, those the cost
	// and tokens checks count: what the gateway metered when it carries
	// the agent's LLM traffic (Metered is then set), else what the agent
	// reported. ReportedCostUSD and ReportedTokens are the agent's own
	// reports, whichever counts.
	CostUSD         float64       `json:"cost_usd"`
	Tokens          uint64        `json:"tokens"`
	ReportedCostUSD float64       `json:"reported_cost_usd"`
	ReportedTokens  uint64        `json:"reported_tokens"`
	Metered         *MeteredUsage `json:"metered,omitempty"`
	Warnings        int           `json:"warnings"`
	Restarts        int           `json:"restarts"`
	Status          string        `json:"status,omitempty"` // the agent's own STATUS=
	// Note explains the state: the quarantine reason, the crash-loop
	// limit, the config error, a pending change applied at next start.
	Note string `json:"note,omitempty"`
}

// MeteredUsage is what the LLM gateway counted of a run's requests.
type MeteredUsage struct {
	Requests int64   `json:"requests"`  // that reached the upstream
	InFlight int     `json:"in_flight"` // forwarded, their response not ended yet
	Refused  int64   `json:"refused"`   // by the gateway (revoked, outside the API, …)
	Errors   int64   `json:"errors"`    // upstream statuses >= 400 and transport errors
	Tokens   int64   `json:"tokens"`    // every model's input and output tokens
	CostUSD  float64 `json:"cost_usd"`  // the priced models' cost
	// CostKnown is false when a model had no price (cost_usd counts only
	// the priced ones) or a request's usage was never read (it is
	// charged at its reservation).
	CostKnown bool `json:"cost_known"`
}

// AgentStatus is everything `hermeskilld status ID` shows.
type AgentStatus struct {
	AgentInfo
	Source      string            `json:"source"`  // the agent file
	Command     []string          `json:"command"` // as it runs now
	Mode        string            `json:"mode"`
	Containment string            `json:"containment,omitempty"`
	Confinement string            `json:"confinement,omitempty"`
	Checks      map[string]string `json:"checks"`             // check -> threshold, as applied now
	Escalation  map[string]string `json:"escalation"`         // coop_signal, coop_grace, term_grace
	Pending     []string          `json:"pending,omitempty"`  // "command changes at next start", …
	Symptoms    []Symptom         `json:"symptoms,omitempty"` // recent, oldest first
	Run         *RunStatus        `json:"run,omitempty"`      // the live run, when there is one
	LastExit    string            `json:"last_exit,omitempty"`
	LastCert    string            `json:"last_certificate,omitempty"`
	Quarantine  *Quarantine       `json:"quarantine,omitempty"`
	ConfigError string            `json:"config_error,omitempty"`
	// Telemetry is the host's OpenTelemetry export, when it is on.
	Telemetry *TelemetryStats `json:"telemetry,omitempty"`
}

// TelemetryStats are the OpenTelemetry export's figures: the log records
// and spans exported, and what was lost: events dropped (its queue was
// full), records and spans whose export failed or was rejected, and
// those still queued at exit (unsent).
type TelemetryStats struct {
	Exported  uint64 `json:"exported"`
	Dropped   uint64 `json:"dropped"`
	Failed    uint64 `json:"failed"`
	Unsent    uint64 `json:"unsent"`
	LastError string `json:"last_error,omitempty"`
}

// Symptom is one finding of a check (the certificate's symptoms_log
// entries have the same fields).
type Symptom struct {
	At        time.Time `json:"at"`
	Check     string    `json:"check"`
	Severity  string    `json:"severity"` // warning or terminal
	Observed  string    `json:"observed"`
	Threshold string    `json:"threshold"`
	Message   string    `json:"message"`
}

// RunStatus is an agent's live run as its supervisor last published it.
type RunStatus struct {
	State       string `json:"state"` // running or stopping
	PID         int    `json:"pid"`
	Containment string `json:"containment"` // cgroup or pgroup
	// Confinement is what holds the agent's reach, joined by "+":
	// signals, files, network; or none (absent from older hermeskilld).
	Confinement string    `json:"confinement,omitempty"`
	Mode        string    `json:"mode"` // enforce or shadow
	StartedAt   time.Time `json:"started_at,omitzero"`
	Socket      string    `json:"socket"`
	// StreamSocket is the stream socket beside Socket (absent from
	// older hermeskilld).
	StreamSocket string `json:"stream_socket,omitempty"`
	// Agent is what the agent reported about itself.
	Agent AgentReport `json:"agent"`
	// Trigger is the symptom the run is dying of, once one fired.
	Trigger *Symptom `json:"trigger,omitempty"`
	// Tree is the kernel's last sample of the process tree.
	Tree TreeSample `json:"tree"`
	// SamplerError is the last failure to sample the tree for the kernel
	// checks, absent while none failed.
	SamplerError *SamplerError `json:"sampler_error,omitempty"`
	// Messages counts the datagrams of the heartbeat socket.
	Messages MessageCounts `json:"messages"`
	// Pause is the pause in progress (state "paused").
	Pause *Pause `json:"pause,omitempty"`
}

// Pause is a run's pause for a money check (on_budget: pause).
type Pause struct {
	Since        time.Time `json:"since"`
	Check        string    `json:"check"` // cost or tokens
	Reason       string    `json:"reason"`
	Frozen       string    `json:"frozen"` // cgroup, sigstop, or empty: not frozen
	HeldRequests int       `json:"held_requests"`
	// TimeoutAt is when the run is killed unless resumed.
	TimeoutAt time.Time `json:"timeout_at"`
}

// AgentReport is what an agent said about itself over its socket.
type AgentReport struct {
	Ready            bool      `json:"ready"`
	ReadyAt          time.Time `json:"ready_at,omitzero"`
	Status           string    `json:"status,omitempty"`
	Stopping         bool      `json:"stopping"`
	Progress         uint64    `json:"progress"`
	LastProgressAt   time.Time `json:"last_progress_at,omitzero"`
	Tokens           uint64    `json:"tokens"`
	CostUSD          float64   `json:"cost_usd"`
	LastTool         string    `json:"last_tool,omitempty"`
	LastHeartbeatAt  time.Time `json:"last_heartbeat_at,omitzero"`
	Heartbeats       uint64    `json:"heartbeats"`
	Errors           uint64    `json:"errors"`
	LastError        string    `json:"last_error,omitempty"`
	ErrorStreak      int       `json:"error_streak"`
	DumpSignal       string    `json:"dump_signal,omitempty"`
	HeartbeatTimeout string    `json:"heartbeat_timeout,omitempty"` // as a duration: "30s"
	Warnings         int       `json:"warnings"`
}

// TreeSample is one measurement of the agent's process tree.
type TreeSample struct {
	RSSBytes   int64   `json:"rss_bytes"`
	CPUPercent float64 `json:"cpu_percent"` // 100 = one core
	Tasks      int     `json:"tasks"`       // processes and threads
	FDs        *int    `json:"fds,omitempty"`
	// Denials is what the agent's confinement refused it so far, when
	// counted (the kernel's audit log).
	Denials *int `json:"denials,omitempty"`
}

// SamplerError is the kernel sampler's last failure in a run.
type SamplerError struct {
	Error    string    `json:"error"`
	At       time.Time `json:"at"`       // when it failed last
	Failures uint64    `json:"failures"` // failed samples in this run
	// BlindSince is the first failure since the last good sample: the
	// kernel checks have seen nothing since. Absent once a sample
	// succeeded again.
	BlindSince time.Time `json:"blind_since,omitzero"`
	// FDsBlindSince is the first failure since the tree's descriptors
	// were last counted: the fds check has seen nothing since, the other
	// kernel checks see unless BlindSince is set too. Absent once they
	// are counted again.
	FDsBlindSince time.Time `json:"fds_blind_since,omitzero"`
}

// MessageCounts are the heartbeat sockets' counters: messages read
// (datagrams and stream messages), delivered, and dropped by reason; and
// the stream socket's connections.
type MessageCounts struct {
	Received     uint64 `json:"received"`
	Accepted     uint64 `json:"accepted"`
	Dropped      uint64 `json:"dropped"`
	Oversize     uint64 `json:"oversize"`
	Malformed    uint64 `json:"malformed"`
	Forged       uint64 `json:"forged"`
	Unverifiable uint64 `json:"unverifiable"`
	RateLimited  uint64 `json:"rate_limited"`
	Overflow     uint64 `json:"overflow"`
	Directives   uint64 `json:"directives_sent"`
	// The stream socket's connections: accepted, refused for their
	// peer's credentials, refused over the connection limit, and closed
	// by hermeskilld (a message over 8 KiB, a directive not taken).
	StreamAccepted  uint64 `json:"stream_accepted"`
	StreamRefused   uint64 `json:"stream_refused"`
	StreamOverLimit uint64 `json:"stream_over_limit"`
	StreamDropped   uint64 `json:"stream_dropped"`
	// MaxIntakeLagMS is the longest a datagram waited from its arrival
	// to its reading (the daemon's poller; 0 under supervise).
	MaxIntakeLagMS float64 `json:"max_intake_lag_ms,omitempty"`
}

// Quarantine says why an agent is kept down.
type Quarantine struct {
	Since    time.Time `json:"since,omitzero"`
	Reason   string    `json:"reason"`
	Operator string    `json:"operator,omitempty"`
}

// KillRequest selects agents to kill through the ladder. Exactly one of
// ID, Selector or StartedBefore (Selector and StartedBefore combine) must
// be set. Operator is filled by the server from the caller's credentials.
type KillRequest struct {
	ID            string          `json:"id,omitempty"`
	Selector      labels.Selector `json:"selector,omitzero"` // see internal/labels: team=a,env!=prod,gpu,!spot
	StartedBefore time.Time       `json:"started_before,omitzero"`
	Reason        string          `json:"reason"` // required
	Operator      string          `json:"operator,omitempty"`
	// Wait: return once the agents are dead and their certificates are
	// written (bounded by their ladders), instead of once the kills began.
	Wait bool `json:"wait"`
}

// KillResult is the outcome for one agent.
type KillResult struct {
	ID          string `json:"id"`
	Reached     string `json:"reached,omitempty"`     // escalation stage, when waited for
	Certificate string `json:"certificate,omitempty"` // path, when waited for
	// CertID, TreeEmpty and Revoked, when waited for: the certificate's
	// id, whether the ladder found the tree empty, whether the run's LLM
	// gateway handle is withdrawn (true for a run that had none).
	CertID    string `json:"cert_id,omitempty"`
	TreeEmpty *bool  `json:"tree_empty,omitempty"`
	Revoked   *bool  `json:"revoked,omitempty"`
	Error     string `json:"error,omitempty"`
}

// EstopRequest kills every agent and keeps them down.
type EstopRequest struct {
	Reason   string `json:"reason"`
	Operator string `json:"operator,omitempty"`
	Wait     bool   `json:"wait"`
}

// RevokeRequest stores a standing revocation: the agents it matches are
// killed through the ladder (whose first step withdraws their LLM
// gateway access), and matching agents are refused any new start until
// the rule is lifted. Exactly one of ID or Selector, or StartedBefore
// (alone or with Selector), must be set; StartedBefore matches runs, so it
// kills but blocks no new start.
type RevokeRequest struct {
	ID            string          `json:"id,omitempty"`
	Selector      labels.Selector `json:"selector,omitzero"`
	StartedBefore time.Time       `json:"started_before,omitzero"`
	Reason        string          `json:"reason"` // required
	Operator      string          `json:"operator,omitempty"`
	// Wait: return once the agents killed are dead and their
	// certificates written, as KillRequest.Wait.
	Wait bool `json:"wait,omitempty"`
}

// Revocation is a standing revocation, persisted across restarts.
type Revocation struct {
	Rule          string          `json:"rule"` // "r1", "r2", …
	ID            string          `json:"id,omitempty"`
	Selector      labels.Selector `json:"selector,omitzero"`
	StartedBefore time.Time       `json:"started_before,omitzero"`
	Reason        string          `json:"reason"`
	Operator      string          `json:"operator,omitempty"`
	Since         time.Time       `json:"since"`
}

// RevokeResult is what a revocation stored and killed.
type RevokeResult struct {
	Revocation Revocation   `json:"revocation"`
	Killed     []KillResult `json:"killed"`
}

// LiftRequest lifts a standing revocation.
type LiftRequest struct {
	Rule     string `json:"rule"`
	Operator string `json:"operator,omitempty"`
}

// Budget is a budget across runs and its current window (GET
// /v1/budgets): what the runs its selector matches spent since
// window_start, against its amounts (0: not set). State is ok, warned,
// tripped (its agents stopped, new ones refused until window_end) or
// lifted (by an operator, until window_end); since is when it entered it.
type Budget struct {
	Name        string          `json:"name"`
	Selector    labels.Selector `json:"selector"`
	Per         string          `json:"per"` // day | month (UTC)
	WindowStart time.Time       `json:"window_start"`
	WindowEnd   time.Time       `json:"window_end"`
	SpentUSD    float64         `json:"spent_usd"`
	WarnUSD     float64         `json:"warn_usd,omitempty"`
	KillUSD     float64         `json:"kill_usd,omitempty"`
	State       string          `json:"state"`
	Since       time.Time       `json:"since,omitzero"`
}

// BudgetLiftRequest lifts a tripped budget until its window rolls over.
type BudgetLiftRequest struct {
	Name     string `json:"name"`
	Operator string `json:"operator,omitempty"`
}

// ResumeRequest resumes a paused run (state "paused"): its budget is
// raised to CostUSD and/or Tokens (the new kill thresholds; 0 leaves one
// as it is), its tree thawed, and the LLM requests held go on. The budget
// the run paused for must be raised above what it spent, enough to admit
// the first held request.
type ResumeRequest struct {
	ID       string  `json:"id"`
	CostUSD  float64 `json:"max_cost_usd,omitempty"`
	Tokens   int64   `json:"max_tokens,omitempty"`
	Operator string  `json:"operator,omitempty"`
}

// ResumeResult is the answer to a resume: the agent's state after it.
type ResumeResult struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

// ReleaseRequest lets a quarantined agent (or, with Estop, every agent
// held by the e-stop) start again.
type ReleaseRequest struct {
	ID       string `json:"id,omitempty"`
	Estop    bool   `json:"estop,omitempty"`
	Operator string `json:"operator,omitempty"`
}

// StopRequest stops one running agent through the escalation ladder as an
// operator's stop: unlike a kill it does not quarantine the agent; its
// restart policy then decides, as after any other exit. Reason is
// optional (the certificate says "stopped by the operator" without one).
type StopRequest struct {
	ID       string `json:"id"`
	Reason   string `json:"reason,omitempty"`
	Operator string `json:"operator,omitempty"`
	// Wait: return once the run has ended and its certificate is written,
	// instead of once the ladder has begun.
	Wait bool `json:"wait"`
}

// StartRequest starts an agent that is down by itself: exited (its
// policy does not restart it), stopped, failed (crash loop), or waiting
// out a restart backoff. An agent held down (quarantine, e-stop,
// revocation) is released instead; a running one is left alone.
type StartRequest struct {
	ID       string `json:"id"`
	Operator string `json:"operator,omitempty"`
}

// RestartRequest stops a running agent through the ladder, as StopRequest
// does, then starts it again at once, whatever its restart policy; an
// agent that is down is started.
type RestartRequest struct {
	ID       string `json:"id"`
	Reason   string `json:"reason,omitempty"`
	Operator string `json:"operator,omitempty"`
}

// ActionResult is the outcome of a stop, start or restart of one agent.
type ActionResult struct {
	ID string `json:"id"`
	// Stopped: a run was stopped through the ladder; Reached and
	// Certificate describe it once it was waited for.
	Stopped     bool   `json:"stopped,omitempty"`
	Reached     string `json:"reached,omitempty"`
	Certificate string `json:"certificate,omitempty"`
	// State is the agent's state when the answer was sent; PID and
	// StartedAt are the new run's after a start.
	State     string    `json:"state"`
	PID       int       `json:"pid,omitempty"`
	StartedAt time.Time `json:"started_at,omitzero"`
	Note      string    `json:"note,omitempty"`
}

// ReleaseResult is the answer to a release: the agent's state right
// after it (an agent released starts as soon as nothing else holds it).
type ReleaseResult struct {
	ID    string `json:"id,omitempty"`
	Estop bool   `json:"estop,omitempty"`
	State string `json:"state,omitempty"`
}

// LogsRequest reads an agent's output log (state_dir/logs/ID.log and its
// rotated files).
type LogsRequest struct {
	// Tail: the last Tail lines only; negative means everything kept.
	Tail int
	// Follow: after them, go on with what the agent writes, across
	// rotations, until the request ends.
	Follow bool
}

// CertSummary is one row of `hermeskilld certs ls`.
type CertSummary struct {
	CertID       string    `json:"cert_id"`
	AgentID      string    `json:"agent_id"`
	Path         string    `json:"path"`
	Mode         string    `json:"mode"`
	TriggerType  string    `json:"trigger_type"`
	TriggerCheck string    `json:"trigger_check"`
	Reason       string    `json:"trigger_reason"`
	Reached      string    `json:"reached"`
	TriggeredAt  time.Time `json:"triggered_at"`
	Signed       bool      `json:"signed"`
}

// Event is one line of the event stream (`hermeskilld events`).
type Event struct {
	Time    time.Time      `json:"time"`
	Type    string         `json:"type"` // supervisor event types, plus agent_state, operator_request, config_*
	AgentID string         `json:"agent_id,omitempty"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

// DaemonInfo is GET /v1/info.
type DaemonInfo struct {
	Version     string         `json:"version"`
	PID         int            `json:"pid"`
	StartedAt   time.Time      `json:"started_at"`
	Estopped    bool           `json:"estopped"`
	Containment string         `json:"containment"`
	Agents      map[string]int `json:"agents"` // state -> count
	// Telemetry is the OpenTelemetry export, when it is on.
	Telemetry *TelemetryStats `json:"telemetry,omitempty"`
}

// Caller is who sent a request, from SO_PEERCRED.
type Caller struct {
	PID, UID, GID int
	// Name is "uid:N" plus the user name when known ("uid:1000(alice)").
	Name string
}

// Backend is what the server serves: the daemon implements it.
type Backend interface {
	Info() DaemonInfo
	List() []AgentInfo
	Status(id string) (AgentStatus, error)
	Kill(ctx context.Context, req KillRequest) ([]KillResult, error)
	Estop(ctx context.Context, req EstopRequest) ([]KillResult, error)
	Release(req ReleaseRequest) error
	// Stop, Start and Restart act on one agent; an agent that is not
	// known is ErrNotFound, one in the wrong state ErrConflict.
	Stop(ctx context.Context, req StopRequest) (ActionResult, error)
	Start(ctx context.Context, req StartRequest) (ActionResult, error)
	Restart(ctx context.Context, req RestartRequest) (ActionResult, error)
	// Logs returns the agent's output log from req.Tail lines before its
	// end; with req.Follow, Read blocks for more until ctx ends (then it
	// returns io.EOF). The caller closes it.
	Logs(ctx context.Context, id string, req LogsRequest) (io.ReadCloser, error)
	Revoke(ctx context.Context, req RevokeRequest) (RevokeResult, error)
	// Resume resumes a paused run: ErrNotFound, ErrConflict when it is
	// not paused, ErrBadInput when the budget given does not raise it
	// enough.
	Resume(ctx context.Context, req ResumeRequest) (ResumeResult, error)
	Revocations() []Revocation
	Lift(req LiftRequest) error
	// Budgets lists the budgets across runs; LiftBudget lifts a tripped
	// one (ErrNotFound: no such budget; ErrConflict: not tripped).
	Budgets() []Budget
	LiftBudget(req BudgetLiftRequest) error
	Certs(agentID string) ([]CertSummary, error)
	// Cert returns the raw certificate file for an id (or a path under
	// the certificates directory).
	Cert(certID string) ([]byte, error)
	// Subscribe streams events until cancel is called.
	Subscribe() (events <-chan Event, cancel func())
	// AuditRequest records a changing request before it is acted on.
	AuditRequest(c Caller, method, path string, body any)
}
