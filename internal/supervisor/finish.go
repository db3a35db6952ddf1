// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"fmt"
	"os"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/escalate"
	"github.com/hermeskill/hermeskilld/internal/fdreserve"
	"github.com/hermeskill/hermeskilld/internal/procfs"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// streamWait bounds how long the end of a run waits for the agent's
// output to drain (a descendant that escaped the tree could hold a pipe).
const streamWait = 2 * time.Second

// finish ends the run: writes the certificate of a kill or of an external
// death, releases the socket, the cgroup and the keeper's watch. res is the
// last ladder's result, nil when none ran.
func (r *Run) finish(res *escalate.Result, trigger *symptoms.Symptom, st runState) Outcome {
	exit := r.proc.Status()
	terminated := time.Now()
	r.stopWatch()
	r.waitStreams()

	out := Outcome{Exit: exit, Usage: r.usage(st.engine), Runtime: r.proc.ExitedAt().Sub(r.proc.Started())}
	out.TreeEmpty = res == nil || res.Empty
	if res != nil {
		out.Reached = res.Reached
	}
	if e := r.internal.Load(); e != nil {
		// Recorded among the symptoms (the engine did not see it); and
		// when the ladder after the main process's own exit panicked, the
		// run ends for it.
		s := internalSymptom(e, terminated)
		if trigger != nil && trigger.Check == symptoms.InternalError {
			s = *trigger
		}
		if !slices.ContainsFunc(st.symptoms, func(x symptoms.Symptom) bool { return x.Check == symptoms.InternalError }) {
			st.symptoms = append(slices.Clip(st.symptoms), s)
		}
		if trigger == nil {
			trigger = &s
		}
	}
	if trigger != nil || r.external {
		c := r.certificate(exit, res, trigger, st, terminated)
		out.Cert, out.Trigger, out.Killed = c, trigger, trigger != nil
		out.CertPath, out.CertErr = r.writeCert(c)
	}
	r.journalEnd() // its end is recorded now (or printed, when the certificate could not be written)
	u := out.Usage
	fields := []zap.Field{zap.Stringer("status", exit), zap.Int("shell_status", exit.ShellCode()),
		zap.Duration("runtime", out.Runtime), zap.Uint64("tokens", u.Tokens), zap.Float64("cost_usd", u.CostUSD)}
	if m := u.Metered; m != nil {
		fields = append(fields, zap.Int64("llm_requests", m.Requests))
	}
	r.log.Info("agent exited", fields...)
	r.emit(Event{Type: EventExited, Exit: &exit, Time: r.proc.ExitedAt(), Usage: &u, Runtime: out.Runtime})

	if r.denials != nil {
		r.denials.Untrack()
	}
	r.sock.Close()
	if r.grant != nil {
		r.grant.Close()
	}
	r.closeNetwork()
	if err := r.tree.Close(); err != nil {
		r.log.Warn("cgroup not removed", zap.Error(err))
	}
	if res == nil || res.Empty {
		r.guard.End() // nothing of the tree is left to guard
	} else {
		// Survivors, or not known: never disarm the keeper over them.
		r.o.Keeper.Unproven()
	}
	os.Remove(r.o.SocketDir)
	return out
}

func (r *Run) waitStreams() {
	t := time.NewTimer(streamWait)
	defer t.Stop()
	for _, s := range []*stream{r.stdout, r.stderr} {
		select {
		case <-s.done:
		case <-t.C:
			r.log.Warn("agent output still open after the tree died; not waiting for it")
			return
		}
	}
}

// writeCert writes c; a failure never loses it: the certificate goes to
// stderr (the log, in the daemon) instead.
func (r *Run) writeCert(c *certs.Certificate) (string, error) {
	var path string
	err := fdreserve.Do(func() (err error) { path, err = certs.Write(r.o.CertsDir, c, r.o.Signer); return err })
	if err == nil {
		r.log.Info("certificate written", zap.String("path", path))
		r.emit(Event{Type: EventCertificate, Cert: c, CertPath: path})
		return path, nil
	}
	r.log.Error("certificate not written; printing it to stderr", zap.Error(err))
	if b, merr := certs.Marshal(c); merr == nil {
		fmt.Fprintf(os.Stderr, "hermeskilld: certificate for agent %s could not be written (%v):\n%s", c.AgentID, err, b)
	}
	r.emit(Event{Type: EventCertFailed, Cert: c, Err: err})
	return "", err
}

// shadow records, in shadow mode, the kill that would have happened, and
// returns the certificate's path ("" when it could not be written).
func (r *Run) shadow(t symptoms.Symptom, st runState) string {
	procs, _ := r.tree.Snapshot(cmdlineMax, false)
	c := r.baseCertificate(t, st, procs)
	c.Mode = certs.ModeShadow
	c.Escalation.Reached = certs.ReachedNone
	c.TerminatedAt = time.Time{}
	r.log.Warn("shadow mode: the agent would have been killed now; nothing is signalled",
		zap.String("check", string(t.Check)), zap.String("reason", t.Message))
	path, _ := r.writeCert(c)
	return path
}

// certificate builds the record of a kill (trigger set) or of an
// external death.
func (r *Run) certificate(exit procsup.ExitStatus, res *escalate.Result, trigger *symptoms.Symptom, st runState,
	terminated time.Time) *certs.Certificate {
	var t symptoms.Symptom
	if trigger != nil {
		t = *trigger
	} else {
		t = r.externalSymptom(exit)
	}
	c := r.baseCertificate(t, st, r.autopsy)
	if trigger != nil && r.killID != "" {
		c.CertID = r.killID // the id the STOP directive carried
	}
	c.TerminatedAt = terminated
	if trigger == nil {
		c.TriggerType, c.TriggerCheck = certs.TriggerExternal, certs.TriggerExternal
	}
	c.Exit = exitRecord(exit)
	if res != nil {
		c.Escalation.Reached = string(res.Reached)
		for _, s := range res.Steps {
			c.ShutdownLog = append(c.ShutdownLog, certs.Step{Step: s.Name, At: s.At,
				DurationMS: float64(s.Duration.Microseconds()) / 1000, Detail: s.Detail})
		}
		if !res.Empty {
			procs, err := r.tree.Survivors(cmdlineMax)
			for _, p := range procs {
				c.Survivors = append(c.Survivors, certs.Survivor{PID: p.PID, State: p.State, Cmdline: p.Cmdline})
			}
			if err != nil {
				c.SurvivorsUnknown = err.Error()
				r.log.Error("the tree's survivors could not be listed; the keeper kills what is left", zap.Error(err))
			}
		}
	}
	fs := &c.FinalState
	fs.CPUUserS, fs.CPUSysS = exit.UserCPU.Seconds(), exit.SysCPU.Seconds()
	if user, sys, ok := r.tree.CPUTime(); ok {
		fs.CPUUserS, fs.CPUSysS = user.Seconds(), sys.Seconds()
	}
	fs.PeakRSSBytes = max(r.sampler.peakRSS, exit.MaxRSS)
	fs.ProcsKilled = r.procsKilled(trigger == nil, len(c.Survivors))
	return c
}

// baseCertificate fills what every certificate has; procs is the
// autopsy.
func (r *Run) baseCertificate(t symptoms.Symptom, st runState, procs []procfs.Proc) *certs.Certificate {
	a, es := st.agent, st.engine
	c := &certs.Certificate{
		Schema: certs.Schema, CertID: certs.NewID(), AgentID: a.ID, Host: r.host,
		Mode: certs.ModeEnforce, Labels: a.Labels, Command: a.Command, PID: r.proc.PID(),
		Containment: r.tree.Mode(), Confinement: r.confinement, StartedAt: r.proc.Started(), TriggeredAt: t.At,
		TriggerType: certs.TriggerAuto, TriggerCheck: string(t.Check), TriggerReason: t.Message,
		Escalation: certs.Escalation{Reached: certs.ReachedNone, CoopSignal: config.SignalName(a.Escalation.CoopSignal),
			CoopGraceMS: a.Escalation.CoopGrace.Milliseconds(), TermGraceMS: a.Escalation.TermGrace.Milliseconds()},
		FinalState: certs.FinalState{Status: es.Status, Progress: int64(es.Progress), Tokens: int64(es.Tokens),
			CostUSD: es.CostUSD, LastTool: es.LastTool, LastHeartbeatAt: es.LastHeartbeat,
			Heartbeats: int64(es.Heartbeats), PeakRSSBytes: r.sampler.peakRSS, Errors: int64(es.Errors), Errno: es.Errno},
	}
	c.Denials = r.certDenials()
	if t.Check == symptoms.Manual {
		c.TriggerType = certs.TriggerManual
		op, reason := t.Operator, t.Reason
		c.Operator = &op
		if reason != "" {
			c.OperatorReason = &reason
		}
	}
	for _, s := range st.symptoms {
		c.SymptomsLog = append(c.SymptomsLog, certs.Symptom{At: s.At, Check: string(s.Check), Severity: string(s.Severity),
			Observed: s.Observed, Threshold: s.Threshold, Message: s.Message})
	}
	for _, p := range procs {
		c.ProcessTree = append(c.ProcessTree, certs.Proc{PID: p.PID, PPID: p.PPID, Cmdline: p.Cmdline, State: p.State,
			RSSBytes: p.RSSBytes, CPUS: p.CPUSeconds, Threads: p.Threads, FDs: p.FDs})
	}
	if r.stdout.captured() || r.stderr.captured() {
		c.LastOutput = &certs.LastOutput{Stdout: r.stdout.tail.String(), Stderr: r.stderr.tail.String()}
	}
	c.ParentRun = a.Gateway.ParentRun
	if r.grant != nil {
		m := r.grant.Metered()
		c.Metered, c.Children = certMetered(m), m.Children
	}
	if r.net.proxy != nil {
		c.Egress = certEgress(r.net.proxy.Stats())
	}
	if r.o.AuditHead != nil {
		c.AuditAnchor = r.o.AuditHead()
	}
	if e := r.internal.Load(); e != nil {
		c.InternalError = &certs.InternalError{Component: e.Component, Panic: e.Panic, Stack: e.Stack}
	}
	c.Pauses = st.pauses
	return c
}

// externalSymptom describes a death by a signal hermeskilld did not send.
func (r *Run) externalSymptom(exit procsup.ExitStatus) symptoms.Symptom {
	msg := fmt.Sprintf("died by %s, which hermeskilld did not send", config.SignalName(exit.Signal))
	if n, ok := r.tree.OOMKills(); ok && n > 0 {
		msg += fmt.Sprintf(" (the kernel's OOM killer killed %d process(es) of the tree)", n)
	} else if exit.Signal == 9 {
		msg += " (the OOM killer or another process)"
	}
	if exit.CoreDumped {
		msg += "; core dumped"
	}
	return symptoms.Symptom{At: r.triggeredAt, Check: symptoms.External, Severity: symptoms.Terminal,
		Observed: config.SignalName(exit.Signal), Message: msg}
}

// procsKilled counts the processes the kill ended: every live process of
// the autopsy and every one the ladder signalled, less the survivors. An
// external death counts only what hermeskilld itself killed afterwards.
func (r *Run) procsKilled(external bool, survivors int) int {
	set := r.tree.Killed()
	if !external {
		for _, p := range r.autopsy {
			if p.State != "Z" {
				set[p.PID] = p.StartTimeTicks
			}
		}
	}
	return max(0, len(set)-survivors)
}

func exitRecord(e procsup.ExitStatus) certs.Exit {
	if e.Signaled {
		s := config.SignalName(e.Signal)
		return certs.Exit{Signal: &s, CoreDumped: e.CoreDumped}
	}
	code := e.Code
	return certs.Exit{Code: &code}
}
