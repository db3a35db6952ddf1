// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package symptoms decides why an agent must die. It owns the symptom
// checks, whose names are stable (config keys, certificates, metrics): it
// turns authenticated heartbeat messages, kernel samples, what the LLM
// gateway saw of the run's traffic and the passing of time into symptoms,
// and reports the first terminal one. Enforcing, it
// stops evaluating deadlines there; in shadow mode (Config.Shadow) every
// check goes on and fires at most once, so each would-be kill is reported.
//
// Everything here is pure decision code: no sockets, no processes, no
// goroutines, no clock reads. Every entry point takes `now`; timeouts are
// expressed as deadlines (NextDeadline) that the caller arms a single timer
// for, and Tick evaluates them against the monotonic clock. A heartbeat that
// moves a deadline and a timer that fires for the old one cannot race: the
// caller owns both in one goroutine and Tick re-checks the current deadline.
package symptoms

import "time"

// Check is a stable check name (config keys, certificates, metrics).
type Check string

// The checks, plus "external" for deaths hermeskilld did not cause.
const (
	StartupTimeout   Check = "startup_timeout"
	HeartbeatTimeout Check = "heartbeat_timeout"
	ProgressTimeout  Check = "progress_timeout"
	MaxRuntime       Check = "max_runtime"
	Memory           Check = "memory"
	CPUSpin          Check = "cpu_spin"
	Procs            Check = "procs"
	FDs              Check = "fds"
	Tokens           Check = "tokens"
	Cost             Check = "cost"
	CostRate         Check = "cost_rate"
	RequestsRate     Check = "requests_rate"
	TokensRate       Check = "tokens_rate"
	ToolLoop         Check = "tool_loop"
	ErrorStreak      Check = "error_streak"
	Steps            Check = "steps"
	// Denials: what the kernel's Landlock refused the agent (a write
	// outside its writable: paths, a signal out of its domain), read from
	// the kernel's audit log (package denials).
	Denials Check = "denials"
	// Budget: a budget across runs (the daemon's budgets:) that this run's
	// spend, with the other runs it matches, crossed. Decided by the
	// daemon, outside the run (Engine.Exceeded).
	Budget       Check = "budget"
	SelfReported Check = "self_reported"
	StopTimeout  Check = "stop_timeout"
	Manual       Check = "manual"
	External     Check = "external"
	// InternalError: hermeskilld's own code serving the run panicked (its
	// loop, its ladder, its slot in the daemon, the gateway's metering of
	// its requests). The run is killed in every mode: fail closed.
	InternalError Check = "internal_error"
	// SupervisorLost: hermeskilld died (SIGKILL, the OOM killer) while the
	// agent ran; its keeper killed the agent, and the next start on the
	// same state wrote the certificate from the run journal.
	SupervisorLost Check = "supervisor_lost"
	// ControlPlaneUnreachable: the host could not reach its control plane
	// for control_plane.fail_closed_after, and stopped its agents rather
	// than run them where no stop could reach them. Real in every mode.
	ControlPlaneUnreachable Check = "control_plane_unreachable"
)

// Severity of a symptom.
type Severity string

// Severities.
const (
	Warning  Severity = "warning"
	Terminal Severity = "terminal"
)

// Symptom is one finding: what was observed, against which threshold, in a
// sentence a person understands.
type Symptom struct {
	At        time.Time
	Check     Check
	Severity  Severity
	Observed  string
	Threshold string
	Message   string
	// Operator and Reason are set for manual kills only.
	Operator string
	Reason   string
}
