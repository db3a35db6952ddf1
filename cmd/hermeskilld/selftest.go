// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/escalate"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
	"github.com/hermeskill/hermeskilld/internal/host"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
)

// canaryCommand is the hidden command the selftest's canary runs: the
// hermeskilld binary itself, re-executed.
const canaryCommand = "selftest-canary"

// canaryID is the canary's agent id, in its certificate.
const canaryID = "hermeskilld-selftest"

type selftestFlags struct {
	config, certsDir, stateDir, signingKey string
	cpURL, cpToken                         string
	json                                   bool
	timeout                                time.Duration
}

func newSelftest() *cobra.Command {
	var f selftestFlags
	c := &cobra.Command{
		Use:   "selftest",
		Short: "Prove the halt path on this host: kill a canary through every rung",
		Long: `Prove that this host can halt an agent, with the settings it runs with.

selftest starts a canary agent (hermeskilld itself, re-executed, with one
child process) that ignores SIGINT and SIGTERM, so that every rung of the
escalation ladder is climbed: the cooperative stop (SIGINT), SIGTERM, then
SIGKILL to the whole tree. It then checks that the tree is empty, that the
certificate was written, that it is signed and verifies with the signing key
(or says "unsigned" when none is configured), and, with a control plane,
that the certificate was delivered or is queued in the outbox.

Each step is printed with ok or FAIL and its duration; the exit status is 0
only when every step passed (1 otherwise, 125 for bad flags or settings).

With --config the daemon file's settings are used: its signing_key, its
certificates directory (state_dir/certs, where the canary's certificate
stays, agent id hermeskilld-selftest) and its control_plane, delivering
from state_dir/selftest (the daemon keeps state_dir/outbox to itself).
Flags override them.`,
		Example: `  hermeskilld selftest --config /etc/hermeskill/hermeskilld.yaml
  hermeskilld selftest --certs-dir /tmp/hk-certs --signing-key ./signing.key --json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return f.run(c) },
	}
	fl := c.Flags()
	fl.StringVar(&f.config, "config", "", "daemon file (hermeskilld.yaml) whose signing_key, state_dir and control_plane to use")
	fl.StringVar(&f.certsDir, "certs-dir", "", "where the canary's certificate is written (default: the daemon file's state_dir/certs, else supervise's default)")
	fl.StringVar(&f.stateDir, "state-dir", "", "where the control plane's outbox is kept (default: the daemon file's state_dir/selftest, else the certificates directory's parent)")
	fl.StringVar(&f.signingKey, "signing-key", "", "Ed25519 key the certificate is signed with (default: the daemon file's signing_key)")
	fl.StringVar(&f.cpURL, "control-plane-url", "", "control plane to deliver the certificate to (default: the daemon file's)")
	fl.StringVar(&f.cpToken, "control-plane-token-file", "", "bearer token file for --control-plane-url")
	fl.BoolVar(&f.json, "json", false, "print the steps as JSON")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for the control plane's delivery")
	return c
}

// selftestStep is one step of the selftest's report.
type selftestStep struct {
	Step       string  `json:"step"`
	OK         bool    `json:"ok"`
	Detail     string  `json:"detail,omitempty"`
	DurationMS float64 `json:"duration_ms"`
}

// selftestReport is what selftest prints (--json: as is).
type selftestReport struct {
	OK    bool           `json:"ok"`
	Steps []selftestStep `json:"steps"`
}

func (r *selftestReport) add(step string, ok bool, d time.Duration, format string, args ...any) {
	r.Steps = append(r.Steps, selftestStep{Step: step, OK: ok, Detail: fmt.Sprintf(format, args...),
		DurationMS: float64(d.Microseconds()) / 1000})
}

func (r *selftestReport) print(w io.Writer, asJSON bool) {
	r.OK = !slices.ContainsFunc(r.Steps, func(s selftestStep) bool { return !s.OK })
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(r)
		return
	}
	for _, s := range r.Steps {
		mark := "ok  "
		if !s.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s  %-26s %9.1f ms  %s\n", mark, s.Step, s.DurationMS, s.Detail)
	}
	if r.OK {
		fmt.Fprintln(w, "selftest passed: this host can halt an agent")
	} else {
		fmt.Fprintln(w, "selftest FAILED")
	}
}

// settings fills what the flags leave unset from --config.
func (f *selftestFlags) settings() (cp *config.ControlPlane, err error) {
	if f.config != "" {
		d, err := config.LoadDaemon(f.config)
		if err != nil {
			return nil, usageError("%v", err)
		}
		f.certsDir = cmpOr(f.certsDir, filepath.Join(d.StateDir, "certs"))
		f.stateDir = cmpOr(f.stateDir, filepath.Join(d.StateDir, "selftest"))
		f.signingKey = cmpOr(f.signingKey, d.SigningKey)
		cp = d.ControlPlane
	}
	f.certsDir = cmpOr(f.certsDir, certs.DefaultDir())
	f.stateDir = cmpOr(f.stateDir, defaultStateDir(f.certsDir))
	if f.cpURL != "" {
		a := config.DefaultAgent()
		if err := a.Set("control_plane.url", f.cpURL); err != nil {
			return nil, usageError("--control-plane-url: %v", err)
		}
		if f.cpToken != "" {
			if err := a.Set("control_plane.token_file", f.cpToken); err != nil {
				return nil, usageError("--control-plane-token-file: %v", err)
			}
		}
		cp = a.ControlPlane
	}
	return cp, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (f *selftestFlags) run(c *cobra.Command) error {
	cp, err := f.settings()
	if err != nil {
		return err
	}
	if cp != nil {
		// Delivery only: the selftest acts on no directive and has no
		// dead-man's switch.
		only := *cp
		only.PollInterval, only.FailClosedAfter = 0, 0
		cp = &only
	}
	log := zap.NewNop()
	rep := &selftestReport{}
	defer func() { rep.print(c.OutOrStdout(), f.json) }()
	fail := func() error { return &exitError{code: exitFailure} }

	began := time.Now()
	if err := os.MkdirAll(f.certsDir, 0o750); err != nil {
		rep.add("certificates directory", false, time.Since(began), "%v", err)
		return fail()
	}
	if err := unix.Access(f.certsDir, unix.W_OK|unix.X_OK); err != nil {
		rep.add("certificates directory", false, time.Since(began), "%s is not writable: %v", f.certsDir, err)
		return fail()
	}
	h, err := host.Open(host.Options{Kind: host.One, Log: log, Containment: config.ContainmentAuto,
		StateDir: f.stateDir, CertsDir: f.certsDir, SigningKey: f.signingKey, ControlPlane: cp})
	if err != nil {
		rep.add("host services", false, time.Since(began), "%v", err)
		return fail()
	}
	defer h.Close()
	one := host.NewOneRun(canaryID, log)
	if err := h.Start(one); err != nil {
		rep.add("host services", false, time.Since(began), "%v", err)
		return fail()
	}
	mode := "process group"
	if h.Cgroups != nil {
		mode = "cgroup"
	}
	rep.add("host services", true, time.Since(began), "containment: %s; certificates in %s", mode, f.certsDir)

	out, ok := f.killCanary(rep, h, one)
	h.CloseKeeper()
	if !ok {
		return fail()
	}
	f.checkCertificate(rep, h, out)
	f.checkDelivery(rep, h, cp)
	if slices.ContainsFunc(rep.Steps, func(s selftestStep) bool { return !s.OK }) {
		return fail()
	}
	return nil
}

// readyWriter closes ready at the canary's first line ("ready").
type readyWriter struct {
	once  sync.Once
	ready chan struct{}
}

func (w *readyWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("ready")) {
		w.once.Do(func() { close(w.ready) })
	}
	return len(p), nil
}

// killCanary starts the canary, waits for it to be ready (its signals
// ignored, its child started), kills it and checks each rung and the
// tree; ok is false when the run could not be had at all.
func (f *selftestFlags) killCanary(rep *selftestReport, h *host.Host, one *host.OneRun) (supervisor.Outcome, bool) {
	exe, err := os.Executable()
	if err != nil {
		rep.add("start canary", false, 0, "%v", err)
		return supervisor.Outcome{}, false
	}
	a := config.DefaultAgent()
	a.ID, a.Command = canaryID, []string{exe, canaryCommand}
	a.Escalation.CoopGrace, a.Escalation.TermGrace = 300*time.Millisecond, 300*time.Millisecond
	a.Normalize()
	sockDir, err := heartbeat.SupervisorDir(a.ID)
	if err != nil {
		rep.add("start canary", false, 0, "%v", err)
		return supervisor.Outcome{}, false
	}
	began := time.Now()
	ready := &readyWriter{ready: make(chan struct{})}
	o := h.RunOptions(a)
	o.SocketDir, o.HeartbeatRate = sockDir, config.DefaultHeartbeatRate
	o.StdoutSink, o.StderrSink = ready, io.Discard
	r, err := supervisor.Start(o)
	if err != nil {
		rep.add("start canary", false, time.Since(began), "%v", err)
		return supervisor.Outcome{}, false
	}
	one.Set(r)
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-ready.ready:
		rep.add("start canary", true, time.Since(began), "pid %d, with a child; both ignore SIGINT and SIGTERM", r.PID())
	case <-r.Done():
		rep.add("start canary", false, time.Since(began), "the canary exited before it was ready: %s", r.Wait().Exit)
		return r.Wait(), false
	case <-t.C:
		r.Kill("selftest", "the canary was not ready in 10s")
		rep.add("start canary", false, time.Since(began), "not ready within 10s")
		return r.Wait(), false
	}
	r.Kill("selftest", "hermeskilld selftest: proving the halt path")
	out := r.Wait()
	if out.Cert == nil {
		rep.add("kill", false, 0, "no certificate built: %s", out.Exit)
		return out, false
	}
	steps := map[string]certs.Step{}
	for _, s := range out.Cert.ShutdownLog {
		steps[s.Step] = s
	}
	rung := func(name, step, detail string) {
		s, ok := steps[step]
		if !ok {
			rep.add(name, false, 0, "the ladder has no %s step", step)
			return
		}
		rep.add(name, true, time.Duration(s.DurationMS*float64(time.Millisecond)), "%s", detail)
	}
	rung("cooperative stop", escalate.StepCoopSignal, "SIGINT sent, ignored; waited coop_grace")
	if s, ok := steps[escalate.StepCoopWait]; ok {
		rep.Steps[len(rep.Steps)-1].DurationMS = s.DurationMS
	}
	rung("SIGTERM", escalate.StepSIGTERM, "sent to the tree, ignored; waited term_grace")
	if s, ok := steps[escalate.StepTermWait]; ok {
		rep.Steps[len(rep.Steps)-1].DurationMS = s.DurationMS
	}
	rung("SIGKILL", escalate.StepSIGKILL, fmt.Sprintf("sent to the tree; %s %s", "exit:", out.Exit))
	left := 0
	for _, p := range out.Cert.ProcessTree {
		if unix.Kill(p.PID, 0) == nil && procStartMatches(p.PID, p.Cmdline) {
			left++
		}
	}
	emptyDur := time.Duration(steps[escalate.StepReaped].DurationMS * float64(time.Millisecond))
	switch {
	case !out.TreeEmpty:
		rep.add("tree empty", false, emptyDur, "the ladder found survivors: %v", out.Cert.Survivors)
	case len(out.Cert.ProcessTree) < 2:
		rep.add("tree empty", false, emptyDur, "the canary's tree had %d process(es), want its child too", len(out.Cert.ProcessTree))
	case left > 0:
		rep.add("tree empty", false, emptyDur, "%d process(es) of the tree still alive", left)
	default:
		rep.add("tree empty", true, emptyDur, "%d processes killed, none left (reached %s)", len(out.Cert.ProcessTree), out.Reached)
	}
	return out, true
}

// procStartMatches: pid still runs the command it ran in the tree (a
// recycled pid is another process).
func procStartMatches(pid int, cmdline string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	return string(bytes.ReplaceAll(bytes.TrimRight(b, "\x00"), []byte{0}, []byte(" "))) == cmdline
}

// checkCertificate checks the certificate on disk: written, and signed
// and verified when a key is configured.
func (f *selftestFlags) checkCertificate(rep *selftestReport, h *host.Host, out supervisor.Outcome) {
	began := time.Now()
	if out.CertPath == "" {
		rep.add("certificate written", false, 0, "%v", out.CertErr)
		return
	}
	raw, err := certs.ReadFile(out.CertPath)
	if err != nil {
		rep.add("certificate written", false, time.Since(began), "%v", err)
		return
	}
	rep.add("certificate written", true, time.Since(began), "%s", out.CertPath)
	began = time.Now()
	if h.Signer == nil {
		rep.add("certificate signed", true, 0, "unsigned (no signing key configured)")
		return
	}
	if err := certs.Verify(raw, h.Signer.Public()); err != nil {
		rep.add("certificate signed", false, time.Since(began), "does not verify: %v", err)
		return
	}
	rep.add("certificate signed", true, time.Since(began), "verified with key %s", h.Signer.KeyID())
}

// checkDelivery says whether the certificate reached the control plane
// or is queued for it.
func (f *selftestFlags) checkDelivery(rep *selftestReport, h *host.Host, cp *config.ControlPlane) {
	if cp == nil {
		rep.add("control plane", true, 0, "not configured")
		return
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	s := h.Finish(ctx)
	switch {
	case s == nil || s.Own == 0 && len(s.NotQueued) == 0:
		rep.add("control plane", false, time.Since(began), "the certificate was never queued")
	case len(s.NotQueued) > 0:
		rep.add("control plane", false, time.Since(began), "not queued: %v", s.NotQueued[0])
	case s.OwnParked > 0:
		rep.add("control plane", false, time.Since(began), "refused by the control plane (see %s)", filepath.Join(s.OutboxDir, "parked"))
	case s.OwnDelivered == s.Own:
		rep.add("control plane", true, time.Since(began), "delivered to %s", cp.URL)
	default:
		rep.add("control plane", true, time.Since(began), "queued in %s (not reached within %s; delivered by the next run using it)", s.OutboxDir, f.timeout)
	}
}

// newSelftestCanary is the canary selftest runs: it ignores SIGINT and
// SIGTERM, starts one child doing the same (--child), prints "ready" and
// waits to be killed.
func newSelftestCanary() *cobra.Command {
	var child bool
	c := &cobra.Command{
		Use:    canaryCommand,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
			if !child {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				cmd := exec.Command(exe, canaryCommand, "--child")
				cmd.Stdout = os.Stdout
				var ready bytes.Buffer
				pr, pw, err := os.Pipe()
				if err != nil {
					return err
				}
				cmd.Stdout = pw
				if err := cmd.Start(); err != nil {
					return err
				}
				pw.Close()
				// The child's signals are ignored once it says so.
				if _, err := io.CopyN(&ready, pr, int64(len("ready\n"))); err != nil {
					return errors.New("the canary's child never got ready")
				}
				fmt.Fprintln(c.OutOrStdout(), "ready")
			} else {
				fmt.Fprintln(c.OutOrStdout(), "ready")
			}
			for {
				time.Sleep(time.Hour)
			}
		},
	}
	c.Flags().BoolVar(&child, "child", false, "")
	return c
}
