// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package recorder fans a supervised agent's events out to the records
// kept of it: the hash-chained audit log, Prometheus metrics, the
// control-plane outbox and the daemon's event stream. supervise and the
// daemon both record through it, so one event means the same thing in
// every record. Nothing here may block: events come from the kill path.
package recorder

import (
	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/audit"
	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
)

// Observer is the metrics side (internal/metrics.Metrics).
type Observer interface {
	Observe(ev supervisor.Event)
}

// Outbox is the control-plane delivery side (internal/outbox.Outbox):
// Enqueue must only write the item durably and return.
type Outbox interface {
	Enqueue(c *certs.Certificate, raw []byte) error
}

// Recorder dispatches events; every field may be nil.
type Recorder struct {
	Audit   *audit.Async
	Metrics Observer
	Outbox  Outbox
	// Stream receives every event too (the daemon's event stream).
	Stream func(supervisor.Event)
	// Telemetry exports every event over OpenTelemetry
	// (internal/telemetry.Exporter): Event must only queue it.
	Telemetry Sink
	Log       *zap.Logger
}

// Sink takes events without blocking.
type Sink interface {
	Event(ev supervisor.Event)
}

// Event records one supervisor event. It is safe for concurrent use as
// long as the sinks are.
func (r *Recorder) Event(ev supervisor.Event) {
	if r.Audit != nil {
		if !r.Audit.Append(AuditEvent(ev)) && r.Log != nil {
			r.Log.Error("audit queue full; event not recorded", zap.String("type", ev.Type), zap.String("agent", ev.AgentID))
		}
	}
	if r.Metrics != nil {
		r.Metrics.Observe(ev)
	}
	// A certificate that could not be written goes to the control plane
	// too: there it may be the only copy besides the log.
	if r.Outbox != nil && (ev.Type == supervisor.EventCertificate || ev.Type == supervisor.EventCertFailed) && ev.Cert != nil {
		if raw, err := certs.Marshal(ev.Cert); err == nil {
			if err := r.Outbox.Enqueue(ev.Cert, raw); err != nil && r.Log != nil {
				r.Log.Error("certificate not queued for the control plane", zap.String("cert", ev.Cert.CertID), zap.Error(err))
			}
		}
	}
	if r.Stream != nil {
		r.Stream(ev)
	}
	if r.Telemetry != nil {
		r.Telemetry.Event(ev)
	}
}

// AuditEvent is the audit log's line for a supervisor event. Tool
// arguments never appear: events carry only their hashes.
func AuditEvent(ev supervisor.Event) audit.Event {
	data := map[string]any{"at": ev.Time}
	if ev.PID != 0 {
		data["pid"] = ev.PID
	}
	sync := false
	switch ev.Type {
	case supervisor.EventSymptom:
		if s := ev.Symptom; s != nil {
			data["check"], data["severity"] = s.Check, s.Severity
			data["observed"], data["threshold"], data["message"] = s.Observed, s.Threshold, s.Message
			if s.Operator != "" {
				data["operator"], data["reason"] = s.Operator, s.Reason
			}
		}
	case supervisor.EventStep:
		if s := ev.Step; s != nil {
			data["step"], data["duration_ms"] = s.Name, float64(s.Duration.Microseconds())/1000
			if len(s.Detail) > 0 {
				data["detail"] = s.Detail
			}
		}
	case supervisor.EventExited:
		if e := ev.Exit; e != nil {
			data["exit"] = e.String()
			data["status"] = e.ShellCode()
		}
		// The run's totals: what the checks counted (metered, with the
		// gateway), the agent's own reports, the gateway's count.
		if ev.Usage != nil {
			data["usage"] = ev.Usage
			data["runtime_s"] = ev.Runtime.Seconds()
		}
	case supervisor.EventEgressRefused:
		// The first refusal of each destination (the counts are the
		// certificate's).
		if r := ev.Egress; r != nil {
			data["destination"], data["reason"] = r.Destination, r.Reason
		}
	case supervisor.EventLLMRequest:
		// One line per LLM request: what it cost and which tools it
		// called, never its prompt, its completion or a key.
		if r := ev.LLM; r != nil {
			data["upstream"], data["path"], data["model"], data["status"] = r.Upstream, r.Path, r.Model, r.Status
			data["stream"], data["duration_ms"] = r.Stream, float64(r.Duration.Microseconds())/1000
			data["input_tokens"], data["output_tokens"], data["cached_input_tokens"] = r.InputTokens, r.OutputTokens, r.CachedInputTokens
			data["cost_usd"], data["priced"] = r.CostUSD, r.Priced
			if r.Refused {
				data["refused"] = true
			}
			if r.UsageUnknown {
				data["usage_unknown"] = true // charged at its reservation
			}
			if r.Cut && r.OverBudget != "" { // a stream cut at the budget
				data["cut_at_budget"] = r.OverBudget
				data["overshoot_tokens"], data["overshoot_usd"] = r.OvershootTokens, r.OvershootUSD
			}
			if len(r.ToolCalls) > 0 {
				names := make([]string, len(r.ToolCalls))
				for i, t := range r.ToolCalls {
					names[i] = t.Name
				}
				data["tools"] = names
			}
			if r.Err != "" {
				data["error"] = r.Err
			}
		}
	case supervisor.EventPaused, supervisor.EventResumed:
		sync = true // a pause is certificate-level: it reaches the disk before we go on
		if p := ev.Pause; p != nil {
			data["check"], data["reason"], data["paused_at"] = p.Check, p.Reason, p.PausedAt
			data["frozen"], data["held_requests"], data["timeout_ms"] = p.Frozen, p.HeldRequests, p.TimeoutMS
			if p.FreezeError != "" {
				data["freeze_error"] = p.FreezeError
			}
			if p.Ended != "" {
				data["ended"], data["duration_ms"], data["budget"] = p.Ended, p.DurationMS, p.Budget
				if p.Operator != "" {
					data["operator"] = p.Operator
				}
			}
		}
		if c := ev.Cert; c != nil {
			data["cert_id"] = c.CertID
		}
		if ev.CertPath != "" {
			data["path"] = ev.CertPath
		}
		if ev.Err != nil {
			data["error"] = ev.Err.Error()
		}
	case supervisor.EventCertificate, supervisor.EventCertFailed:
		sync = true // certificate-level events reach the disk before we go on
		if c := ev.Cert; c != nil {
			data["cert_id"], data["trigger_type"], data["trigger_check"] = c.CertID, c.TriggerType, c.TriggerCheck
			data["reached"], data["mode"] = c.Escalation.Reached, c.Mode
		}
		if ev.CertPath != "" {
			data["path"] = ev.CertPath
		}
		if ev.Err != nil {
			data["error"] = ev.Err.Error()
		}
	}
	return audit.Event{Type: ev.Type, AgentID: ev.AgentID, Data: data, Sync: sync}
}
