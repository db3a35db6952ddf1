// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package daemon is `hermeskilld daemon`: one process per agent host,
// supervising every agent declared in agents_dir through the same
// supervisor package `supervise` uses (a daemon of many, where supervise
// is a daemon of one). It owns what only a long-lived host service needs:
// the live agents directory (fsnotify), restart policies and crash loops,
// quarantine and the e-stop persisted across restarts, per-agent users and
// output logs, the control API backend, and telling systemd how it is.
package daemon

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/audit"
	"github.com/hermeskill/hermeskilld/internal/budgets"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/fdbudget"
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/host"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
	"github.com/hermeskill/hermeskilld/internal/telemetry"
	"github.com/hermeskill/hermeskilld/pkg/client"
)

// Options configures a Daemon.
type Options struct {
	Config     *config.Daemon
	ConfigPath string
	Version    string
	Log        *zap.Logger
	// OnReady runs once the control socket listens (tests use it).
	OnReady func()
}

// Daemon supervises the agents of one host.
type Daemon struct {
	o       Options
	log     *zap.Logger
	started time.Time

	h    *host.Host // containment, runtime, keeper, records, gateway, control plane
	held *held
	bus  *bus
	// budgets are the budgets across runs; budgetKick has their spend
	// charged now (meterBudgets); now is the clock they are read with.
	budgets    *budgets.Book
	budgetKick chan struct{}
	// pools are the budgets as caps at the gateway (pools.go).
	pools   pools
	now     func() time.Time
	systemd *client.Client

	certsDir, logsDir, socketsDir, estopFile string

	// starter starts one run of an agent: startRun, a fake in tests.
	starter  func(s *slot, a *config.Agent) (agentRun, error)
	stopping chan struct{}  // closed when shutdown begins
	tasks    sync.WaitGroup // e-stops and other work started on the side

	// hostCheck checks what an agent file needs from this host before it
	// is applied (checkAgentHost); a file that fails it is invalid. New
	// sets it; nil (the tests' fake runs, whose commands do not exist)
	// checks nothing.
	hostCheck func(a *config.Agent, data []byte) error

	// budget is the descriptor accounting (budget.go), set by Run.
	budget fdbudget.Budget

	mu      sync.Mutex
	cfg     *config.Daemon
	slots   map[string]*slot  // by agent id
	files   map[string]string // agent file -> id
	invalid map[string]string // agent file -> error, for files that never parsed
	digests map[string]string // agent file -> content digest last applied
}

// New prepares the daemon: directories, the persisted quarantine, and its
// host (containment, the runtime and the keeper, keys, the audit log, the
// gateway, the control plane's outbox; package host). No agent is started
// yet.
func New(o Options) (*Daemon, error) {
	d, err := newDaemon(o, false)
	if err != nil {
		return nil, err
	}
	d.hostCheck = checkAgentHost
	return d, nil
}

// newDaemon is New; with noProcesses its host has no containment, runtime
// or keeper (the daemon's tests start agents through a fake starter).
func newDaemon(o Options, noProcesses bool) (*Daemon, error) {
	cfg := o.Config
	d := &Daemon{
		o: o, log: o.Log, cfg: cfg, started: time.Now(),
		stopping: make(chan struct{}),
		slots:    map[string]*slot{}, files: map[string]string{}, invalid: map[string]string{}, digests: map[string]string{},
		certsDir:   filepath.Join(cfg.StateDir, "certs"),
		logsDir:    filepath.Join(cfg.StateDir, "logs"),
		socketsDir: filepath.Join(cfg.RuntimeDir, "agents"),
		estopFile:  cfg.EstopFile,
		bus:        newBus(),
		budgetKick: make(chan struct{}, 1),
		now:        time.Now,
	}
	d.starter = d.startRun
	// What the daemon file needs from this host (its groups, the user of
	// its defaults, agents_dir), before anything is made.
	if err := cfg.CheckHost(); err != nil {
		return nil, err
	}
	if err := d.prepareAgentsDir(); err != nil {
		return nil, err
	}
	otel, err := telemetry.Resolve(TelemetrySettings(cfg.Telemetry), nil)
	if err != nil {
		return nil, err
	}
	for _, dir := range []struct {
		path string
		mode os.FileMode
	}{{cfg.StateDir, 0o750}, {d.certsDir, 0o750}, {d.logsDir, 0o750}, {cfg.RuntimeDir, 0o755}, {d.socketsDir, 0o711}} {
		if err := os.MkdirAll(dir.path, dir.mode); err != nil {
			return nil, err
		}
		// Agents running as other users must reach their own socket dir.
		if err := os.Chmod(dir.path, dir.mode); err != nil {
			return nil, err
		}
	}
	if d.held, err = loadHeld(filepath.Join(cfg.StateDir, "held.json")); err != nil {
		return nil, err
	}
	if d.budgets, err = budgets.Open(filepath.Join(cfg.StateDir, "budgets.json"), cfg.Budgets, d.now()); err != nil {
		return nil, err
	}
	d.syncPools()
	d.h, err = host.Open(host.Options{
		Kind: host.Many, Log: d.log, Containment: cfg.Containment, NoProcesses: noProcesses,
		StateDir: cfg.StateDir, CertsDir: d.certsDir, SigningKey: cfg.SigningKey,
		AuditLog: filepath.Join(cfg.StateDir, "audit.jsonl"), AuditRotate: audit.Options{MaxBytes: cfg.Audit.MaxBytes, Keep: cfg.Audit.Keep},
		Gateway: cfg.Gateway, Metrics: host.MetricsOptions(cfg.Metrics.AgentLabelLimit), MetricsListen: cfg.Metrics.Listen,
		ControlPlane: cfg.ControlPlane, Stream: d.streamEvent, Telemetry: otel, Version: o.Version,
	})
	if err != nil {
		return nil, settingError(cfg, err)
	}
	d.h.Metrics.SetSource(d.MetricsSamples)
	d.h.Metrics.SetBudgetSource(d.budgetSamples)
	d.systemd, _ = client.FromEnv() // our own supervisor (systemd); a no-op without one
	return d, nil
}

// settingError words a host's error for the daemon file's setting.
func settingError(cfg *config.Daemon, err error) error {
	return host.Word(err, map[host.Service]string{
		host.Containment: "containment " + cfg.Containment, host.Signer: "signing_key", host.Audit: "audit log"})
}

// ControlSocket is where the control API listens.
func (d *Daemon) ControlSocket() string { return filepath.Join(d.cfg.RuntimeDir, "control.sock") }

// CertsDir is where certificates are written.
func (d *Daemon) CertsDir() string { return d.certsDir }

// Service is work the daemon runs for its whole life beside its agents
// (the outbox's delivery, the control plane's directive poller, the
// metrics endpoint). Run returns when ctx ends; an error it returns before
// that is logged.
type Service struct {
	Name string
	Run  func(ctx context.Context) error
}

// Run runs until ctx is cancelled or SIGTERM/SIGINT arrives, then stops
// every agent through the ladder (operator daemon-shutdown) and returns.
// It owns every goroutine it starts: the control server, the services,
// the agents' slots and e-stops; each is stopped and waited for in
// shutdown, in reverse order of dependency.
func (d *Daemon) Run(ctx context.Context, services ...Service) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)

	srv := control.NewServer(d, control.ServerOptions{Path: d.ControlSocket(),
		ReadGroup: d.cfg.Control.ReadGroup, OperatorsGroup: d.cfg.Control.OperatorsGroup, Log: d.log})
	// Listen before any agent starts: a second daemon on the same
	// runtime_dir fails here, not after it started agents twice.
	if err := srv.Listen(); err != nil {
		_ = d.h.Close()
		return err
	}
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(context.Background()) }()
	stopServer := func() error { _ = srv.Close(); return <-srvErr }

	// Before any agent starts: the keeper is ready (should the daemon
	// die, even by SIGKILL, it kills every process of every agent), the
	// heartbeat poller, the gateway and the control plane run.
	if err := d.h.Start(directives{d}); err != nil {
		_ = stopServer()
		_ = d.h.Close()
		return err
	}
	w, err := d.watch()
	if err != nil {
		_ = stopServer()
		_ = d.h.Close()
		return err
	}
	defer w.Close()

	svcCtx, stopServices := context.WithCancel(context.Background())
	var svcs sync.WaitGroup
	for _, sv := range services {
		svcs.Go(func() {
			if err := sv.Run(svcCtx); err != nil && svcCtx.Err() == nil {
				d.log.Error("service stopped", zap.String("service", sv.Name), zap.Error(err))
			}
		})
	}
	budgetsDone := make(chan struct{})
	go d.meterBudgets(budgetsDone)
	stop := func(why string) error {
		return d.shutdown(why, stopServer, func() { d.h.StopServices(); stopServices(); svcs.Wait() }, budgetsDone)
	}

	if _, err := os.Stat(d.estopFile); err == nil {
		d.estopFromFile()
	}
	d.budget = d.descriptorBudget(srv)
	d.scanAgents(true)
	d.logBudget()
	d.systemd.Ready()
	d.notifyStatus()
	if d.o.OnReady != nil {
		d.o.OnReady()
	}
	d.log.Info("daemon ready", zap.String("control", d.ControlSocket()), zap.String("agents_dir", d.cfg.AgentsDir))

	watchdog := d.watchdogTicker()
	defer watchdog.Stop()
	status := time.NewTicker(10 * time.Second)
	defer status.Stop()
	for {
		select {
		case <-ctx.Done():
			return stop("context cancelled")
		case s := <-sigs:
			if s == syscall.SIGHUP {
				d.reload()
				continue
			}
			return stop(config.SignalName(s.(syscall.Signal)))
		case ev := <-w.events:
			d.fileEvent(w, ev)
		case err := <-w.errors:
			d.log.Error("watching agents_dir", zap.Error(err))
		case <-w.settled():
			d.applySettled(w)
		case <-watchdog.C:
			// From the main loop on purpose: a wedged daemon stops pinging
			// and systemd restarts it (WatchdogSec=). Nothing here waits
			// on an agent: statuses are published snapshots.
			d.systemd.Beat()
		case <-status.C:
			d.notifyStatus()
		case err := <-srvErr:
			srvErr <- err // for stopServer
			d.log.Error("control server stopped", zap.Error(err))
			return stop("control server failed")
		}
	}
}

// watchdogTicker pings systemd's watchdog at half its interval; without
// WATCHDOG_USEC it never fires.
func (d *Daemon) watchdogTicker() *time.Ticker {
	usec, err := client.WatchdogFromEnv()
	if err != nil || usec <= 0 {
		t := time.NewTicker(time.Hour)
		t.Stop()
		return t
	}
	return time.NewTicker(usec / 2)
}

// shutdown stops what the daemon runs in reverse order of dependency:
// the control server (no new operator request; one still running gets
// its grace), the services (no new directive from the control plane), the
// agents in parallel through their ladders and what they started (e-stop
// kills), and last the host (host.Close: the gateway, the poller, the
// keeper, the audit log, which everything before may still write to).
// (The event stream ends with the control server.)
func (d *Daemon) shutdown(why string, stopServer func() error, stopServices func(), budgetsDone <-chan struct{}) error {
	d.log.Info("daemon stopping: every agent goes through the ladder", zap.String("why", why))
	d.systemd.Stopping()
	d.systemd.Status("stopping agents")
	close(d.stopping)
	if err := stopServer(); err != nil {
		d.log.Warn("control server", zap.Error(err))
	}
	stopServices()
	d.mu.Lock()
	slots := make([]*slot, 0, len(d.slots))
	for _, s := range d.slots {
		slots = append(slots, s)
	}
	d.mu.Unlock()
	for _, s := range slots {
		s.stopFor("daemon-shutdown", "hermeskilld is shutting down ("+why+")", true)
	}
	for _, s := range slots {
		<-s.done
	}
	d.tasks.Wait()
	<-budgetsDone
	d.saveBudgets() // the runs' last spend, charged as each ended
	err := d.h.Close()
	d.log.Info("daemon stopped")
	return err
}

// goTask runs fn on a goroutine the daemon waits for in its shutdown.
func (d *Daemon) goTask(fn func()) {
	d.tasks.Go(fn)
}

// agentRun is one supervised run as the daemon drives it: a
// *supervisor.Run, or a fake in the daemon's tests.
type agentRun interface {
	Done() <-chan struct{}
	Wait() supervisor.Outcome
	Kill(operator, reason string)
	HostStop(check symptoms.Check, observed, reason string)
	Reconfigure(a *config.Agent)
	Status() supervisor.Status
	PID() int
	// Exceed stops the run for a limit decided outside it (a budget
	// across runs).
	Exceed(s symptoms.Symptom)
	Resume(ctx context.Context, req supervisor.ResumeRequest) error
	// SetPools puts the run's next requests at the gateway in the pools
	// of the budgets across runs it belongs to.
	SetPools(pools ...*gateway.Pool)
}

var _ agentRun = (*supervisor.Run)(nil)

// startRun starts one run of agent a.
func (d *Daemon) startRun(s *slot, a *config.Agent) (agentRun, error) {
	cred, err := credential(a.User)
	if err != nil {
		return nil, err
	}
	logw, err := d.agentLog(a.ID)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	rate := d.cfg.HeartbeatRate
	d.mu.Unlock()
	o := d.h.RunOptions(a)
	o.SocketDir, o.Credential, o.HeartbeatRate = filepath.Join(d.socketsDir, a.ID), cred, rate
	o.StdoutSink, o.StderrSink = logw, logw
	o.OnEvent = d.budgetEvents(o.OnEvent)
	o.Pools = d.poolsFor(a)
	r, err := supervisor.Start(o)
	if err != nil {
		logw.Close()
		return nil, err
	}
	s.logw = logw // closed by the slot when the run ends
	return r, nil
}

func (d *Daemon) estopped() bool {
	_, ok := d.held.estop()
	return ok
}

// notifyStatus tells systemd the agent counts (STATUS=).
func (d *Daemon) notifyStatus() {
	counts := d.counts()
	total := 0
	for _, n := range counts {
		total += n
	}
	msg := fmt.Sprintf("%d agents: %d running", total, counts[control.StateRunning])
	if d.estopped() {
		msg += "; E-STOP in effect"
	}
	d.systemd.Status(msg)
}

// TelemetrySettings are the export settings of the daemon file's
// telemetry section (nil: none; the environment alone says).
func TelemetrySettings(t *config.Telemetry) telemetry.Settings {
	if t == nil {
		return telemetry.Settings{}
	}
	return telemetry.Settings{Endpoint: t.Endpoint, Headers: t.Headers, Timeout: t.Timeout, ShutdownTimeout: t.ShutdownTimeout}
}
