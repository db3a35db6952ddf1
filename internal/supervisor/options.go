// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package supervisor runs one agent end to end: it starts the command,
// listens on its heartbeat socket, feeds messages and kernel samples to
// the symptoms engine, climbs the escalation ladder when a terminal symptom
// fires (or an operator asks), and writes the death certificate. Both
// `hermeskilld supervise` (one agent, in the foreground) and the daemon
// (many agents) run agents through this package.
//
// Data flows one way: heartbeat and kernel samples -> symptoms (why) ->
// escalate (how) -> certs (the record). One goroutine per agent owns the
// engine, its single deadline timer and the ladder's start; the ladder
// itself runs on its own goroutine so heartbeats keep being drained while
// the agent is stopped.
package supervisor

import (
	"io"
	"os"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/cgroup"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/denials"
	"github.com/hermeskill/hermeskilld/internal/egress"
	"github.com/hermeskill/hermeskilld/internal/escalate"
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
	"github.com/hermeskill/hermeskilld/internal/keeper"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// Options configures one agent run.
type Options struct {
	Agent   *config.Agent
	Runtime *procsup.Runtime
	// Cgroups, when set, gives the agent its own cgroup; nil means
	// process-group containment.
	Cgroups *cgroup.Manager
	// Exclusive: the runtime supervises only this agent (supervise).
	Exclusive bool
	// Gateway, when set, carries the agent's LLM traffic: the agent gets
	// a grant (base URLs and a handle in its environment), the tokens and
	// cost budgets and tool_loop use what it meters, and the ladder's
	// first step revokes the grant.
	Gateway *gateway.Gateway
	// Denials opens (once, for the whole host) the reader of what the
	// kernel's Landlock refused agents. A run whose files are confined
	// (writable:) counts its denials when it opens; a run with
	// checks.denials is not started when it does not. nil: none counted.
	Denials func() (*denials.Reader, error)
	// Pools are the budgets across runs the run's requests are held in
	// at the gateway besides its own budget (the daemon's); ignored
	// without Gateway.
	Pools []*gateway.Pool
	// Keeper kills the agent's processes should we die. Without a cgroup
	// it must be told about the run; a cgroup it reaps whole.
	Keeper *keeper.Keeper
	// SocketDir is the private directory for the heartbeat socket; it is
	// created (0700, owned by the agent's user) and removed at the end.
	SocketDir string
	// Credential runs the agent as another user; its uid/gid also own the
	// socket. nil: our own user.
	Credential *syscall.Credential
	// Stdin for the agent; nil is /dev/null.
	Stdin *os.File
	// Foreground, when set, is our controlling terminal, whose foreground
	// group we are: the agent's process group becomes its foreground
	// group before the agent execs (procsup.Spec.Foreground). Giving it
	// back is the caller's (package tty).
	Foreground *os.File
	// StdoutDirect/StderrDirect hand a descriptor (a terminal) to the
	// agent as is; otherwise output goes through a pipe to StdoutSink /
	// StderrSink and its last 64 KiB are kept for the certificate.
	StdoutDirect, StderrDirect *os.File
	StdoutSink, StderrSink     io.Writer
	// CertsDir receives the certificates; Signer signs them when set.
	CertsDir string
	// JournalDir, when set, holds the run's journal entry while it runs
	// (package runjournal): should hermeskilld die, the next start writes
	// the certificate from it.
	JournalDir string
	Signer     *certs.Signer
	// AuditHead, when set, is the audit log's head, carried in each
	// certificate (audit_anchor): a log cut after the certificate was
	// delivered no longer reaches it.
	AuditHead func() *certs.AuditAnchor
	// HeartbeatRate limits accepted datagrams per second (0: no limit).
	HeartbeatRate int
	// Poller, when set, reads the agent's socket with the other agents'
	// in batches (the daemon); nil gives the socket its own reader.
	Poller *heartbeat.Poller
	// OnEvent receives every event of the run (audit log, metrics, the
	// daemon's event stream). It must not block.
	OnEvent func(Event)
	Log     *zap.Logger

	// blindAfter, when set, is how long the kernel checks may be blind
	// instead of blindBound (tests: seconds are long).
	blindAfter time.Duration
}

// Event types.
const (
	EventStarted     = "agent_started"
	EventSymptom     = "symptom"
	EventStep        = "ladder_step"
	EventExited      = "agent_exited"
	EventCertificate = "certificate_written"
	EventCertFailed  = "certificate_failed"
	EventLLMRequest  = "llm_request"
	// EventPaused: a money check paused the run (on_budget: pause); Cert
	// is the pause record, CertPath where it was written, Pause the pause.
	EventPaused = "agent_paused"
	// EventResumed: an operator's resume ended the pause (Pause).
	EventResumed = "agent_resumed"
	// EventEgressRefused: the egress proxy refused a destination
	// (Egress), the first time for that destination (network: allowlist).
	EventEgressRefused = "egress_refused"
)

// Event is something that happened to an agent.
type Event struct {
	Time    time.Time
	Type    string
	AgentID string
	// Labels are the agent's labels as its run started (never to be
	// changed: shared with the run).
	Labels  map[string]string
	PID     int
	Symptom *symptoms.Symptom
	Step    *escalate.Step
	Exit    *procsup.ExitStatus
	// Cert is set for certificate events; CertPath when it was written.
	Cert     *certs.Certificate
	CertPath string
	Err      error
	// LLM is one request through the gateway (EventLLMRequest).
	LLM *gateway.Record
	// Dropped counts heartbeat datagrams dropped since the last event of
	// this type (only in EventExited).
	Heartbeat *heartbeat.StatsSnapshot
	// Usage is the run's LLM use at its end (only in EventExited), and
	// Runtime how long it ran.
	Usage   *Usage
	Runtime time.Duration
	// Pause is the pause of EventPaused and EventResumed.
	Pause *certs.Pause
	// Egress is the refusal of EventEgressRefused.
	Egress *egress.Refusal
}

// State of a run.
const (
	StateRunning  = "running"
	StateStopping = "stopping"
	// StatePaused: a money check paused the run (on_budget: pause): its
	// LLM requests held, its tree frozen, until Run.Resume or its
	// pause_timeout.
	StatePaused = "paused"
	StateExited = "exited"
)

// Status is a snapshot of a run for `ps` and `status`.
type Status struct {
	ID          string
	State       string
	PID         int
	Containment string
	// Confinement is what holds the agent's reach: its Landlock domain
	// (landlock.Ruleset's String: "signals", "files", "signals+files" or
	// "none"), with "+network" for its own network namespace.
	Confinement string
	Mode        config.Mode
	Started     time.Time
	Agent       symptoms.State
	Symptoms    []symptoms.Symptom
	Trigger     *symptoms.Symptom
	Sample      symptoms.Sample
	// SamplerError is the kernel sampler's last failure, nil while none
	// failed.
	SamplerError *SamplerError
	Heartbeat    heartbeat.StatsSnapshot
	Socket       string
	// StreamSocket is the stream socket beside Socket.
	StreamSocket string
	// Pause is the pause in progress (State StatePaused), nil otherwise.
	Pause *certs.Pause
	// Usage is the run's LLM use now: the effective tokens and cost (the
	// metered ones with the gateway), the agent's reports, the gateway's
	// count (Run.Status fills it).
	Usage Usage
}

// Outcome is how a run ended.
type Outcome struct {
	Exit procsup.ExitStatus
	// Killed: hermeskilld killed the agent (auto or manual, enforce mode).
	Killed  bool
	Trigger *symptoms.Symptom
	Reached escalate.Stage
	// TreeEmpty: the last ladder found the tree empty (false when
	// processes survived its bounded wait after SIGKILL; true when no
	// ladder ran: the main process exited, alone).
	TreeEmpty bool
	// Cert is the certificate of a kill or an external death (nil for a
	// plain exit); CertPath is empty when writing it failed (CertErr).
	Cert     *certs.Certificate
	CertPath string
	CertErr  error
	// ShadowCerts are the paths of shadow-mode certificates written.
	ShadowCerts []string
	// Usage is the run's LLM use at its end; Runtime is how long it ran,
	// from its start to its main process's exit.
	Usage   Usage
	Runtime time.Duration
}
