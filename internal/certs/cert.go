// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"time"

	"github.com/hermeskill/hermeskilld/internal/escalate"
)

// Schema is the value of the schema field of every certificate this package
// writes, and the only one it reads.
const Schema = "hermeskill.death-certificate.v1"

// Values of the enumerated string fields.
const (
	ModeEnforce = "enforce" // Mode: the agent was killed
	ModeShadow  = "shadow"  // Mode: shadow mode, nothing was signalled
	// ModePaused: a pause record, not a death: a money check's kill
	// threshold paused the run (on_budget: pause); the agent lives on,
	// frozen, until a resume or its pause_timeout.
	ModePaused = "paused"

	ContainmentCgroup = "cgroup" // Containment: the agent had its own cgroup v2
	ContainmentPgroup = "pgroup" // Containment: process group plus /proc descendants

	TriggerAuto     = "auto"     // TriggerType: a terminal symptom
	TriggerManual   = "manual"   // TriggerType: an operator, a signal to hermeskilld, the e-stop
	TriggerExternal = "external" // TriggerType, and TriggerCheck: died by a signal hermeskilld did not send

	// Escalation.Reached is the ladder's stage, named as package escalate
	// names it.
	ReachedNone        = string(escalate.StageNone)        // nothing was sent (shadow, external, exited first)
	ReachedCooperative = string(escalate.StageCooperative) // died after the directive or cooperative signal
	ReachedSigterm     = string(escalate.StageSIGTERM)     // died after SIGTERM
	ReachedSigkill     = string(escalate.StageSIGKILL)     // SIGKILL was needed

	SeverityWarning  = "warning"  // Symptom.Severity: logged, kept, sent as a directive
	SeverityTerminal = "terminal" // Symptom.Severity: the agent must die

	AlgEd25519 = "ed25519" // Signature.Alg
)

// Denials is what the agent's confinement (Landlock) refused it, as the
// kernel's audit log told it: how many, by what refused them
// ("fs.write_file", "fs.make_reg", "scope.signal", …), and the last few.
type Denials struct {
	Count     int            `json:"count"`
	ByBlocker map[string]int `json:"by_blocker,omitempty"`
	Recent    []Denial       `json:"recent,omitempty"`
}

// Denial is one refused access: the path, or the process signalled.
type Denial struct {
	Blockers string `json:"blockers"`
	Target   string `json:"target,omitempty"`
	PID      int    `json:"pid,omitempty"`
}

// Certificate is one death certificate. The package comment describes every
// field. Times are written as RFC 3339 with nanoseconds in UTC, and a zero
// time as null; nil slices are written as [] (a reader can always iterate).
type Certificate struct {
	Schema         string            `json:"schema"`
	CertID         string            `json:"cert_id"`
	AgentID        string            `json:"agent_id"`
	Host           string            `json:"host"`
	Mode           string            `json:"mode"`
	Labels         map[string]string `json:"labels,omitempty"`
	Command        []string          `json:"command"`
	PID            int               `json:"pid"`
	Containment    string            `json:"containment,omitempty"`
	Confinement    string            `json:"confinement,omitempty"`
	Denials        *Denials          `json:"denials,omitempty"`
	StartedAt      time.Time         `json:"started_at"`
	TriggeredAt    time.Time         `json:"triggered_at"`
	TerminatedAt   time.Time         `json:"terminated_at"`
	TriggerType    string            `json:"trigger_type"`
	TriggerCheck   string            `json:"trigger_check"`
	TriggerReason  string            `json:"trigger_reason"`
	Operator       *string           `json:"operator"`
	OperatorReason *string           `json:"operator_reason"`
	Escalation     Escalation        `json:"escalation"`
	Exit           Exit              `json:"exit"`
	SymptomsLog    []Symptom         `json:"symptoms_log"`
	ShutdownLog    []Step            `json:"shutdown_log"`
	FinalState     FinalState        `json:"final_state"`
	ProcessTree    []Proc            `json:"process_tree"`
	LastOutput     *LastOutput       `json:"last_output,omitempty"`
	Survivors      []Survivor        `json:"survivors"`
	// SurvivorsUnknown, when set, says why Survivors is not known to be
	// whole (the tree could not be listed): an empty list then proves
	// nothing.
	SurvivorsUnknown string   `json:"survivors_unknown,omitempty"`
	Metered          *Metered `json:"metered,omitempty"`
	// ParentRun is the run this one was started inside: the agent id of
	// the supervised run whose gateway this run's LLM traffic went
	// through (a sub-agent's supervise); empty for a top-level run.
	ParentRun string `json:"parent_run,omitempty"`
	// Children are the runs started inside this one whose LLM traffic
	// went through its gateway, each with what it (and its own children)
	// spent: all of it is in Metered too.
	Children []ChildRun `json:"children,omitempty"`
	// Egress is what the agent's egress proxy passed and refused
	// (network: allowlist); absent otherwise.
	Egress      *Egress      `json:"egress,omitempty"`
	AuditAnchor *AuditAnchor `json:"audit_anchor,omitempty"`
	// InternalError is set when hermeskilld's own code serving the run
	// panicked (check internal_error).
	InternalError *InternalError `json:"internal_error,omitempty"`
	// Pauses are the run's pauses for a money check (on_budget: pause),
	// oldest first: in a pause record, the pause it records; in a
	// certificate, every pause of the run, the last one unresumed when
	// its timeout (or a kill while paused) ended it.
	Pauses    []Pause    `json:"pauses,omitempty"`
	Signature *Signature `json:"signature,omitempty"`
}

// Egress is what the egress proxy of a network: allowlist agent did: its
// allowlist, the tunnels and requests it passed and refused, the bytes
// both ways, and its top destinations.
type Egress struct {
	Allow    []string `json:"allow"`
	Passed   int64    `json:"passed"`    // CONNECT tunnels and plain requests
	Failed   int64    `json:"failed"`    // 502: allowed, but not resolved or not reached
	Refused  int64    `json:"refused"`   // 403: not listed, a private address, after the revocation
	OverCap  int64    `json:"over_cap"`  // 503: the tunnels at their bound
	BytesOut int64    `json:"bytes_out"` // from the agent
	BytesIn  int64    `json:"bytes_in"`  // to the agent
	// TunnelsCut counts the tunnels and requests the revocation closed;
	// Revoked says it happened (the shutdown log has when).
	TunnelsCut int  `json:"tunnels_cut"`
	Revoked    bool `json:"revoked"`
	// LastByteAt is when the proxy last passed a byte, either way (null:
	// never): after a kill, how long after the decision anything got
	// through.
	LastByteAt time.Time `json:"last_byte_at"`
	// Destinations are the top destinations by bytes, then refusals, as
	// the client asked for them (host:port); DestinationsOmitted counts
	// the others.
	Destinations        []EgressDestination `json:"destinations"`
	DestinationsOmitted int                 `json:"destinations_omitted,omitempty"`
}

// EgressDestination is one destination's figures.
type EgressDestination struct {
	Destination   string `json:"destination"`
	Passed        int64  `json:"passed"`
	Failed        int64  `json:"failed"`
	Refused       int64  `json:"refused"`
	RefusedReason string `json:"refused_reason,omitempty"` // the last refusal's
	BytesOut      int64  `json:"bytes_out"`
	BytesIn       int64  `json:"bytes_in"`
}

// ChildRun is what a run started inside another spent through the
// other's gateway, as the other's gateway metered it.
type ChildRun struct {
	Run      string  `json:"run"` // its agent id
	Requests int64   `json:"requests"`
	Tokens   int64   `json:"tokens"`
	CostUSD  float64 `json:"cost_usd"`
}

// Pause is one pause of a run: since when, for which check, how it was
// held, and how it ended.
type Pause struct {
	PausedAt time.Time `json:"paused_at"`
	Check    string    `json:"check"`
	Reason   string    `json:"reason"`
	// Frozen is how the tree was frozen: "cgroup" (cgroup.freeze),
	// "sigstop" (SIGSTOP to every process), or "" when it could not be
	// (FreezeError says why).
	Frozen      string `json:"frozen"`
	FreezeError string `json:"freeze_error,omitempty"`
	// HeldRequests counts the LLM requests the gateway held at the pause.
	HeldRequests int   `json:"held_requests"`
	TimeoutMS    int64 `json:"timeout_ms"`
	// EndedAt is when the pause ended (zero while it lasts); Ended says
	// how: "resumed" (by Operator, to the budget in Budget), "timeout",
	// or "killed" (an operator's kill, an internal error, hermeskilld's
	// own stop).
	EndedAt    time.Time `json:"ended_at"`
	Ended      string    `json:"ended,omitempty"`
	DurationMS float64   `json:"duration_ms"`
	Operator   string    `json:"operator,omitempty"`
	// Budget is the budget a resume raised the run's to: "cost $2.00",
	// "tokens 20000".
	Budget string `json:"budget,omitempty"`
}

// How a pause ended (Pause.Ended).
const (
	PauseResumed = "resumed"
	PauseTimeout = "timeout"
	PauseKilled  = "killed"
)

// InternalError is a panic recovered in hermeskilld's code serving the
// run: where, the panic's value and the panicking goroutine's stack (its
// top, at most 8 KiB).
type InternalError struct {
	Component string `json:"component"` // run_loop, ladder, slot, gateway_meter
	Panic     string `json:"panic"`
	Stack     string `json:"stack"`
}

// Metered is what hermeskilld's LLM gateway counted on the wire during the
// run (present when the agent's LLM traffic went through it): the figures
// the tokens and cost checks used. final_state's tokens and cost_usd stay
// what the agent reported about itself (Render shows both, labelled).
type Metered struct {
	Requests int64 `json:"requests"` // that reached the upstream
	Refused  int64 `json:"refused"`  // after the revocation, or outside the API
	// Errors counts upstream statuses >= 400 and transport errors; a
	// request cut by the revocation is not one.
	Errors  int64   `json:"errors"`
	Tokens  int64   `json:"tokens"`   // every model's input and output tokens
	CostUSD float64 `json:"cost_usd"` // the priced models' cost
	// UsageUnknown counts the requests whose usage was never read (a
	// stream aborted or cut before it, a body over its bound): each is
	// charged at its reservation, its worst case.
	UsageUnknown int64 `json:"usage_unknown,omitempty"`
	// StreamsCut counts the streams the gateway ended at the budget;
	// OvershootTokens and OvershootUSD sum what they cost past it (each at
	// most its last event's output tokens).
	StreamsCut      int64   `json:"streams_cut,omitempty"`
	OvershootTokens int64   `json:"overshoot_tokens,omitempty"`
	OvershootUSD    float64 `json:"overshoot_usd,omitempty"`
	// CostKnown is false when a model had no price (cost_usd then counts
	// only the priced ones) or a request's usage was unknown (cost_usd
	// counts its reservation).
	CostKnown      bool         `json:"cost_known"`
	Models         []ModelUsage `json:"models"`           // by model name
	FirstRequestAt time.Time    `json:"first_request_at"` // zero: none
	LastRequestAt  time.Time    `json:"last_request_at"`
	RevokedAt      time.Time    `json:"revoked_at"` // zero: not revoked
}

// ModelUsage is one model's metered use.
type ModelUsage struct {
	Model             string  `json:"model"`
	Requests          int64   `json:"requests"`
	InputTokens       int64   `json:"input_tokens"` // cached ones included
	OutputTokens      int64   `json:"output_tokens"`
	CachedInputTokens int64   `json:"cached_input_tokens"`
	CostUSD           float64 `json:"cost_usd"`
	Priced            bool    `json:"priced"`                  // false: cost_usd is 0 and means unknown
	UsageUnknown      int64   `json:"usage_unknown,omitempty"` // its requests charged at their reservation
}

// Escalation says how far the ladder went and with which settings.
type Escalation struct {
	Reached     string `json:"reached"`
	CoopSignal  string `json:"coop_signal"`
	CoopGraceMS int64  `json:"coop_grace_ms"`
	TermGraceMS int64  `json:"term_grace_ms"`
}

// Exit is how the agent's main process ended: Code when it exited, Signal
// when a signal ended it (the other one is nil and written as null).
type Exit struct {
	Code       *int    `json:"code"`
	Signal     *string `json:"signal"`
	CoreDumped bool    `json:"core_dumped"`
}

// Symptom is one warning or terminal symptom, as the checks reported it.
type Symptom struct {
	At        time.Time `json:"at"`
	Check     string    `json:"check"`
	Severity  string    `json:"severity"`
	Observed  string    `json:"observed"`
	Threshold string    `json:"threshold"`
	Message   string    `json:"message"`
}

// Step is one rung of the escalation ladder as it was carried out. Step
// names it as package escalate does (its Step constants).
type Step struct {
	Step       string         `json:"step"`
	At         time.Time      `json:"at"`
	DurationMS float64        `json:"duration_ms"`
	Detail     map[string]any `json:"detail,omitempty"`
}

// FinalState is what hermeskilld last knew about the agent.
type FinalState struct {
	Status          string    `json:"status"`
	Progress        int64     `json:"progress"`
	Tokens          int64     `json:"tokens"`
	CostUSD         float64   `json:"cost_usd"`
	LastTool        string    `json:"last_tool"`
	LastHeartbeatAt time.Time `json:"last_heartbeat_at"`
	Heartbeats      int64     `json:"heartbeats"`
	PeakRSSBytes    int64     `json:"peak_rss_bytes"`
	CPUUserS        float64   `json:"cpu_user_s"`
	CPUSysS         float64   `json:"cpu_sys_s"`
	ProcsKilled     int       `json:"procs_killed"`
	Errors          int64     `json:"errors"`
	Errno           *int      `json:"errno,omitempty"`
}

// Proc is one process of the agent's tree, snapshotted when the kill began.
type Proc struct {
	PID      int     `json:"pid"`
	PPID     int     `json:"ppid"`
	Cmdline  string  `json:"cmdline"`
	State    string  `json:"state"`
	RSSBytes int64   `json:"rss_bytes"`
	CPUS     float64 `json:"cpu_s"`
	Threads  int     `json:"threads"`
	FDs      int     `json:"fds"`
}

// LastOutput is the tail (up to 64 KiB each) of the agent's output streams.
type LastOutput struct {
	Stderr string `json:"stderr"`
	Stdout string `json:"stdout"`
}

// Survivor is a process still alive when hermeskilld gave up waiting.
type Survivor struct {
	PID     int    `json:"pid"`
	State   string `json:"state"`
	Cmdline string `json:"cmdline"`
}

// AuditAnchor is the head of the audit log when the certificate was made:
// the seq of the log's last line and the sha256 of that line, as the audit
// log's anchor holds them. A log that no longer has that line with that
// hash was cut or changed after the death was recorded.
type AuditAnchor struct {
	Seq    uint64 `json:"seq"`
	SHA256 string `json:"sha256"`
}

// Signature is an Ed25519 signature over the certificate's canonical JSON
// without the signature field (see Canonical).
type Signature struct {
	Alg   string `json:"alg"`
	KeyID string `json:"key_id"`
	Value string `json:"value"`
}
