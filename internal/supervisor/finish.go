package supervisor

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/escalate"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// streamWait bounds how long the end of a run waits for the agent's
// output to drain (a descendant that escaped the tree could hold a pipe).
const streamWait = 2 * time.Second

// finish ends the run: cleans up what is left of the tree, writes the
// certificate, releases the socket and the cgroup. res is the ladder's
// result, nil when the main process exited on its own.
func (r *Run) finish(res *escalate.Result) {
	exit := r.proc.Status()
	external := false
	thaw := func() {}
	if res == nil {
		// Died by a signal we did not send (the OOM killer, someone's
		// kill -9, a crash): worth a certificate.
		external = exit.Signaled
		if external {
			r.triggeredAt = r.proc.ExitedAt()
			r.autopsy, thaw = r.tree.Snapshot(cmdlineMax, true)
		}
		if !r.tree.Empty() {
			// The main process is gone but descendants live on: they get
			// SIGTERM, grace, SIGKILL (DESIGN §4).
			left, _ := r.tree.PIDs()
			r.log.Warn("main process exited, stopping what it left behind", zap.Ints("pids", left))
			cleanup := escalate.Run(r.tree, escalate.Plan{TermGrace: r.a.Escalation.TermGrace, Hurry: r.hurry,
				OnStep: r.onStep, Release: thaw})
			res = &cleanup
		}
	}
	thaw()
	terminated := time.Now()
	r.waitStreams()

	out := Outcome{Exit: exit, ShadowCerts: r.shadowCerts}
	if res != nil {
		out.Reached = res.Reached
	}
	if r.trigger != nil || external {
		c := r.certificate(exit, res, external, terminated)
		out.Cert, out.Trigger, out.Killed = c, r.trigger, r.trigger != nil
		out.CertPath, out.CertErr = r.writeCert(c)
	}
	r.log.Info("agent exited", zap.Stringer("status", exit), zap.Int("shell_status", exit.ShellCode()))
	r.emit(Event{Type: EventExited, Exit: &exit, Time: r.proc.ExitedAt()})

	r.final = r.snapshot(StateExited)
	r.outcome = out
	r.sock.Close()
	if err := r.tree.Close(); err != nil {
		r.log.Warn("cgroup not removed", zap.Error(err))
	}
	if res == nil || res.Empty {
		r.guard.End() // nothing of the tree is left to guard
	}
	os.Remove(r.o.SocketDir)
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
	path, err := certs.Write(r.o.CertsDir, c, r.o.Signer)
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

// writeShadow records, in shadow mode, the kill that would have happened.
func (r *Run) writeShadow(t symptoms.Symptom) {
	r.trigger = nil
	procs, _ := r.tree.Snapshot(cmdlineMax, false)
	saved := r.autopsy
	r.autopsy = procs
	c := r.baseCertificate(t)
	r.autopsy = saved
	c.Mode = certs.ModeShadow
	c.Escalation.Reached = certs.ReachedNone
	c.TerminatedAt = time.Time{}
	r.log.Warn("shadow mode: the agent would have been killed now; nothing is signalled",
		zap.String("check", string(t.Check)), zap.String("reason", t.Message))
	if path, err := r.writeCert(c); err == nil {
		r.shadowCerts = append(r.shadowCerts, path)
	}
}

// certificate builds the record of a kill (r.trigger set) or of an
// external death.
func (r *Run) certificate(exit procsup.ExitStatus, res *escalate.Result, external bool, terminated time.Time) *certs.Certificate {
	var t symptoms.Symptom
	if r.trigger != nil {
		t = *r.trigger
	} else {
		t = r.externalSymptom(exit)
	}
	c := r.baseCertificate(t)
	c.TerminatedAt = terminated
	if external {
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
			for _, p := range r.tree.Survivors(cmdlineMax) {
				c.Survivors = append(c.Survivors, certs.Survivor{PID: p.PID, State: p.State, Cmdline: p.Cmdline})
			}
		}
	}
	fs := &c.FinalState
	fs.CPUUserS, fs.CPUSysS = exit.UserCPU.Seconds(), exit.SysCPU.Seconds()
	if user, sys, ok := r.tree.CPUTime(); ok {
		fs.CPUUserS, fs.CPUSysS = user.Seconds(), sys.Seconds()
	}
	fs.PeakRSSBytes = max(r.sampler.peakRSS, exit.MaxRSS)
	fs.ProcsKilled = r.procsKilled(external, len(c.Survivors))
	return c
}

// baseCertificate fills what every certificate has.
func (r *Run) baseCertificate(t symptoms.Symptom) *certs.Certificate {
	a := r.a
	st := r.engine.State()
	c := &certs.Certificate{
		Schema: certs.Schema, CertID: certs.NewID(), AgentID: a.ID, Host: r.host,
		Mode: certs.ModeEnforce, Labels: a.Labels, Command: a.Command, PID: r.proc.PID(),
		Containment: r.tree.Mode(), StartedAt: r.proc.Started(), TriggeredAt: t.At,
		TriggerType: certs.TriggerAuto, TriggerCheck: string(t.Check), TriggerReason: t.Message,
		Escalation: certs.Escalation{Reached: certs.ReachedNone, CoopSignal: sigName(a.Escalation.CoopSignal),
			CoopGraceMS: a.Escalation.CoopGrace.Milliseconds(), TermGraceMS: a.Escalation.TermGrace.Milliseconds()},
		FinalState: certs.FinalState{Status: st.Status, Progress: int64(st.Progress), Tokens: int64(st.Tokens),
			CostUSD: st.CostUSD, LastTool: st.LastTool, LastHeartbeatAt: st.LastHeartbeat,
			Heartbeats: int64(st.Heartbeats), PeakRSSBytes: r.sampler.peakRSS, Errors: int64(st.Errors), Errno: st.Errno},
	}
	if t.Check == symptoms.Manual {
		c.TriggerType = certs.TriggerManual
		op, reason := t.Operator, t.Reason
		c.Operator = &op
		if reason != "" {
			c.OperatorReason = &reason
		}
	}
	for _, s := range r.engine.Log() {
		c.SymptomsLog = append(c.SymptomsLog, certs.Symptom{At: s.At, Check: string(s.Check), Severity: string(s.Severity),
			Observed: s.Observed, Threshold: s.Threshold, Message: s.Message})
	}
	for _, p := range r.autopsy {
		c.ProcessTree = append(c.ProcessTree, certs.Proc{PID: p.PID, PPID: p.PPID, Cmdline: p.Cmdline, State: p.State,
			RSSBytes: p.RSSBytes, CPUS: p.CPUSeconds, Threads: p.Threads, FDs: p.FDs})
	}
	if r.stdout.captured() || r.stderr.captured() {
		c.LastOutput = &certs.LastOutput{Stdout: r.stdout.tail.String(), Stderr: r.stderr.tail.String()}
	}
	if r.o.AuditHead != nil {
		c.AuditAnchor = r.o.AuditHead()
	}
	return c
}

// externalSymptom describes a death by a signal hermeskilld did not send.
func (r *Run) externalSymptom(exit procsup.ExitStatus) symptoms.Symptom {
	msg := fmt.Sprintf("died by %s, which hermeskilld did not send", sigName(exit.Signal))
	if n, ok := r.tree.OOMKills(); ok && n > 0 {
		msg += fmt.Sprintf(" (the kernel's OOM killer killed %d process(es) of the tree)", n)
	} else if exit.Signal == 9 {
		msg += " (the OOM killer or another process)"
	}
	if exit.CoreDumped {
		msg += "; core dumped"
	}
	return symptoms.Symptom{At: r.triggeredAt, Check: symptoms.External, Severity: symptoms.Terminal,
		Observed: sigName(exit.Signal), Message: msg}
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
		s := sigName(e.Signal)
		return certs.Exit{Signal: &s, CoreDumped: e.CoreDumped}
	}
	code := e.Code
	return certs.Exit{Code: &code}
}

func sigName(s syscall.Signal) string {
	if s == 0 {
		return "none"
	}
	return config.SignalName(s)
}
