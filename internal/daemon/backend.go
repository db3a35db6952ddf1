// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hermeskill/hermeskilld/internal/audit"
	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/host"
	"github.com/hermeskill/hermeskilld/internal/metrics"
	"github.com/hermeskill/hermeskilld/internal/outbox"
	"github.com/hermeskill/hermeskilld/internal/rotlog"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
)

var _ control.Backend = (*Daemon)(nil)

// Info is GET /v1/info.
func (d *Daemon) Info() control.DaemonInfo {
	mode := "pgroup"
	if d.h.Cgroups != nil {
		mode = "cgroup"
	}
	return control.DaemonInfo{Version: d.o.Version, PID: os.Getpid(), StartedAt: d.started.UTC(),
		Estopped: d.estopped(), Containment: mode, Agents: d.counts(), Telemetry: d.telemetryStats()}
}

// telemetryStats are the OpenTelemetry export's figures; nil when it is
// off.
func (d *Daemon) telemetryStats() *control.TelemetryStats {
	t := d.h.Telemetry
	if t == nil {
		return nil
	}
	s := t.Stats()
	return &control.TelemetryStats{Exported: s.Exported, Dropped: s.Dropped, Failed: s.Failed, Unsent: s.Unsent, LastError: s.LastError}
}

func (d *Daemon) counts() map[string]int {
	out := map[string]int{}
	for _, a := range d.List() {
		out[a.State]++
	}
	return out
}

func (d *Daemon) sortedSlots() []*slot {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*slot, 0, len(d.slots))
	for _, s := range d.slots {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// List is `hermeskilld ps`: every agent, and every file that never parsed.
func (d *Daemon) List() []control.AgentInfo {
	var out []control.AgentInfo
	for _, s := range d.sortedSlots() {
		info, _ := s.info()
		out = append(out, info)
	}
	d.mu.Lock()
	for _, f := range slices.Sorted(maps.Keys(d.invalid)) {
		out = append(out, invalidInfo(f, d.invalid[f]))
	}
	d.mu.Unlock()
	return out
}

// invalidInfo is the row of an agent file that never parsed. Its id is
// the file's name without the extension: the id inside is not known.
func invalidInfo(file, msg string) control.AgentInfo {
	return control.AgentInfo{ID: strings.TrimSuffix(filepath.Base(file), filepath.Ext(file)), State: control.StateInvalid, Note: msg}
}

// info is the slot's row; also returns the live run's status.
func (s *slot) info() (control.AgentInfo, *supervisor.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := control.AgentInfo{ID: s.id, Restarts: max(0, s.runs-1)}
	if s.cfg != nil {
		info.Labels = s.cfg.Labels
	}
	info.State, info.Note = s.stateLocked()
	if s.run == nil {
		return info, nil
	}
	st := s.run.Status()
	info.State = st.State
	info.PID, info.StartedAt = st.PID, st.Started.UTC()
	if !st.Agent.LastHeartbeat.IsZero() {
		info.LastHeartbeatAt = st.Agent.LastHeartbeat.UTC()
	}
	info.Progress = st.Agent.Progress
	setUsage(&info, st.Usage)
	info.Warnings, info.Status = st.Agent.Warnings, st.Agent.Status
	return info, &st
}

// Status is `hermeskilld status ID`.
func (d *Daemon) Status(id string) (control.AgentStatus, error) {
	d.mu.Lock()
	s := d.slots[id]
	d.mu.Unlock()
	if s == nil {
		return d.statusWithoutSlot(id)
	}
	info, run := s.info()
	st := control.AgentStatus{AgentInfo: info}
	s.mu.Lock()
	if a := s.cfg; a != nil {
		st.Source, st.Command, st.Mode = a.Source, a.Command, string(a.Mode)
		st.Checks, st.Escalation = kvMap(a.Checks.Describe()), kvMap(a.Escalation.Describe())
	}
	st.Pending = slices.Clone(s.pending)
	if len(st.Pending) > 0 {
		for i, p := range st.Pending {
			st.Pending[i] = p + " changes at the next start"
		}
	}
	st.LastExit, st.LastCert, st.ConfigError = s.life.lastExit, s.lastCert, s.configErr
	s.mu.Unlock()
	if run != nil {
		st.Run = wireRun(*run)
		st.Containment, st.Confinement, st.Symptoms = run.Containment, run.Confinement, wireSymptoms(run.Symptoms)
	}
	if q, ok := d.held.quarantined(id); ok {
		st.Quarantine = &q
	}
	st.Telemetry = d.telemetryStats()
	return st, nil
}

// statusWithoutSlot is the status of an id no agent runs under: a file
// that never parsed (the row `ps` shows, with the file:line errors), or a
// quarantine whose agent file is gone.
func (d *Daemon) statusWithoutSlot(id string) (control.AgentStatus, error) {
	var st control.AgentStatus
	d.mu.Lock()
	for _, f := range slices.Sorted(maps.Keys(d.invalid)) {
		if info := invalidInfo(f, d.invalid[f]); info.ID == id {
			st = control.AgentStatus{AgentInfo: info, Source: f, ConfigError: info.Note}
			break
		}
	}
	d.mu.Unlock()
	if q, ok := d.held.quarantined(id); ok {
		if st.ID == "" {
			st.AgentInfo = control.AgentInfo{ID: id, State: control.StateQuarantined, Note: "no agent file"}
		}
		st.Quarantine = &q
	}
	if st.ID == "" {
		return control.AgentStatus{}, fmt.Errorf("%w: %s", control.ErrNotFound, id)
	}
	return st, nil
}

// kvMap is a description, key by key, as the wire format's map.
func kvMap(kvs []config.KV) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

// Kill is POST /v1/kill: one agent, or a cohort by labels and start time,
// killed in parallel, each with its own certificate.
func (d *Daemon) Kill(ctx context.Context, req control.KillRequest) ([]control.KillResult, error) {
	if strings.TrimSpace(req.Reason) == "" {
		return nil, fmt.Errorf("%w: a reason is required", control.ErrBadInput)
	}
	if req.ID != "" {
		d.mu.Lock()
		s := d.slots[req.ID]
		d.mu.Unlock()
		if s == nil {
			return nil, fmt.Errorf("%w: %s", control.ErrNotFound, req.ID)
		}
		return []control.KillResult{s.kill(ctx, req.Operator, req.Reason, req.Wait)}, nil
	}
	if req.Selector.Empty() && req.StartedBefore.IsZero() {
		return nil, fmt.Errorf("%w: name an agent, a --selector or --started-before", control.ErrBadInput)
	}
	var cohort []*slot
	for _, s := range d.runningSlots() {
		s.mu.Lock()
		match := s.run != nil && (req.Selector.Empty() || req.Selector.Matches(s.cfg.Labels)) &&
			(req.StartedBefore.IsZero() || s.started.Before(req.StartedBefore))
		s.mu.Unlock()
		if match {
			cohort = append(cohort, s)
		}
	}
	sort.Slice(cohort, func(i, j int) bool { return cohort[i].id < cohort[j].id })
	return d.killAll(ctx, cohort, req.Operator, req.Reason, req.Wait), nil
}

// Estop is POST /v1/estop.
func (d *Daemon) Estop(ctx context.Context, req control.EstopRequest) ([]control.KillResult, error) {
	if strings.TrimSpace(req.Reason) == "" {
		return nil, fmt.Errorf("%w: a reason is required", control.ErrBadInput)
	}
	return d.estop(ctx, req.Reason, req.Operator, req.Wait), nil
}

// Release is POST /v1/release.
func (d *Daemon) Release(req control.ReleaseRequest) error {
	if req.Estop {
		return d.releaseEstop(req.Operator)
	}
	d.mu.Lock()
	s := d.slots[req.ID]
	d.mu.Unlock()
	was, err := d.held.release(req.ID)
	if err != nil {
		return err
	}
	if s == nil {
		if was {
			return nil
		}
		return fmt.Errorf("%w: %s", control.ErrNotFound, req.ID)
	}
	s.release()
	d.publishState(req.ID, "released", "released by "+req.Operator)
	return nil
}

// Certs is GET /v1/certs.
func (d *Daemon) Certs(agentID string) ([]control.CertSummary, error) {
	entries, err := certs.List(d.certsDir)
	if err != nil {
		return nil, err
	}
	var out []control.CertSummary
	for _, e := range entries {
		c := e.Cert
		if c == nil || (agentID != "" && c.AgentID != agentID) {
			continue
		}
		out = append(out, control.CertSummary{CertID: c.CertID, AgentID: c.AgentID, Path: e.Path, Mode: c.Mode,
			TriggerType: c.TriggerType, TriggerCheck: c.TriggerCheck, Reason: c.TriggerReason,
			Reached: c.Escalation.Reached, TriggeredAt: c.TriggeredAt, Signed: c.Signature != nil})
	}
	return out, nil
}

// Cert is GET /v1/certs/{id}: the raw file of the certificate id names
// (certs.Match: its cert_id, or a unique part of its file name), among the
// files of certs_dir that are certificates.
func (d *Daemon) Cert(id string) ([]byte, error) {
	if id == "" || strings.ContainsAny(id, "/\\") || strings.HasPrefix(id, ".") {
		return nil, fmt.Errorf("%w: certificate %q", control.ErrBadInput, id)
	}
	entries, err := certs.List(d.certsDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	entries = slices.DeleteFunc(entries, func(e certs.Entry) bool { return e.Cert == nil })
	i, n := certs.Match(id, entries, func(e certs.Entry) (string, string) { return e.Cert.CertID, e.Path })
	if n != 1 {
		return nil, fmt.Errorf("%w: certificate %s (%d matches)", control.ErrNotFound, id, n)
	}
	return certs.ReadFile(entries[i].Path)
}

// Subscribe is GET /v1/events.
func (d *Daemon) Subscribe() (<-chan control.Event, func()) { return d.bus.subscribe() }

// AuditRequest records a changing operator request, with the caller's
// uid, before it is acted on (fsynced: who asked for a kill must survive
// a crash right after it).
func (d *Daemon) AuditRequest(c control.Caller, method, path string, body any) {
	d.audit(audit.Event{Type: audit.TypeOperatorRequest, Sync: true, Data: map[string]any{
		"uid": c.UID, "gid": c.GID, "pid": c.PID, "caller": c.Name, "method": method, "path": path, "request": body}})
	d.publish(control.Event{Type: audit.TypeOperatorRequest, Message: fmt.Sprintf("%s %s by %s", method, path, c.Name)})
}

// agentLog opens state_dir/logs/ID.log, rotated by size.
func (d *Daemon) agentLog(id string) (*rotlog.Writer, error) {
	d.mu.Lock()
	lo := d.cfg.Logs
	d.mu.Unlock()
	return rotlog.Open(filepath.Join(d.logsDir, id+".log"), lo.MaxBytes, lo.Keep)
}

// MetricsSamples is the per-agent state the metrics collector reads at
// each scrape.
func (d *Daemon) MetricsSamples() []metrics.AgentSample {
	var out []metrics.AgentSample
	for _, s := range d.sortedSlots() {
		info, st := s.info()
		out = append(out, metrics.SampleOf(info.ID, info.State, st, d.h.Gateway != nil))
	}
	return out
}

// AgentIDs lists the agents with a valid file (the control plane is asked
// for directives about each).
func (d *Daemon) AgentIDs() []string {
	var ids []string
	for _, s := range d.sortedSlots() {
		ids = append(ids, s.id)
	}
	return ids
}

// directives are the control plane's directives, acted on as an
// operator's kill, revoke and e-stop are, waiting for each run's end.
type directives struct{ d *Daemon }

var _ host.Directives = directives{}

// actWait bounds how long a directive waits for the runs it ends: every
// ladder is bounded, this only keeps a stuck one from holding the receipt
// for ever (it then says what did not end).
const actWait = 10 * time.Minute

func (x directives) AgentIDs() []string { return x.d.AgentIDs() }

func (x directives) Act(ctx context.Context, dv outbox.Directive) outbox.Acted {
	ctx, cancel := context.WithTimeout(ctx, actWait)
	defer cancel()
	operator, reason := dv.KillOperator(), dv.KillReason()
	var res []control.KillResult
	var acted outbox.Acted
	switch dv.Action {
	case outbox.ActionEstop:
		res = x.d.estop(ctx, reason, operator, true)
	case outbox.ActionKill, outbox.ActionRevoke:
		if len(dv.Agents) == 0 {
			acted.Failed = append(acted.Failed, outbox.Failure{Error: dv.Action + " names no agents"})
		}
		res = make([]control.KillResult, len(dv.Agents))
		var wg sync.WaitGroup
		for i, id := range dv.Agents {
			wg.Go(func() { res[i] = x.one(ctx, dv.Action, id, operator, reason) })
		}
		wg.Wait()
	}
	for _, r := range res {
		switch {
		case r.Error != "":
			acted.Failed = append(acted.Failed, outbox.Failure{AgentID: r.ID, Error: r.Error})
		case r.CertID == "":
			acted.Failed = append(acted.Failed, outbox.Failure{AgentID: r.ID, Error: "the run ended without a certificate"})
		default:
			acted.Runs = append(acted.Runs, outbox.RunEnded{AgentID: r.ID, CertID: r.CertID,
				TreeEmpty: r.TreeEmpty != nil && *r.TreeEmpty, Revoked: r.Revoked != nil && *r.Revoked, Reached: r.Reached})
		}
	}
	return acted
}

// one kills or revokes agent id and waits for its run's end.
func (x directives) one(ctx context.Context, action, id, operator, reason string) control.KillResult {
	if action == outbox.ActionRevoke {
		rr, err := x.d.Revoke(ctx, control.RevokeRequest{ID: id, Reason: reason, Operator: operator, Wait: true})
		switch {
		case err != nil:
			return control.KillResult{ID: id, Error: err.Error()}
		case len(rr.Killed) == 0:
			return control.KillResult{ID: id, Error: "not running (revoked: it will not start until the rule " + rr.Revocation.Rule + " is lifted)"}
		}
		return rr.Killed[0]
	}
	res, err := x.d.Kill(ctx, control.KillRequest{ID: id, Reason: reason, Operator: operator, Wait: true})
	if err != nil {
		return control.KillResult{ID: id, Error: err.Error()}
	}
	return res[0]
}

// FailClosed is the dead-man's switch of fail_closed_after: the e-stop,
// persisted (every agent stays down until `hermeskilld release --estop`),
// with certificates whose check is control_plane_unreachable.
//
// A pause mode, once the daemon has one, would freeze the agents here
// instead of stopping them.
func (x directives) FailClosed(unreachable, after time.Duration) {
	x.d.failClosed(unreachable, after)
}
