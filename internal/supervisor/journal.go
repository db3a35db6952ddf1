// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"fmt"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/escalate"
	"github.com/hermeskill/hermeskilld/internal/procfs"
	"github.com/hermeskill/hermeskilld/internal/runjournal"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// journalEvery bounds how often a run's journal entry is rewritten.
const journalEvery = 10 * time.Second

// journalState is what the run journal knows of a run.
type journalState struct {
	path  string
	owner runjournal.Owner
	at    time.Time // last written
	seen  time.Time // the last heartbeat then (the agent's own or its LLM traffic)
}

// journalBegin writes the run's journal entry, once its main process is
// started. A failure is logged: the run goes on, but a SIGKILL of
// hermeskilld would then leave its death unrecorded.
func (r *Run) journalBegin(st runState) {
	if r.o.JournalDir == "" {
		return
	}
	r.jrnl = &journalState{owner: runjournal.Self(),
		path: runjournal.Path(r.o.JournalDir, st.agent.ID, r.proc.PID(), r.tree.MainStartTicks())}
	r.journalWrite(st, time.Now())
}

// journalUpdate rewrites the entry with what is known now, at most every
// journalEvery and only when the agent beat since.
func (r *Run) journalUpdate(st func() runState) {
	j := r.jrnl
	if j == nil {
		return
	}
	now := time.Now()
	if now.Sub(j.at) < journalEvery {
		return
	}
	s := st()
	if s.engine.LastHeartbeat.Equal(j.seen) {
		j.at = now // nothing new; look again later
		return
	}
	r.journalWrite(s, now)
}

func (r *Run) journalWrite(st runState, now time.Time) {
	j := r.jrnl
	j.at, j.seen = now, st.engine.LastHeartbeat
	t := symptoms.Symptom{Check: symptoms.SupervisorLost, Severity: symptoms.Terminal,
		Message: "hermeskilld died while the agent ran"}
	c := r.baseCertificate(t, st, nil)
	c.TriggerType = certs.TriggerExternal
	c.TriggeredAt = time.Time{}
	// Not the output's tail: up to 128 KiB rewritten every few seconds
	// per agent, for a death the agent's last words do not explain.
	c.LastOutput = nil
	e := &runjournal.Entry{Owner: j.owner, MainStart: r.tree.MainStartTicks(), CertsDir: r.o.CertsDir, Certificate: c}
	if r.cg != nil {
		e.Cgroup = filepath.Base(r.cg.Path())
	} else {
		e.Marker = r.marker
	}
	if err := runjournal.Write(j.path, e); err != nil {
		r.log.Warn("run journal not written: a SIGKILL of hermeskilld now would leave this death without a certificate",
			zap.Error(err))
	}
}

// journalEnd removes the entry: the run's end is recorded.
func (r *Run) journalEnd() {
	if r.jrnl == nil {
		return
	}
	if err := runjournal.Remove(r.jrnl.path); err != nil {
		r.log.Warn("run journal entry not removed; the next start would certify this death a second time", zap.Error(err))
	}
}

// RecoverLost writes a certificate for each run in journalDir whose
// hermeskilld died (trigger_type external, check supervisor_lost) from
// what its journal entry and its keeper's record say, and reports each
// through onEvent (the audit log, the control plane's outbox). A main
// process still alive (the keeper died too) is killed with its process
// group first. It returns how many deaths it recorded.
func RecoverLost(journalDir string, signer *certs.Signer, auditHead func() *certs.AuditAnchor,
	onEvent func(Event), log *zap.Logger) int {
	if journalDir == "" {
		return 0
	}
	n, err := runjournal.Recover(journalDir, func(e *runjournal.Entry, k *runjournal.Killed) error {
		c := lostCertificate(e, k, time.Now().UTC())
		if auditHead != nil {
			c.AuditAnchor = auditHead()
		}
		path, err := certs.Write(e.CertsDir, c, signer)
		if err != nil {
			return fmt.Errorf("certificate of agent %s lost with hermeskilld pid %d: %w", c.AgentID, e.Owner.PID, err)
		}
		log.Warn("certificate written for an agent whose hermeskilld died", zap.String("agent", c.AgentID),
			zap.Int("hermeskilld_pid", e.Owner.PID), zap.String("path", path))
		if onEvent != nil {
			onEvent(Event{Type: EventCertificate, Time: c.TerminatedAt, AgentID: c.AgentID, PID: c.PID, Cert: c, CertPath: path})
		}
		return nil
	})
	if err != nil {
		log.Error("run journal: deaths left unrecorded", zap.Error(err))
	}
	return n
}

// lostCertificate completes a journal entry's certificate.
func lostCertificate(e *runjournal.Entry, k *runjournal.Killed, now time.Time) *certs.Certificate {
	c := e.Certificate
	if c.CertID == "" {
		c.CertID = certs.NewID()
	}
	c.TriggerType, c.TriggerCheck = certs.TriggerExternal, string(symptoms.SupervisorLost)
	c.Escalation.Reached = certs.ReachedNone
	who := fmt.Sprintf("hermeskilld (pid %d) died while the agent ran", e.Owner.PID)
	if k != nil {
		c.TriggeredAt, c.TerminatedAt = k.At, k.At
		c.Escalation.Reached = certs.ReachedSigkill
		c.TriggerReason = fmt.Sprintf("%s; its keeper (pid %d) killed the agent's processes at %s",
			who, k.Keeper, k.At.Format(time.RFC3339Nano))
		detail := map[string]any{"by": "keeper", "keeper_pid": k.Keeper, "processes": k.Processes}
		if e.Cgroup != "" {
			detail["cgroup"] = e.Cgroup
		}
		if k.Error != "" {
			detail["error"] = k.Error
		}
		c.ShutdownLog = append(c.ShutdownLog, certs.Step{Step: escalate.StepSIGKILL, At: k.At, Detail: detail})
		c.FinalState.ProcsKilled = k.Processes
	} else {
		// No word from the keeper: it died too, or the host went down.
		// The death is known only to be between the entry's last write
		// and now.
		c.TriggeredAt, c.TerminatedAt = e.UpdatedAt, now
		c.TriggerReason = fmt.Sprintf("%s; no record of its keeper's kill (the keeper died too, or the host restarted): "+
			"the agent ended between %s and %s", who, e.UpdatedAt.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
	}
	if st, err := procfs.Default().Stat(c.PID); err == nil && st.StartTimeTicks == e.MainStart && st.State != 'Z' {
		// Still alive: fail closed.
		err := unix.Kill(-c.PID, unix.SIGKILL)
		c.ShutdownLog = append(c.ShutdownLog, certs.Step{Step: escalate.StepSIGKILL, At: now,
			Detail: map[string]any{"by": "recovery", "process_group": c.PID, "error": errString(err)}})
		c.Escalation.Reached = certs.ReachedSigkill
		c.TriggerReason += "; its main process was still alive at recovery and was killed then"
	}
	c.SymptomsLog = append(c.SymptomsLog, certs.Symptom{At: c.TriggeredAt, Check: c.TriggerCheck,
		Severity: string(symptoms.Terminal), Message: c.TriggerReason})
	return c
}

func errString(err error) any {
	if err == nil {
		return nil
	}
	return err.Error()
}
