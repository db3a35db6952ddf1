// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package host owns the process-wide services of a supervising
// hermeskilld, whether it supervises one agent in the foreground
// (`supervise`, a daemon of one) or every agent of a host (`daemon`):
// containment, the process runtime, the keeper, the certificate signer,
// what a dead hermeskilld left (certificates half written, deaths in the
// run journal), the audit log, the LLM gateway, the shared heartbeat
// poller, the metrics endpoint, the control-plane link and the
// OpenTelemetry export. Open makes them
// in one order, Start starts what runs beside the agents, StopServices and
// Close stop them in the reverse order. RunOptions is what each run is
// started with (supervisor.Start).
//
// It starts no agent and decides nothing about one: the caller owns its
// runs (one run for supervise; slots, the agents directory, quarantine
// and the control API for the daemon).
package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/audit"
	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/cgroup"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/containment"
	"github.com/hermeskill/hermeskilld/internal/fdbudget"
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
	"github.com/hermeskill/hermeskilld/internal/keeper"
	"github.com/hermeskill/hermeskilld/internal/metrics"
	"github.com/hermeskill/hermeskilld/internal/outbox"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/recorder"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
	"github.com/hermeskill/hermeskilld/internal/telemetry"
)

// Kind is what a host supervises, which sets the few ways the two differ.
type Kind int

const (
	// One agent in the foreground (supervise): a person may be watching
	// (containment lines are quiet), the runtime supervises only it, and
	// its socket has a reader of its own.
	One Kind = iota
	// Many agents (the daemon): a service's log, exits found by polling
	// (procsup.Options.PollWait), one heartbeat poller for every socket,
	// a longer audit queue.
	Many
)

// heartbeatBatch is how often a host of many agents reads their sockets:
// one batch for every agent instead of a thread woken per heartbeat (with
// a thousand agents at 1 Hz, those wake-ups were most of the daemon's
// CPU). Heartbeats keep their arrival time and a deadline reads what has
// arrived before it is judged, so detection is not delayed; other messages
// (READY, PROGRESS, STATUS…) are seen up to this much later.
const heartbeatBatch = 100 * time.Millisecond

// Options configures a Host. Paths are absolute or relative to the
// working directory.
type Options struct {
	Kind Kind
	Log  *zap.Logger
	// Containment is config.ContainmentAuto, ContainmentCgroup or
	// ContainmentPgroup (containment.Choose).
	Containment string
	// NoProcesses opens no containment, runtime or keeper: for the
	// daemon's tests, whose runs are fakes. Runs of such a host are not
	// supervised by anything.
	NoProcesses bool
	// StateDir holds the run journal (StateDir/runs) and the control
	// plane's outbox (StateDir/outbox).
	StateDir string
	// CertsDir receives the certificates.
	CertsDir string
	// SigningKey, when set, is the Ed25519 key certificates and the audit
	// log are signed with.
	SigningKey string
	// AuditLog, when set, is the hash-chained audit log; AuditRotate its
	// rotation (MaxBytes, Keep).
	AuditLog    string
	AuditRotate audit.Options
	// Gateway, when on, is the LLM gateway every run's traffic goes
	// through.
	Gateway config.Gateway
	// Metrics, when set, makes a Prometheus registry; it is served on
	// MetricsListen when that is set.
	Metrics       *metrics.Options
	MetricsListen string
	// ControlPlane, when set, delivers certificates through the durable
	// outbox in StateDir and polls for directives (Start).
	ControlPlane *config.ControlPlane
	// Stream receives every event too (the daemon's event stream).
	Stream func(supervisor.Event)
	// Telemetry, when on, exports every event, certificate and gateway
	// request over OpenTelemetry; Version is hermeskilld's, for it.
	Telemetry telemetry.Config
	Version   string
}

// Host is a supervising hermeskilld's services. The fields are set by
// Open and Start and never changed after; nil ones are not configured.
type Host struct {
	Runtime  *procsup.Runtime
	Cgroups  *cgroup.Manager // nil: process-group containment
	Keeper   *keeper.Keeper  // nil as the init of a PID namespace
	Signer   *certs.Signer
	Recorder *recorder.Recorder
	Gateway  *gateway.Gateway
	Poller   *heartbeat.Poller // a host of many agents only
	Metrics  *metrics.Metrics
	// Link is the control plane's; Receipts, for a host of one agent,
	// remembers its certificates for the exit line (Finish).
	Link     *outbox.Link
	Receipts *outbox.Receipts
	// Telemetry is the OpenTelemetry export.
	Telemetry *telemetry.Exporter

	o          Options
	log        *zap.Logger
	journalDir string

	svcCancel context.CancelFunc
	svcs      sync.WaitGroup
	gwDone    chan struct{}
	closeOnce sync.Once
}

// Service names a service in an *Error.
type Service string

// The services Open and Start may fail to open.
const (
	Containment  Service = "containment"
	Runtime      Service = "runtime"
	Keeper       Service = "keeper"
	Signer       Service = "signing key"
	Audit        Service = "audit log"
	Gateway      Service = "gateway"
	ControlPlane Service = "control plane"
	Telemetry    Service = "telemetry"
	Poller       Service = "heartbeat poller"
)

// MetricsOptions are the Prometheus registry's for a config's
// agent_label_limit, where 0 means no per-agent series (metrics takes -1
// for that).
func MetricsOptions(agentLabelLimit int) *metrics.Options {
	if agentLabelLimit == 0 {
		agentLabelLimit = -1
	}
	return &metrics.Options{AgentLabelLimit: agentLabelLimit}
}

// Error is a service that could not be opened. Callers word it for their
// setting (supervise's --signing-key, the daemon file's signing_key).
type Error struct {
	Service Service
	Err     error
}

func (e *Error) Error() string { return string(e.Service) + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Word words err for the caller's settings: an *Error of a service that
// settings names is prefixed with that setting (supervise's
// "--signing-key", the daemon file's "signing_key"), one of another
// service is its own error (which names what failed); any other err is
// returned as it is.
func Word(err error, settings map[Service]string) error {
	var he *Error
	if !errors.As(err, &he) {
		return err
	}
	if s, ok := settings[he.Service]; ok {
		return fmt.Errorf("%s: %w", s, he.Err)
	}
	return he.Err
}

// Open makes the host's services, in this order: containment (removing
// the cgroups a dead hermeskilld left), the runtime, the keeper (so that
// from here a SIGKILL of hermeskilld kills every agent started later),
// the signer, the audit log, the certificates a crash left half written,
// the gateway (not serving yet), the metrics registry, the control plane's
// outbox, and last the certificates of the deaths a SIGKILLed hermeskilld
// left in the run journal (audited and queued like any). On an error what
// was opened is closed again.
//
// Errors: *Error, naming the service.
func Open(o Options) (_ *Host, err error) {
	h := &Host{o: o, log: o.Log, journalDir: filepath.Join(o.StateDir, "runs"), gwDone: make(chan struct{})}
	close(h.gwDone) // until Start serves the gateway
	defer func() {
		// h, not the nil result an error return sets.
		if err != nil {
			h.Close()
		}
	}()
	if !o.NoProcesses {
		if err := h.openProcesses(); err != nil {
			return nil, err
		}
	}
	if o.SigningKey != "" {
		if h.Signer, err = certs.LoadSigner(o.SigningKey); err != nil {
			return nil, &Error{Signer, err}
		}
	}
	h.Recorder = &recorder.Recorder{Log: h.log, Stream: o.Stream}
	if o.AuditLog != "" {
		ao := o.AuditRotate
		if h.Signer != nil { // a nil *Signer in the interface is not nil
			ao.Signer = h.Signer
		}
		l, err := audit.Open(o.AuditLog, ao)
		if err != nil {
			return nil, &Error{Audit, err}
		}
		queue := 4096
		if o.Kind == Many {
			queue = 1 << 14
		}
		h.Recorder.Audit = audit.NewAsync(l, queue, func(err error) { h.log.Error("audit log", zap.Error(err)) })
	}
	supervisor.RecoverCerts(o.CertsDir, h.log)
	if o.Gateway.On() {
		if h.Gateway, err = gateway.FromConfig(o.Gateway, h.log.Named("gateway")); err != nil {
			return nil, &Error{Gateway, err}
		}
	}
	if o.Metrics != nil {
		h.Metrics = metrics.New(*o.Metrics)
		h.Recorder.Metrics = h.Metrics
		if a := h.Recorder.Audit; a != nil {
			h.Metrics.SetAuditSource(func() (uint64, uint64) { return a.Failed(), a.Dropped() })
		}
	}
	if o.ControlPlane != nil {
		if err := h.openControlPlane(); err != nil {
			return nil, err
		}
	}
	if o.Telemetry.On() {
		if err := h.openTelemetry(); err != nil {
			return nil, err
		}
	}
	supervisor.RecoverLost(h.journalDir, h.Signer, h.auditHead(), h.Recorder.Event, h.log)
	return h, nil
}

// openProcesses chooses the containment and opens the runtime and the
// keeper.
func (h *Host) openProcesses() error {
	aud, wait, samplerFiles := containment.Terminal, false, 0
	if h.o.Kind == Many {
		aud, wait, samplerFiles = containment.Service, true, fdbudget.SamplerFiles
	}
	var err error
	if h.Cgroups, err = containment.Choose(h.o.Containment, h.log, aud); err != nil {
		return &Error{Containment, err}
	}
	if h.Runtime, err = procsup.NewRuntime(procsup.Options{PollWait: wait, SamplerFiles: samplerFiles}); err != nil {
		return &Error{Runtime, err}
	}
	// As the init of a PID namespace (a container's entrypoint) no keeper
	// is needed: the kernel kills the whole namespace when its init dies.
	if h.Runtime.IsPID1() {
		return nil
	}
	h.Keeper, err = keeper.Start(keeper.Options{Runtime: h.Runtime, Cgroups: h.Cgroups, JournalDir: h.journalDir, Log: h.log})
	if err != nil {
		return &Error{Keeper, fmt.Errorf("%w (it kills the agents' processes should hermeskilld die; without it they could outlive a SIGKILL)", err)}
	}
	return nil
}

// openControlPlane opens the outbox (its sender and poller run from
// Start).
func (h *Host) openControlPlane() error {
	var onStats func(outbox.Stats)
	if m := h.Metrics; m != nil {
		onStats = func(s outbox.Stats) {
			m.SetOutbox(s.Pending, s.Parked, s.Delivered, s.Failures)
			m.SetOutboxRejected(s.Rejected)
			m.SetOutboxReceipts(s.Receipts.Queued, s.Receipts.Sent, s.Receipts.Parked, s.Receipts.Dropped)
		}
	}
	var err error
	if h.Link, err = outbox.FromConfig(h.o.ControlPlane, h.o.StateDir, h.log, onStats); err != nil {
		return &Error{ControlPlane, err}
	}
	h.Link.Signer = h.Signer // receipts are signed as certificates are
	if h.o.Kind == One {
		h.Receipts = outbox.NewReceipts(h.Link.Outbox, h.o.StateDir)
		h.Recorder.Outbox = h.Receipts
	} else {
		h.Recorder.Outbox = h.Link.Outbox
	}
	if st := h.Link.Outbox.Stats(); st.Pending > 0 {
		h.log.Info("delivering certificates left for the control plane",
			zap.Int("pending", st.Pending), zap.String("state_dir", h.o.StateDir))
	}
	return nil
}

// openTelemetry starts the OpenTelemetry export: it connects at its
// first batch, never before a run starts.
func (h *Host) openTelemetry() error {
	name, _ := os.Hostname()
	t, err := telemetry.New(telemetry.Options{Config: h.o.Telemetry, Version: h.o.Version, Host: name, Log: h.log.Named("telemetry")})
	if err != nil {
		return &Error{Telemetry, err}
	}
	h.Telemetry, h.Recorder.Telemetry = t, t
	if m := h.Metrics; m != nil {
		m.SetTelemetrySource(func() (uint64, uint64, uint64, uint64) {
			s := t.Stats()
			return s.Exported, s.Dropped, s.Failed, s.Unsent
		})
	}
	return nil
}

// auditHead is the audit log's head for certificates, nil without one.
func (h *Host) auditHead() func() *certs.AuditAnchor {
	if h.Recorder == nil || h.Recorder.Audit == nil {
		return nil
	}
	return supervisor.AuditHead(h.Recorder.Audit)
}

// Directives is what the control plane's directives act on, and what
// fail_closed_after stops (outbox.Host).
type Directives = outbox.Host

// Start starts what runs beside the agents: for a host of many agents the
// heartbeat poller (and it waits for the keeper to be ready, so that no
// agent starts unguarded), the gateway's server, and the services the
// caller stops with StopServices: the metrics endpoint and the control
// plane's sender and directive poller (acting on d; nil with no control
// plane).
//
// Errors: *Error (Keeper, Poller).
func (h *Host) Start(d Directives) error {
	if h.o.Kind == Many {
		if h.Keeper != nil {
			if err := h.Keeper.Ready(); err != nil {
				return &Error{Keeper, err}
			}
		}
		p, err := heartbeat.NewPoller(heartbeatBatch)
		if err != nil {
			return &Error{Poller, err}
		}
		h.Poller = p
	}
	if h.Gateway != nil {
		h.gwDone = make(chan struct{})
		go func() {
			defer close(h.gwDone)
			if err := h.Gateway.Serve(context.Background()); err != nil {
				h.log.Error("gateway", zap.Error(err))
			}
		}()
		h.log.Info("LLM gateway: the agents' LLM traffic goes through it", zap.String("listen", h.Gateway.Addr()),
			zap.Strings("upstreams", h.o.Gateway.Upstreams))
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.svcCancel = cancel
	if h.Metrics != nil && h.o.MetricsListen != "" {
		h.goService("metrics endpoint", ctx, func(ctx context.Context) error { return h.Metrics.Serve(ctx, h.o.MetricsListen) })
	}
	if h.Link != nil && d != nil {
		h.goService("control plane", ctx, func(ctx context.Context) error {
			return h.Link.Run(ctx, d)
		})
	}
	return nil
}

// goService runs fn until StopServices; an error it returns before is
// logged.
func (h *Host) goService(name string, ctx context.Context, fn func(context.Context) error) {
	h.svcs.Go(func() {
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			h.log.Error("service stopped", zap.String("service", name), zap.Error(err))
		}
	})
}

// RunOptions are the options of a run on this host: everything but what
// is the run's own (its socket directory, credential, output, heartbeat
// rate), which the caller sets.
func (h *Host) RunOptions(a *config.Agent) supervisor.Options {
	return supervisor.Options{
		Agent: a, Runtime: h.Runtime, Cgroups: h.Cgroups, Exclusive: h.o.Kind == One, Keeper: h.Keeper,
		CertsDir: h.o.CertsDir, JournalDir: h.journalDir, Signer: h.Signer, AuditHead: h.auditHead(),
		Gateway: h.Gateway, Poller: h.Poller, OnEvent: h.Recorder.Event, Log: h.log,
	}
}

// Finish flushes the control plane's outbox for a host of one agent until
// it is empty or ctx ends, and says what became of the run's
// certificates; nil without a control plane.
func (h *Host) Finish(ctx context.Context) *outbox.Summary {
	if h.Receipts == nil {
		return nil
	}
	if h.Link.Outbox.Stats().Pending > 0 {
		h.log.Info("delivering to the control plane before exiting")
	}
	s := h.Receipts.Finish(ctx)
	if s.Pending > 0 {
		h.log.Warn("certificates left undelivered in the outbox; the next run using this state directory delivers them",
			zap.Int("pending", s.Pending), zap.String("state_dir", h.o.StateDir))
	}
	return s
}

// StopServices stops the metrics endpoint and the control plane's sender
// and poller, and waits for them: after it no directive arrives. The
// daemon calls it before stopping its agents; Close calls it too.
func (h *Host) StopServices() {
	if h.svcCancel != nil {
		h.svcCancel()
	}
	h.svcs.Wait()
}

// Close stops the host in the reverse order of Open and Start, once the
// caller's runs have ended: the services, the gateway (after the runs,
// whose ladders revoked their grants), the heartbeat poller, the keeper
// (disarmed only if every run ended with its tree proven empty), the
// runtime, the control plane's outbox, the OpenTelemetry export (it waits
// at most its shutdown timeout for what is queued), and last the audit
// log, which everything before may still write to. Errors are logged, except the
// audit log's, which is returned. It may be called more than once.
func (h *Host) Close() error {
	var err error
	h.closeOnce.Do(func() {
		h.StopServices()
		if h.Gateway != nil {
			_ = h.Gateway.Close()
			<-h.gwDone
		}
		if h.Poller != nil {
			if err := h.Poller.Close(); err != nil {
				h.log.Warn("heartbeat poller", zap.Error(err))
			}
		}
		h.CloseKeeper()
		if h.Runtime != nil {
			h.Runtime.Close()
		}
		if h.Link != nil {
			if err := h.Link.Close(); err != nil {
				h.log.Warn("control plane outbox", zap.Error(err))
			}
		}
		if h.Telemetry != nil {
			h.Telemetry.Close() // within its shutdown timeout
		}
		if h.Recorder != nil && h.Recorder.Audit != nil {
			err = h.Recorder.Audit.Close()
		}
	})
	return err
}

// CloseKeeper disarms the keeper once every run has ended (Keeper.Close:
// it is not disarmed while a tree is unproven, and kills what is left);
// supervise calls it as soon as its run ended, before delivering to the
// control plane. Idempotent.
func (h *Host) CloseKeeper() {
	if h.Keeper == nil {
		return
	}
	if err := h.Keeper.Close(); err != nil {
		h.log.Warn("keeper", zap.Error(err))
	}
}
