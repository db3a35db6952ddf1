// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"bytes"
	"encoding/json"
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

	// Step.Step is one of the ladder's steps, named as package escalate
	// names them (these and the waits between them).
	StepDirectiveSent  = escalate.StepDirective
	StepCoopSignalSent = escalate.StepCoopSignal
	StepSigtermSent    = escalate.StepSIGTERM
	StepSigkillSent    = escalate.StepSIGKILL
	StepReaped         = escalate.StepReaped

	AlgEd25519 = "ed25519" // Signature.Alg
)

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
	SurvivorsUnknown string       `json:"survivors_unknown,omitempty"`
	Metered          *Metered     `json:"metered,omitempty"`
	AuditAnchor      *AuditAnchor `json:"audit_anchor,omitempty"`
	// InternalError is set when hermeskilld's own code serving the run
	// panicked (check internal_error).
	InternalError *InternalError `json:"internal_error,omitempty"`
	Signature     *Signature     `json:"signature,omitempty"`
}

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
// what the agent reported about itself.
type Metered struct {
	Requests int64   `json:"requests"`
	Refused  int64   `json:"refused"` // after the revocation, or outside the API
	Errors   int64   `json:"errors"`  // upstream or transport errors
	Tokens   int64   `json:"tokens"`
	CostUSD  float64 `json:"cost_usd"`
	// UsageUnknown counts the requests whose usage was never read (a
	// stream aborted or cut before it, a body over its bound): each is
	// charged at its reservation, its worst case.
	UsageUnknown int64 `json:"usage_unknown,omitempty"`
	// CostKnown is false when a model had no price (cost_usd then counts
	// only the priced ones) or a request's usage was unknown (cost_usd
	// counts its reservation).
	CostKnown      bool         `json:"cost_known"`
	Models         []ModelUsage `json:"models"`
	FirstRequestAt time.Time    `json:"first_request_at"`
	LastRequestAt  time.Time    `json:"last_request_at"`
	RevokedAt      time.Time    `json:"revoked_at"`
}

// ModelUsage is one model's metered use.
type ModelUsage struct {
	Model             string  `json:"model"`
	Requests          int64   `json:"requests"`
	InputTokens       int64   `json:"input_tokens"`
	OutputTokens      int64   `json:"output_tokens"`
	CachedInputTokens int64   `json:"cached_input_tokens"`
	CostUSD           float64 `json:"cost_usd"`
	Priced            bool    `json:"priced"`
	UsageUnknown      int64   `json:"usage_unknown,omitempty"`
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

// Step is one rung of the escalation ladder as it was carried out.
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

// The wire types mirror the public ones field for field (a test checks it);
// they differ only where the JSON must: times are jsonTime, nil slices [].

type certWire struct {
	Schema           string            `json:"schema"`
	CertID           string            `json:"cert_id"`
	AgentID          string            `json:"agent_id"`
	Host             string            `json:"host"`
	Mode             string            `json:"mode"`
	Labels           map[string]string `json:"labels,omitempty"`
	Command          []string          `json:"command"`
	PID              int               `json:"pid"`
	Containment      string            `json:"containment,omitempty"`
	StartedAt        jsonTime          `json:"started_at"`
	TriggeredAt      jsonTime          `json:"triggered_at"`
	TerminatedAt     jsonTime          `json:"terminated_at"`
	TriggerType      string            `json:"trigger_type"`
	TriggerCheck     string            `json:"trigger_check"`
	TriggerReason    string            `json:"trigger_reason"`
	Operator         *string           `json:"operator"`
	OperatorReason   *string           `json:"operator_reason"`
	Escalation       Escalation        `json:"escalation"`
	Exit             Exit              `json:"exit"`
	SymptomsLog      []Symptom         `json:"symptoms_log"`
	ShutdownLog      []Step            `json:"shutdown_log"`
	FinalState       FinalState        `json:"final_state"`
	ProcessTree      []Proc            `json:"process_tree"`
	LastOutput       *LastOutput       `json:"last_output,omitempty"`
	Survivors        []Survivor        `json:"survivors"`
	SurvivorsUnknown string            `json:"survivors_unknown,omitempty"`
	Metered          *meteredWire      `json:"metered,omitempty"`
	AuditAnchor      *AuditAnchor      `json:"audit_anchor,omitempty"`
	InternalError    *InternalError    `json:"internal_error,omitempty"`
	Signature        *Signature        `json:"signature,omitempty"`
}

type meteredWire struct {
	Requests       int64        `json:"requests"`
	Refused        int64        `json:"refused"`
	Errors         int64        `json:"errors"`
	Tokens         int64        `json:"tokens"`
	CostUSD        float64      `json:"cost_usd"`
	UsageUnknown   int64        `json:"usage_unknown,omitempty"`
	CostKnown      bool         `json:"cost_known"`
	Models         []ModelUsage `json:"models"`
	FirstRequestAt jsonTime     `json:"first_request_at"`
	LastRequestAt  jsonTime     `json:"last_request_at"`
	RevokedAt      jsonTime     `json:"revoked_at"`
}

func (m *Metered) wire() *meteredWire {
	if m == nil {
		return nil
	}
	return &meteredWire{Requests: m.Requests, Refused: m.Refused, Errors: m.Errors, Tokens: m.Tokens, CostUSD: m.CostUSD,
		UsageUnknown: m.UsageUnknown, CostKnown: m.CostKnown, Models: nonNil(m.Models), FirstRequestAt: jsonTime(m.FirstRequestAt),
		LastRequestAt: jsonTime(m.LastRequestAt), RevokedAt: jsonTime(m.RevokedAt)}
}

func (w *meteredWire) public() *Metered {
	if w == nil {
		return nil
	}
	return &Metered{Requests: w.Requests, Refused: w.Refused, Errors: w.Errors, Tokens: w.Tokens, CostUSD: w.CostUSD,
		UsageUnknown: w.UsageUnknown, CostKnown: w.CostKnown, Models: w.Models, FirstRequestAt: time.Time(w.FirstRequestAt),
		LastRequestAt: time.Time(w.LastRequestAt), RevokedAt: time.Time(w.RevokedAt)}
}

type symptomWire struct {
	At        jsonTime `json:"at"`
	Check     string   `json:"check"`
	Severity  string   `json:"severity"`
	Observed  string   `json:"observed"`
	Threshold string   `json:"threshold"`
	Message   string   `json:"message"`
}

type stepWire struct {
	Step       string         `json:"step"`
	At         jsonTime       `json:"at"`
	DurationMS float64        `json:"duration_ms"`
	Detail     map[string]any `json:"detail,omitempty"`
}

type finalStateWire struct {
	Status          string   `json:"status"`
	Progress        int64    `json:"progress"`
	Tokens          int64    `json:"tokens"`
	CostUSD         float64  `json:"cost_usd"`
	LastTool        string   `json:"last_tool"`
	LastHeartbeatAt jsonTime `json:"last_heartbeat_at"`
	Heartbeats      int64    `json:"heartbeats"`
	PeakRSSBytes    int64    `json:"peak_rss_bytes"`
	CPUUserS        float64  `json:"cpu_user_s"`
	CPUSysS         float64  `json:"cpu_sys_s"`
	ProcsKilled     int      `json:"procs_killed"`
	Errors          int64    `json:"errors"`
	Errno           *int     `json:"errno,omitempty"`
}

// MarshalJSON writes the certificate in its schema (see Certificate).
func (c Certificate) MarshalJSON() ([]byte, error) {
	return marshalNoEscape(certWire{
		Schema: c.Schema, CertID: c.CertID, AgentID: c.AgentID, Host: c.Host, Mode: c.Mode,
		Labels: c.Labels, Command: nonNil(c.Command), PID: c.PID, Containment: c.Containment,
		StartedAt: jsonTime(c.StartedAt), TriggeredAt: jsonTime(c.TriggeredAt),
		TerminatedAt: jsonTime(c.TerminatedAt), TriggerType: c.TriggerType,
		TriggerCheck: c.TriggerCheck, TriggerReason: c.TriggerReason, Operator: c.Operator,
		OperatorReason: c.OperatorReason, Escalation: c.Escalation, Exit: c.Exit,
		SymptomsLog: nonNil(c.SymptomsLog), ShutdownLog: nonNil(c.ShutdownLog),
		FinalState: c.FinalState, ProcessTree: nonNil(c.ProcessTree), LastOutput: c.LastOutput,
		Survivors: nonNil(c.Survivors), SurvivorsUnknown: c.SurvivorsUnknown, Metered: c.Metered.wire(), AuditAnchor: c.AuditAnchor, InternalError: c.InternalError, Signature: c.Signature,
	})
}

// UnmarshalJSON reads a certificate; unknown fields are ignored.
func (c *Certificate) UnmarshalJSON(b []byte) error {
	var w certWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*c = Certificate{
		Schema: w.Schema, CertID: w.CertID, AgentID: w.AgentID, Host: w.Host, Mode: w.Mode,
		Labels: w.Labels, Command: w.Command, PID: w.PID, Containment: w.Containment,
		StartedAt: time.Time(w.StartedAt), TriggeredAt: time.Time(w.TriggeredAt),
		TerminatedAt: time.Time(w.TerminatedAt), TriggerType: w.TriggerType,
		TriggerCheck: w.TriggerCheck, TriggerReason: w.TriggerReason, Operator: w.Operator,
		OperatorReason: w.OperatorReason, Escalation: w.Escalation, Exit: w.Exit,
		SymptomsLog: w.SymptomsLog, ShutdownLog: w.ShutdownLog, FinalState: w.FinalState,
		ProcessTree: w.ProcessTree, LastOutput: w.LastOutput, Survivors: w.Survivors,
		SurvivorsUnknown: w.SurvivorsUnknown, Metered: w.Metered.public(), AuditAnchor: w.AuditAnchor, InternalError: w.InternalError, Signature: w.Signature,
	}
	return nil
}

// MarshalJSON writes At as RFC 3339 UTC (null when zero).
func (s Symptom) MarshalJSON() ([]byte, error) {
	return marshalNoEscape(symptomWire{jsonTime(s.At), s.Check, s.Severity, s.Observed, s.Threshold, s.Message})
}

// UnmarshalJSON is the inverse of MarshalJSON.
func (s *Symptom) UnmarshalJSON(b []byte) error {
	var w symptomWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = Symptom{time.Time(w.At), w.Check, w.Severity, w.Observed, w.Threshold, w.Message}
	return nil
}

// MarshalJSON writes At as RFC 3339 UTC (null when zero).
func (s Step) MarshalJSON() ([]byte, error) {
	return marshalNoEscape(stepWire{s.Step, jsonTime(s.At), s.DurationMS, s.Detail})
}

// UnmarshalJSON is the inverse of MarshalJSON (numbers in Detail become float64).
func (s *Step) UnmarshalJSON(b []byte) error {
	var w stepWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = Step{w.Step, time.Time(w.At), w.DurationMS, w.Detail}
	return nil
}

// MarshalJSON writes LastHeartbeatAt as RFC 3339 UTC, or null when there was
// no heartbeat.
func (f FinalState) MarshalJSON() ([]byte, error) {
	return marshalNoEscape(finalStateWire{
		f.Status, f.Progress, f.Tokens, f.CostUSD, f.LastTool, jsonTime(f.LastHeartbeatAt),
		f.Heartbeats, f.PeakRSSBytes, f.CPUUserS, f.CPUSysS, f.ProcsKilled, f.Errors, f.Errno,
	})
}

// UnmarshalJSON is the inverse of MarshalJSON.
func (f *FinalState) UnmarshalJSON(b []byte) error {
	var w finalStateWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*f = FinalState{
		w.Status, w.Progress, w.Tokens, w.CostUSD, w.LastTool, time.Time(w.LastHeartbeatAt),
		w.Heartbeats, w.PeakRSSBytes, w.CPUUserS, w.CPUSysS, w.ProcsKilled, w.Errors, w.Errno,
	}
	return nil
}

// jsonTime is a time.Time written as RFC 3339 with nanoseconds in UTC, and
// null when zero.
type jsonTime time.Time

func (t jsonTime) MarshalJSON() ([]byte, error) {
	if time.Time(t).IsZero() {
		return []byte("null"), nil
	}
	return time.Time(t).UTC().MarshalJSON() // RFC3339Nano; errors for years outside 0-9999
}

func (t *jsonTime) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = jsonTime{}
		return nil
	}
	var tt time.Time
	if err := tt.UnmarshalJSON(b); err != nil {
		return err
	}
	*t = jsonTime(tt.UTC())
	return nil
}

// marshalNoEscape is json.Marshal without HTML escaping ("<" stays "<", for
// people reading the file); an encoder that wants escaping re-escapes the
// result of a MarshalJSON method itself.
func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// nonNil returns s, or an empty slice when s is nil, so it is written as [].
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
