// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"
	"sync"
	"time"

	"github.com/hermeskill/hermeskilld/internal/audit"
	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
)

// subscriberQueue bounds what one slow `hermeskilld events` may lag
// behind; past it, its events are dropped (it never slows agents).
const subscriberQueue = 1024

// bus fans events out to the event stream's subscribers.
type bus struct {
	mu   sync.Mutex
	subs map[chan control.Event]struct{}
}

func newBus() *bus { return &bus{subs: map[chan control.Event]struct{}{}} }

func (b *bus) publish(ev control.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}

func (b *bus) subscribe() (<-chan control.Event, func()) {
	ch := make(chan control.Event, subscriberQueue)
	b.mu.Lock()
	b.subs[ch] = struct{}{}
	b.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.subs, ch)
			b.mu.Unlock()
		})
	}
}

func (d *Daemon) publish(ev control.Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	d.bus.publish(ev)
}

func (d *Daemon) publishState(id, state, note string) {
	d.publish(control.Event{Type: "agent_state", AgentID: id, Message: state + noteSuffix(note), Data: map[string]any{"state": state}})
}

func (d *Daemon) publishConfig(id, typ, msg string) {
	d.publish(control.Event{Type: typ, AgentID: id, Message: msg})
}

func noteSuffix(note string) string {
	if note == "" {
		return ""
	}
	return ": " + note
}

func (d *Daemon) audit(ev audit.Event) {
	if !d.h.Recorder.Audit.Append(ev) {
		d.log.Error("audit queue full; event not recorded")
	}
}

// streamEvent turns a supervisor event into an event-stream line.
func (d *Daemon) streamEvent(ev supervisor.Event) {
	out := control.Event{Time: ev.Time.UTC(), Type: ev.Type, AgentID: ev.AgentID}
	switch ev.Type {
	case supervisor.EventStarted:
		out.Message = fmt.Sprintf("started, pid %d", ev.PID)
	case supervisor.EventSymptom:
		if s := ev.Symptom; s != nil {
			out.Message = fmt.Sprintf("%s %s: %s", s.Severity, s.Check, s.Message)
			out.Data = map[string]any{"check": s.Check, "severity": s.Severity}
		}
	case supervisor.EventStep:
		if s := ev.Step; s != nil {
			out.Message = fmt.Sprintf("%s (%.1fms)", s.Name, float64(s.Duration.Microseconds())/1000)
			out.Data = map[string]any{"step": s.Name}
		}
	case supervisor.EventExited:
		if e := ev.Exit; e != nil {
			out.Message = e.String()
		}
		if ev.Usage != nil {
			out.Data = map[string]any{"usage": ev.Usage, "runtime_s": ev.Runtime.Seconds()}
		}
	case supervisor.EventCertificate:
		out.Message = "certificate " + ev.CertPath
		if c := ev.Cert; c != nil {
			out.Data = map[string]any{"cert_id": c.CertID, "trigger_check": c.TriggerCheck, "reached": c.Escalation.Reached}
		}
	case supervisor.EventCertFailed:
		out.Message = fmt.Sprintf("certificate not written: %v", ev.Err)
	case supervisor.EventPaused:
		if p := ev.Pause; p != nil {
			out.Message = fmt.Sprintf("paused (%s: %s); %d LLM request(s) held, tree frozen (%s); pause record %s",
				p.Check, p.Reason, p.HeldRequests, p.Frozen, ev.CertPath)
			out.Data = map[string]any{"check": p.Check, "held_requests": p.HeldRequests, "timeout_ms": p.TimeoutMS}
		}
	case supervisor.EventEgressRefused:
		if r := ev.Egress; r != nil {
			out.Message = fmt.Sprintf("egress to %s refused: %s", r.Destination, r.Reason)
			out.Data = map[string]any{"destination": r.Destination, "reason": r.Reason}
		}
	case supervisor.EventResumed:
		if p := ev.Pause; p != nil {
			out.Message = fmt.Sprintf("resumed by %s after %.1fs paused; budget now %s", p.Operator, p.DurationMS/1000, p.Budget)
			out.Data = map[string]any{"budget": p.Budget, "duration_ms": p.DurationMS}
		}
	}
	d.publish(out)
}
