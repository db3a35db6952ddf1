// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"context"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/trace"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// The attributes of hermeskilld's own records and spans.
const (
	AttrAgentID     = "hermeskill.agent.id"
	AttrLabelPrefix = "hermeskill.label." // + the label's key
	AttrEvent       = "hermeskill.event"  // the event's type: symptom, certificate_written, …
	AttrCheck       = "hermeskill.check"
	AttrSeverity    = "hermeskill.severity"
	AttrReason      = "hermeskill.reason"
	AttrStage       = "hermeskill.stage" // the ladder's stage reached
	AttrTriggerType = "hermeskill.trigger_type"
	AttrExitCode    = "hermeskill.exit_code" // the shell's status: 128+N after signal N
	AttrExitSignal  = "hermeskill.exit_signal"
	AttrCertID      = "hermeskill.cert_id"
	AttrMode        = "hermeskill.mode" // enforce, shadow, paused
)

// runSpan is the span of an agent's run, from agent_started to
// agent_exited; its requests through the gateway are its children.
type runSpan struct {
	span trace.Span
	ctx  context.Context
	cert *certs.Certificate // the run's certificate, once written
}

// handle exports one event: a log record for every event but an LLM
// request, which is a span; agent_started and agent_exited start and end
// the run's span.
func (e *Exporter) handle(ev supervisor.Event) {
	run := e.runs[ev.AgentID]
	switch ev.Type {
	case supervisor.EventStarted:
		if run != nil { // a run whose end was never seen
			e.endRun(ev.AgentID, run, ev.Time, nil)
		}
		run = e.startRun(ev)
	case supervisor.EventLLMRequest:
		if ev.LLM != nil {
			e.llmSpan(ev, run)
		}
		return
	case supervisor.EventCertificate, supervisor.EventCertFailed:
		if run != nil && ev.Cert != nil {
			run.cert = ev.Cert
		}
	}
	ctx := context.Background()
	if run != nil {
		ctx = run.ctx
	}
	e.emit(ctx, ev)
	if ev.Type == supervisor.EventExited && run != nil {
		e.endRun(ev.AgentID, run, ev.Time, &ev)
	}
}

func (e *Exporter) startRun(ev supervisor.Event) *runSpan {
	if e.tracer == nil {
		return nil
	}
	attrs := append(agentAttrs(ev.AgentID, ev.Labels), attribute.Int("process.pid", ev.PID))
	ctx, span := e.tracer.Start(context.Background(), "hermeskill.run "+ev.AgentID,
		trace.WithTimestamp(ev.Time), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	run := &runSpan{span: span, ctx: ctx}
	e.runs[ev.AgentID] = run
	return run
}

// endRun ends a run's span with how the run ended (exit nil: not seen).
func (e *Exporter) endRun(id string, run *runSpan, at time.Time, exit *supervisor.Event) {
	delete(e.runs, id)
	if exit != nil && exit.Exit != nil {
		run.span.SetAttributes(attribute.Int(AttrExitCode, exit.Exit.ShellCode()))
	}
	if c := run.cert; c != nil {
		run.span.SetAttributes(certAttrs(c)...)
		if c.TriggerType != certs.TriggerExternal || c.Exit.Signal != nil {
			run.span.SetStatus(codes.Error, c.TriggerReason)
		}
	}
	if !e.take(e.spans) {
		return
	}
	run.span.End(trace.WithTimestamp(at))
}

// endRuns ends the spans of runs still open at Shutdown.
func (e *Exporter) endRuns() {
	now := time.Now()
	for id, run := range e.runs {
		e.endRun(id, run, now, nil)
	}
}

// emit writes ev's log record.
func (e *Exporter) emit(ctx context.Context, ev supervisor.Event) {
	if e.logger == nil || !e.take(e.logs) {
		return
	}
	var r log.Record
	r.SetTimestamp(ev.Time)
	r.SetObservedTimestamp(time.Now())
	r.SetEventName("hermeskill." + ev.Type)
	sev, body, attrs := describe(ev)
	r.SetSeverity(sev)
	r.SetSeverityText(strings.ToUpper(sevText[sev]))
	r.SetBody(attribute.StringValue(body))
	r.AddAttributes(agentAttrs(ev.AgentID, ev.Labels)...)
	r.AddAttributes(attribute.String(AttrEvent, ev.Type))
	if ev.PID != 0 {
		r.AddAttributes(attribute.Int("process.pid", ev.PID))
	}
	r.AddAttributes(attrs...)
	e.logger.Emit(ctx, r)
}

var sevText = map[log.Severity]string{log.SeverityInfo: "info", log.SeverityWarn: "warn", log.SeverityError: "error"}

// describe is an event's severity, its body (a line for a person) and
// its own attributes. Tool arguments, prompts, completions, keys and
// handles are in no event; the environment neither.
func describe(ev supervisor.Event) (log.Severity, string, []attribute.KeyValue) {
	var a []attribute.KeyValue
	switch ev.Type {
	case supervisor.EventStarted:
		return log.SeverityInfo, "agent started", nil
	case supervisor.EventSymptom:
		s := ev.Symptom
		if s == nil {
			break
		}
		a = append(a, attribute.String(AttrCheck, string(s.Check)), attribute.String(AttrSeverity, string(s.Severity)),
			attribute.String(AttrReason, s.Message))
		if s.Observed != "" {
			a = append(a, attribute.String("hermeskill.observed", s.Observed))
		}
		if s.Threshold != "" {
			a = append(a, attribute.String("hermeskill.threshold", s.Threshold))
		}
		if s.Operator != "" {
			a = append(a, attribute.String("hermeskill.operator", s.Operator))
		}
		sev := log.SeverityWarn
		if s.Severity == symptoms.Terminal {
			sev = log.SeverityError
		}
		return sev, string(s.Check) + ": " + s.Message, a
	case supervisor.EventStep:
		s := ev.Step
		if s == nil {
			break
		}
		a = append(a, attribute.String("hermeskill.step", s.Name), attribute.Float64("hermeskill.duration_ms", float64(s.Duration.Microseconds())/1000))
		return log.SeverityWarn, "ladder step " + s.Name, a
	case supervisor.EventExited:
		if x := ev.Exit; x != nil {
			a = append(a, attribute.Int(AttrExitCode, x.ShellCode()), attribute.String("hermeskill.exit", x.String()))
		}
		a = append(a, attribute.Float64("hermeskill.runtime_s", ev.Runtime.Seconds()))
		if u := ev.Usage; u != nil {
			a = append(a, attribute.Int64("hermeskill.tokens", int64(u.Tokens)), attribute.Float64("hermeskill.cost_usd", u.CostUSD))
		}
		body := "agent exited"
		if ev.Exit != nil {
			body += ": " + ev.Exit.String()
		}
		return log.SeverityInfo, body, a
	case supervisor.EventEgressRefused:
		if r := ev.Egress; r != nil {
			a = append(a, attribute.String("hermeskill.destination", r.Destination), attribute.String(AttrReason, r.Reason))
			return log.SeverityWarn, "egress to " + r.Destination + " refused: " + r.Reason, a
		}
	}
	if c := ev.Cert; c != nil { // certificate_written, certificate_failed, and any record shaped like one
		a = certAttrs(c)
		if ev.CertPath != "" {
			a = append(a, attribute.String("hermeskill.cert_path", ev.CertPath))
		}
		sev, body := log.SeverityWarn, "death certificate "+c.CertID+": "+c.TriggerReason
		if c.Mode == "paused" {
			body = "pause record " + c.CertID + ": " + c.TriggerReason
		}
		if ev.Err != nil {
			sev = log.SeverityError
			a = append(a, attribute.String("error.type", "certificate_not_written"), attribute.String("hermeskill.error", ev.Err.Error()))
		}
		return sev, body, a
	}
	if ev.Err != nil {
		return log.SeverityError, ev.Type + ": " + ev.Err.Error(), nil
	}
	return log.SeverityInfo, ev.Type, nil
}

// certAttrs are a certificate's attributes: why, how far the ladder went,
// how the agent ended, what it spent.
func certAttrs(c *certs.Certificate) []attribute.KeyValue {
	a := []attribute.KeyValue{
		attribute.String(AttrCertID, c.CertID), attribute.String(AttrTriggerType, c.TriggerType),
		attribute.String(AttrCheck, c.TriggerCheck), attribute.String(AttrReason, c.TriggerReason),
		attribute.String(AttrStage, c.Escalation.Reached), attribute.String(AttrMode, c.Mode),
	}
	if code, ok := shellCode(c.Exit); ok {
		a = append(a, attribute.Int(AttrExitCode, code))
	}
	if c.Exit.Signal != nil {
		a = append(a, attribute.String(AttrExitSignal, *c.Exit.Signal))
	}
	if c.Operator != nil {
		a = append(a, attribute.String("hermeskill.operator", *c.Operator))
	}
	if m := c.Metered; m != nil {
		a = append(a, attribute.Int64("hermeskill.tokens", m.Tokens), attribute.Float64("hermeskill.cost_usd", m.CostUSD),
			attribute.Int64("hermeskill.llm_requests", m.Requests))
	}
	return a
}

// shellCode is a certificate's exit as a shell's status.
func shellCode(x certs.Exit) (int, bool) {
	if x.Code != nil {
		return *x.Code, true
	}
	if x.Signal != nil {
		if sig, err := config.ParseSignal(*x.Signal); err == nil {
			return 128 + int(sig), true
		}
	}
	return 0, false
}

func agentAttrs(id string, labels map[string]string) []attribute.KeyValue {
	a := make([]attribute.KeyValue, 0, 1+len(labels))
	a = append(a, attribute.String(AttrAgentID, id))
	for k, v := range labels {
		a = append(a, attribute.String(AttrLabelPrefix+k, v))
	}
	return a
}

// llmSpan exports one request through the gateway as a span of the
// OpenTelemetry GenAI semantic conventions, a child of its run's span.
func (e *Exporter) llmSpan(ev supervisor.Event, run *runSpan) {
	if e.tracer == nil {
		return
	}
	r := ev.LLM
	op := operation(r.Path)
	model := r.RequestModel
	if model == "" {
		model = r.Model
	}
	name := op
	if model != "" {
		name += " " + model
	}
	a := append(agentAttrs(ev.AgentID, ev.Labels),
		attribute.String("gen_ai.operation.name", op), attribute.String("gen_ai.provider.name", r.Upstream),
		attribute.Int64("gen_ai.usage.input_tokens", r.InputTokens), attribute.Int64("gen_ai.usage.output_tokens", r.OutputTokens),
		attribute.Int("http.response.status_code", r.Status), attribute.Bool("hermeskill.stream", r.Stream),
		attribute.String("hermeskill.path", r.Path))
	if r.RequestModel != "" {
		a = append(a, attribute.String("gen_ai.request.model", r.RequestModel))
	}
	if r.Model != "" {
		a = append(a, attribute.String("gen_ai.response.model", r.Model))
	}
	if len(r.FinishReasons) > 0 {
		a = append(a, attribute.StringSlice("gen_ai.response.finish_reasons", r.FinishReasons))
	}
	if r.CachedInputTokens > 0 {
		a = append(a, attribute.Int64("gen_ai.usage.cache_read.input_tokens", r.CachedInputTokens))
	}
	if r.Priced {
		a = append(a, attribute.Float64("hermeskill.cost_usd", r.CostUSD))
	}
	if len(r.ToolCalls) > 0 {
		names := make([]string, len(r.ToolCalls))
		for i, t := range r.ToolCalls {
			names[i] = t.Name
		}
		a = append(a, attribute.StringSlice("hermeskill.tool_calls", names))
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{r.Refused, "hermeskill.refused"}, {r.Cut, "hermeskill.cut"}, {r.Incomplete, "hermeskill.incomplete"}, {r.UsageUnknown, "hermeskill.usage_unknown"}} {
		if f.on {
			a = append(a, attribute.Bool(f.name, true))
		}
	}
	ctx := context.Background()
	if run != nil {
		ctx = run.ctx
	}
	_, span := e.tracer.Start(ctx, name, trace.WithTimestamp(r.At), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(a...))
	if !r.Answered() {
		span.SetAttributes(attribute.String("error.type", errorType(r)))
		span.SetStatus(codes.Error, r.Err)
	}
	if !e.take(e.spans) {
		return
	}
	span.End(trace.WithTimestamp(r.At.Add(r.Duration)))
}

// operation is gen_ai.operation.name for an API path.
func operation(path string) string {
	switch path {
	case "chat/completions", "responses", "messages":
		return "chat"
	case "completions":
		return "text_completion"
	case "embeddings":
		return "embeddings"
	}
	return path
}

// errorType is error.type for a request that was not answered in full.
func errorType(r *gateway.Record) string {
	switch {
	case r.Refused && r.OverBudget != "":
		return "hermeskill.over_budget"
	case r.Refused:
		return "hermeskill.refused"
	case r.Cut:
		return "hermeskill.cut"
	case r.Err != "":
		return "hermeskill.upstream_error"
	}
	return strconv.Itoa(r.Status)
}
