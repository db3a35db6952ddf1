// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
	"github.com/hermeskill/hermeskilld/internal/host"
	"github.com/hermeskill/hermeskilld/internal/metrics"
	"github.com/hermeskill/hermeskilld/internal/outbox"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
	"github.com/hermeskill/hermeskilld/internal/telemetry"
	"github.com/hermeskill/hermeskilld/internal/tty"
)

type superviseFlags struct {
	id, configFile, certsDir, auditLog string
	terminationLog                     string
	metricsListen, signingKey          string
	otlpEndpoint                       string
	containment                        string
	shadow, preserveStatus             bool
	log                                logFlags

	// applyAgentFlags sets the agent-file keys given as flags.
	applyAgentFlags func(a *config.Agent) error

	llmUpstreams, llmKeyFiles []string
	allow                     []string
	llmPrices                 string

	cp cpFlags
}

func newSupervise() *cobra.Command {
	f := &superviseFlags{}
	c := &cobra.Command{
		Use:   "supervise [flags] -- COMMAND [ARG...]",
		Short: "Run one agent in the foreground and kill it when it misbehaves",
		Long: `Run COMMAND as a supervised agent. hermeskilld gives it a heartbeat socket
(HERMESKILL_SOCKET, also NOTIFY_SOCKET so any sd_notify library works, and
WATCHDOG_USEC when a heartbeat timeout is set) and a stream socket carrying the
same messages (HERMESKILL_STREAM_SOCKET), evaluates the checks given by
flags or by --config, and when one fires escalates: a cooperative stop (a STOP
directive to the agent's client and --coop-signal), --coop-grace, SIGTERM to
the whole tree, --term-grace, SIGKILL to the whole tree. Every kill leaves a
death certificate in --certs-dir and one line on stderr.

A check whose flag is absent or 0 is off, except --startup-timeout, which
defaults to --heartbeat-timeout (at least 10s). Flags override the --config
file.
Durations: 1.5s, 500ms, 2m. Sizes: 512MiB, 2GiB.

Exit status: the agent's own; 128+N when it died by signal N (137 after
SIGKILL); 124 when a check killed the agent and it exited 0 anyway (an
automatic kill is never a success; --preserve-status keeps the 0); 125 when
hermeskilld failed; 126 not executable; 127 not found.
SIGINT/SIGTERM to hermeskilld stop the agent through the ladder (a manual
kill, with a certificate; an agent that answers it with exit 0 exits 0); a
second one skips to SIGKILL. SIGHUP, SIGUSR1, SIGUSR2, SIGWINCH and SIGCONT
are forwarded to the agent.

When stdin is hermeskilld's terminal, the agent is the terminal's
foreground job for its life, as under a shell: it reads what is typed, and
Ctrl-C, Ctrl-\, Ctrl-Z and window size changes reach the agent, not
hermeskilld (a kill of hermeskilld from elsewhere still runs the ladder).
When the agent stops (Ctrl-Z), hermeskilld gives the terminal back and
stops too, so the shell's fg and bg apply to both; with no job control
above hermeskilld the agent is continued at once. After the agent ends the
terminal's foreground group and modes are restored.

With a control plane (--control-plane-url, or control_plane in --config)
certificates are POSTed to it through a durable outbox in --state-dir, and
its kill directives are polled while the agent runs. At exit hermeskilld
waits at most --flush-timeout for the delivery; what is left is delivered
by the next run using the same --state-dir (it starts with them).

Started inside a supervised agent whose LLM gateway is on (a sub-agent),
without --llm-upstream, it is a child run: its gateway forwards through the
parent's, within a slice of the parent's budget the parent's gateway grants
and enforces (never more than the parent has left); the parent is charged
for it and its certificate lists it; the child's names its parent.

With OpenTelemetry (--otlp-endpoint, or the standard OTEL_EXPORTER_OTLP_*
variables) every event, the certificate and each LLM request through the
gateway are exported over OTLP/HTTP; at exit hermeskilld waits at most 1s
for what is still queued, and counts what it could not export.`,
		Example: `  hermeskilld supervise --heartbeat-timeout 30s --max-cost 5 -- python3 agent.py
  hermeskilld supervise --config agent.yaml --shadow -- ./agent`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error { return f.run(c, args) },
	}
	fl := c.Flags()
	fl.SetInterspersed(false) // everything after COMMAND is the agent's
	fl.StringVar(&f.id, "id", "", "agent id (default: derived from COMMAND)")
	fl.StringVar(&f.configFile, "config", "", "agent file (YAML, the daemon's agent schema)")
	f.applyAgentFlags = addAgentFlags(fl)
	fl.StringArrayVar(&f.allow, "allow", nil, "HOST:PORT the agent may reach through its egress proxy, such as api.github.com:443 or '*.pypi.org:443' (repeatable; implies --network allowlist; replaces the file's allow)")
	fl.StringArrayVar(&f.llmUpstreams, "llm-upstream", nil, "carry the agent's LLM traffic through hermeskilld to NAME=URL[,style=openai|anthropic] (repeatable; see docs/gateway.md)")
	fl.StringArrayVar(&f.llmKeyFiles, "llm-key-file", nil, "NAME=PATH: the provider key of upstream NAME, read by hermeskilld, never given to the agent (repeatable)")
	fl.StringVar(&f.llmPrices, "llm-prices", "", "price file: USD per million tokens by model, for the cost check on metered spend")
	fl.StringVar(&f.certsDir, "certs-dir", "", "where death certificates are written (default "+certs.DefaultDir()+")")
	fl.StringVar(&f.cp.url, "control-plane-url", "", "deliver certificates to this control plane (https, or http to localhost) and poll it for kill directives")
	fl.StringVar(&f.cp.tokenFile, "control-plane-token-file", "", "the control plane's bearer token, in a file not readable by group or others")
	fl.DurationVar(&f.cp.flushTimeout, "flush-timeout", defaultFlushTimeout, "at exit, wait at most this long for the control plane to take the certificates")
	fl.StringVar(&f.cp.stateDir, "state-dir", "", "the control plane's outbox (STATE_DIR/outbox), shared with the next run (default: the directory that holds --certs-dir)")
	fl.StringVar(&f.terminationLog, "termination-log", "", "write a digest of the certificate (why, stage, exit, id, spend; at most 4 KiB) to FILE for the container's termination message (default "+kubeTerminationLog+" when it exists)")
	fl.StringVar(&f.auditLog, "audit-log", "", "append a hash-chained audit log of every event to FILE")
	fl.StringVar(&f.signingKey, "signing-key", "", "sign certificates with this Ed25519 key (see hermeskilld keygen)")
	fl.StringVar(&f.metricsListen, "metrics-listen", "", "serve Prometheus metrics on HOST:PORT (/metrics)")
	fl.StringVar(&f.otlpEndpoint, "otlp-endpoint", "", "export certificates, events and LLM requests over OpenTelemetry to this OTLP/HTTP URL (default $OTEL_EXPORTER_OTLP_ENDPOINT; see docs/telemetry.md)")
	fl.BoolVar(&f.shadow, "shadow", false, "shadow mode: record would-be kills as certificates, signal nothing")
	fl.BoolVar(&f.preserveStatus, "preserve-status", false, "exit with the agent's own status even when a check killed it and it exited 0 (otherwise 124)")
	fl.StringVar(&f.containment, "containment", "auto", "auto, cgroup (fail without a writable cgroup v2) or pgroup")
	fl.StringVar(&f.log.format, "log-format", "console", "console or json")
	fl.StringVar(&f.log.level, "log-level", "info", "debug, info, warn or error")
	return c
}

func (f *superviseFlags) run(c *cobra.Command, args []string) error {
	a, err := f.agent(c.Flags(), args)
	if err != nil {
		return err
	}
	log, err := f.log.newLogger()
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck // stderr
	sl, err := subAgent(a, os.Environ())
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if sl != nil {
		log.Info("sub-agent: its LLM traffic goes through the gateway of the run it was started in, within a slice of that run's budget",
			zap.String("parent_run", sl.ParentRun), zap.Float64("max_cost_usd", sl.MaxCostUSD), zap.Int64("max_tokens", sl.MaxTokens))
		defer sl.release(log) // after the run and its gateway: what it did not spend is the parent's again
	}
	otel, err := f.telemetry()
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}

	sockDir, err := heartbeat.SupervisorDir(a.ID)
	if errors.Is(err, heartbeat.ErrPathTooLong) {
		err = fmt.Errorf("%w; set XDG_RUNTIME_DIR to a shorter directory or use a shorter --id", err)
	}
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	cred, sockDir, err := host.RunAs(a, sockDir) // the file's user:
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	// Stop signals are caught before anything starts, so none is lost.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT,
		syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT)
	// No signal.Stop: it waits for the signal goroutine to be idle (half a
	// millisecond of every exit), and the process ends with this run.

	// The terminal's modes are saved before anything can change them.
	tt := tty.Open(os.Stdin, log)
	defer tt.Restore()

	ho := f.hostOptions(a, log)
	ho.Telemetry, ho.Version = otel, versionString()
	h, err := host.Open(ho)
	if err != nil {
		return &exitError{code: exitUsage, err: f.settingError(err)}
	}
	defer h.Close()
	one := host.NewOneRun(a.ID, log)
	if err := h.Start(one); err != nil {
		return &exitError{code: exitUsage, err: f.settingError(err)}
	}
	opts := h.RunOptions(a)
	opts.SocketDir, opts.Credential, opts.HeartbeatRate = sockDir, cred, config.DefaultHeartbeatRate
	setStdio(&opts, tt)
	var ctl *superviseControl
	var ctlBackend *superviseBackend
	if a.OnBudget == config.OnBudgetPause {
		// `hermeskilld resume ID` from another terminal reaches us there.
		ctlBackend = &superviseBackend{agent: a, started: time.Now(), rec: h.Recorder, log: log}
		if ctl, err = listenControl(a, ctlBackend, log); err != nil {
			h.CloseKeeper()
			return &exitError{code: exitUsage, err: err}
		}
		defer ctl.close()
	}
	r, err := supervisor.Start(opts)
	if err != nil {
		h.CloseKeeper()
		var se *procsup.StartError
		if errors.As(err, &se) {
			return &exitError{code: se.Code, err: se}
		}
		return &exitError{code: exitUsage, err: err}
	}
	one.Set(r)
	if ctl != nil {
		ctlBackend.run = r
		ctl.serve(log)
	}
	if h.Metrics != nil {
		h.Metrics.SetSource(func() []metrics.AgentSample {
			st := r.Status()
			return []metrics.AgentSample{metrics.SampleOf(a.ID, st.State, &st, h.Gateway != nil)}
		})
	}
	// A pause's SIGSTOP is no stop of the agent's for the terminal.
	tt.Started(r.Main(), func() bool { return r.Stopping() || r.Paused() })
	go relaySignals(sigs, r, tt, log)
	out := r.Wait()
	// Before anything else, so that a Ctrl-C during the control plane's
	// flush is ours again.
	tt.Restore()
	h.CloseKeeper()
	tlog, create := terminationLog(f.terminationLog)
	writeTerminationLog(tlog, create, out, log)
	ctx, cancel := context.WithTimeout(context.Background(), f.cp.flushTimeout)
	defer cancel()
	go cancelOnStop(ctx, cancel, sigs, log)
	delivery := h.Finish(ctx)
	report(c.ErrOrStderr(), a, out, delivery)
	if code := exitCode(out, f.preserveStatus); code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// hostOptions are the services of this run's host, from the flags and
// the agent.
func (f *superviseFlags) hostOptions(a *config.Agent, log *zap.Logger) host.Options {
	o := host.Options{
		Kind: host.One, Log: log, Containment: f.containment,
		StateDir: f.stateDir(), CertsDir: f.certsDirOrDefault(), SigningKey: f.signingKey, AuditLog: f.auditLog,
		Gateway: a.Gateway, ControlPlane: a.ControlPlane, MetricsListen: f.metricsListen,
	}
	if f.metricsListen != "" {
		o.Metrics = host.MetricsOptions(1)
	}
	return o
}

// telemetry is the OpenTelemetry export of --otlp-endpoint and the
// OTEL_* environment.
func (f *superviseFlags) telemetry() (telemetry.Config, error) {
	if f.otlpEndpoint != "" {
		if err := telemetry.CheckEndpoint(f.otlpEndpoint); err != nil {
			return telemetry.Config{}, fmt.Errorf("--otlp-endpoint: %w", err)
		}
	}
	return telemetry.Resolve(telemetry.Settings{Endpoint: f.otlpEndpoint}, nil)
}

// certsDirOrDefault is --certs-dir, or its default.
func (f *superviseFlags) certsDirOrDefault() string {
	if f.certsDir == "" {
		return certs.DefaultDir()
	}
	return f.certsDir
}

// stateDir is --state-dir, absolute, or its default: the run journal and
// the outbox are there, so that should we be SIGKILLed the next supervise
// with the same state writes the agent's certificate and delivers what is
// queued.
func (f *superviseFlags) stateDir() string {
	if f.cp.stateDir == "" {
		return defaultStateDir(f.certsDirOrDefault())
	}
	if abs, err := filepath.Abs(f.cp.stateDir); err == nil {
		return abs
	}
	return f.cp.stateDir
}

// settingError words a host's error for the flag it came from.
func (f *superviseFlags) settingError(err error) error {
	var he *host.Error
	if errors.As(err, &he) && he.Service == host.ControlPlane && errors.Is(he.Err, outbox.ErrLocked) {
		return fmt.Errorf("%w: another hermeskilld delivers from --state-dir %s; give each concurrent supervise a state directory of its own",
			he.Err, f.stateDir())
	}
	return host.Word(err, map[host.Service]string{
		host.Containment: "--containment " + f.containment, host.Signer: "--signing-key", host.Audit: "--audit-log"})
}

// setStdio gives the agent supervise's standard streams: stdin as is,
// an output terminal as is, anything else through a pipe (its tail kept
// for the certificate). When stdin is our terminal, tt, the agent is
// started in its foreground (package tty).
func setStdio(o *supervisor.Options, tt *tty.Terminal) {
	o.Stdin = os.Stdin
	o.Foreground = tt.ForAgent()
	if isTerminal(os.Stdout) {
		o.StdoutDirect = os.Stdout
	} else {
		o.StdoutSink = os.Stdout
	}
	if isTerminal(os.Stderr) {
		o.StderrDirect = os.Stderr
	} else {
		o.StderrSink = os.Stderr
	}
}

// cancelOnStop cuts the wait for the control plane short at a stop
// signal, until ctx ends.
func cancelOnStop(ctx context.Context, cancel context.CancelFunc, sigs <-chan os.Signal, log *zap.Logger) {
	for {
		select {
		case s := <-sigs:
			switch s {
			case syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT:
				log.Warn("stop signal received; not waiting for the control plane any longer",
					zap.String("signal", config.SignalName(s.(syscall.Signal))))
				cancel()
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// exitKilledClean is the status of an automatic kill that the agent
// answered with exit 0: coreutils timeout(1)'s "timed out", so that a
// Kubernetes Job or a systemd unit never records a kill as a success.
const exitKilledClean = 124

// exitCode is supervise's exit status for how the run ended: the agent's
// shell status, except that an automatic kill is never 0. A manual kill
// (a signal to hermeskilld: docker stop, systemctl stop) that the agent
// answers with 0 stays 0, as it would without hermeskilld.
func exitCode(out supervisor.Outcome, preserve bool) int {
	code := out.Exit.ShellCode()
	if code == 0 && !preserve && out.Killed && out.Trigger != nil && out.Trigger.Check != symptoms.Manual {
		return exitKilledClean
	}
	return code
}

// relaySignals turns signals to hermeskilld into a manual kill (the first
// stop signal), a hurry to SIGKILL (the second), or forwards them. With a
// terminal handed to the agent, Ctrl-C is the agent's alone (the terminal
// signals its foreground group); a stop signal that reaches us came from
// elsewhere and is ours. A SIGCONT continues the agent's group, with the
// terminal when we are in its foreground (tt.Continued).
func relaySignals(sigs <-chan os.Signal, r *supervisor.Run, tt *tty.Terminal, log *zap.Logger) {
	stops := 0
	for {
		select {
		case s := <-sigs:
			sig := s.(syscall.Signal)
			switch sig {
			case syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT:
				stops++
				name := config.SignalName(sig)
				if stops == 1 {
					tt.Killing()
					log.Warn("stop signal received; stopping the agent through the ladder", zap.String("signal", name))
					r.Kill("signal:"+name, "hermeskilld received "+name)
				} else {
					log.Warn("second stop signal; skipping to SIGKILL", zap.String("signal", name))
					r.Hurry()
				}
			case syscall.SIGCONT:
				if tt != nil {
					tt.Continued()
				} else if err := r.Forward(sig); err != nil {
					log.Debug("signal not forwarded", zap.String("signal", "SIGCONT"), zap.Error(err))
				}
			default:
				if err := r.Forward(sig); err != nil {
					log.Debug("signal not forwarded", zap.String("signal", config.SignalName(sig)), zap.Error(err))
				}
			}
		case <-r.Done():
			return
		}
	}
}

// agent assembles the agent from --config, the flags and the command.
func (f *superviseFlags) agent(fl *pflag.FlagSet, args []string) (*config.Agent, error) {
	a := config.DefaultAgent()
	if f.configFile != "" {
		var err error
		if a, err = config.LoadAgent(f.configFile, nil); err != nil {
			return nil, &exitError{code: exitUsage, err: err}
		}
	}
	if err := f.applyAgentFlags(a); err != nil {
		return nil, &exitError{code: exitUsage, err: err}
	}
	if err := f.applyGatewayFlags(&a.Gateway); err != nil {
		return nil, &exitError{code: exitUsage, err: err}
	}
	if len(f.allow) > 0 {
		a.Allow = f.allow
		if !fl.Changed("network") {
			a.Network = config.NetworkAllowlist
		}
	}
	if err := f.cp.apply(a); err != nil {
		return nil, &exitError{code: exitUsage, err: err}
	}
	if f.shadow {
		a.Mode = config.ModeShadow
	}
	a.Command = args
	switch {
	case f.id != "":
		a.ID = f.id
	case a.ID == "":
		a.ID = deriveID(args)
	}
	a.Normalize()
	if err := a.Validate(true); err != nil {
		return nil, &exitError{code: exitUsage, err: err}
	}
	return a, nil
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
