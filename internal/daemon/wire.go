// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"time"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// The control API's wire types are filled here, from what the supervisor
// publishes: a field renamed inside hermeskilld changes this file, never
// what clients receive.

func wireRun(st supervisor.Status) *control.RunStatus {
	a := st.Agent
	r := &control.RunStatus{
		State: st.State, PID: st.PID, Containment: st.Containment, Confinement: st.Confinement, Mode: string(st.Mode),
		StartedAt: st.Started.UTC(), Socket: st.Socket, StreamSocket: st.StreamSocket,
		Agent: control.AgentReport{
			Ready: a.Ready, ReadyAt: utc(a.ReadyAt), Status: a.Status, Stopping: a.Stopping,
			Progress: a.Progress, LastProgressAt: utc(a.LastProgressAt), Tokens: a.Tokens, CostUSD: a.CostUSD,
			LastTool: a.LastTool, LastHeartbeatAt: utc(a.LastHeartbeat), Heartbeats: a.Heartbeats,
			Errors: a.Errors, LastError: a.LastError, ErrorStreak: a.ErrorStreak, DumpSignal: a.DumpSignal,
			Warnings: a.Warnings,
		},
		Tree: control.TreeSample{RSSBytes: st.Sample.RSSBytes, CPUPercent: st.Sample.CPUPercent, Tasks: st.Sample.Procs},
		Messages: control.MessageCounts{
			Received: st.Heartbeat.Received, Accepted: st.Heartbeat.Accepted, Dropped: st.Heartbeat.Dropped(),
			Oversize: st.Heartbeat.Oversize, Malformed: st.Heartbeat.Malformed, Forged: st.Heartbeat.Forged,
			Unverifiable: st.Heartbeat.Unverifiable, RateLimited: st.Heartbeat.RateLimited,
			Overflow: st.Heartbeat.Overflow, Directives: st.Heartbeat.Directives,
			StreamAccepted: st.Heartbeat.StreamAccepted, StreamRefused: st.Heartbeat.StreamRefused,
			StreamOverLimit: st.Heartbeat.StreamOverLimit, StreamDropped: st.Heartbeat.StreamDropped,
			MaxIntakeLagMS: float64(st.Heartbeat.MaxIntakeLag.Microseconds()) / 1000,
		},
	}
	if a.HeartbeatTimeout > 0 {
		r.Agent.HeartbeatTimeout = a.HeartbeatTimeout.String()
	}
	if st.Sample.HaveFDs {
		fds := st.Sample.FDs
		r.Tree.FDs = &fds
	}
	if st.Sample.HaveDenials {
		n := st.Sample.Denials
		r.Tree.Denials = &n
	}
	if e := st.SamplerError; e != nil {
		r.SamplerError = &control.SamplerError{Error: e.Err, At: e.At.UTC(), Failures: e.Failures, BlindSince: utc(e.BlindSince),
			FDsBlindSince: utc(e.FDsBlindSince)}
	}
	if st.Trigger != nil {
		t := wireSymptom(*st.Trigger)
		r.Trigger = &t
	}
	r.Pause = WirePause(st.Pause)
	return r
}

// setUsage puts a run's usage in its row: the effective figures (the
// metered ones with the gateway), the agent's reports beside them.
func setUsage(info *control.AgentInfo, u supervisor.Usage) {
	info.Tokens, info.CostUSD = u.Tokens, u.CostUSD
	info.ReportedTokens, info.ReportedCostUSD = u.ReportedTokens, u.ReportedCostUSD
	if m := u.Metered; m != nil {
		info.Metered = &control.MeteredUsage{Requests: m.Requests, InFlight: m.InFlight, Refused: m.Refused,
			Errors: m.Errors, Tokens: m.Tokens, CostUSD: m.CostUSD, CostKnown: m.CostKnown}
	}
}

func wireSymptom(s symptoms.Symptom) control.Symptom {
	return control.Symptom{At: s.At.UTC(), Check: string(s.Check), Severity: string(s.Severity),
		Observed: s.Observed, Threshold: s.Threshold, Message: s.Message}
}

func wireSymptoms(in []symptoms.Symptom) []control.Symptom {
	if len(in) == 0 {
		return nil
	}
	out := make([]control.Symptom, len(in))
	for i, s := range in {
		out[i] = wireSymptom(s)
	}
	return out
}

// utc is t in UTC; the zero time stays zero (and is left out of the JSON).
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}
