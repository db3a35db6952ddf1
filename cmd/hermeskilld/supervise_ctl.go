// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/audit"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/daemon"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
	"github.com/hermeskill/hermeskilld/internal/recorder"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
)

// A supervise run whose money checks pause it (on_budget: pause) serves
// the control API on a socket of its own, so that `hermeskilld resume ID`
// from another terminal reaches it: heartbeat.SupervisorControlSocket(ID),
// in a directory only its user enters. It serves status, kill and resume;
// the rest is the daemon's. Its user and root may change things; the
// agent's own processes, which run as the same user, are refused, so that
// an agent cannot resume itself past its budget.

// errSuperviseOnly answers what only the daemon serves.
var errSuperviseOnly = fmt.Errorf("%w: a supervise run's control socket serves status, kill and resume only", control.ErrConflict)

// superviseControl is the control socket of one supervise run.
type superviseControl struct {
	srv  *control.Server
	stop context.CancelFunc
	done chan struct{}
}

// listenControl creates the control socket of the run of agent a, before
// the run starts (a socket in use by another run of the same id is an
// error then, not later); serve starts answering on it.
func listenControl(a *config.Agent, b *superviseBackend, log *zap.Logger) (*superviseControl, error) {
	path := heartbeat.SupervisorControlSocket(a.ID)
	srv := control.NewServer(b, control.ServerOptions{Path: path, OwnerUID: os.Geteuid(), Log: log,
		Refuse: func(c control.Caller) error {
			if b.run != nil && b.run.InTree(c.PID) {
				return fmt.Errorf("%w: a process of the agent's own tree may not change its run", control.ErrForbidden)
			}
			return nil
		}})
	if err := srv.Listen(); err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	return &superviseControl{srv: srv, done: make(chan struct{})}, nil
}

// serve answers on the socket until close.
func (sc *superviseControl) serve(log *zap.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	sc.stop = cancel
	go func() {
		defer close(sc.done)
		if err := sc.srv.Serve(ctx); err != nil {
			log.Error("control socket", zap.Error(err))
		}
	}()
}

// close stops the socket and removes it.
func (sc *superviseControl) close() {
	if sc == nil {
		return
	}
	_ = sc.srv.Close()
	if sc.stop != nil {
		sc.stop()
		<-sc.done
	}
}

// superviseBackend is the control API of one supervise run. run is set
// before the socket serves.
type superviseBackend struct {
	agent   *config.Agent
	run     *supervisor.Run
	started time.Time
	rec     *recorder.Recorder
	log     *zap.Logger
}

var _ control.Backend = (*superviseBackend)(nil)

func (b *superviseBackend) Info() control.DaemonInfo {
	st := b.run.Status()
	return control.DaemonInfo{Version: versionString(), PID: os.Getpid(), StartedAt: b.started.UTC(),
		Containment: st.Containment, Agents: map[string]int{st.State: 1}}
}

func (b *superviseBackend) info() (control.AgentInfo, supervisor.Status) {
	st := b.run.Status()
	info := control.AgentInfo{ID: st.ID, State: st.State, PID: st.PID, Labels: b.agent.Labels, StartedAt: st.Started.UTC(),
		Progress: st.Agent.Progress, CostUSD: st.Usage.CostUSD, Tokens: st.Usage.Tokens,
		ReportedCostUSD: st.Usage.ReportedCostUSD, ReportedTokens: st.Usage.ReportedTokens,
		Warnings: st.Agent.Warnings, Status: st.Agent.Status}
	if !st.Agent.LastHeartbeat.IsZero() {
		info.LastHeartbeatAt = st.Agent.LastHeartbeat.UTC()
	}
	return info, st
}

func (b *superviseBackend) List() []control.AgentInfo {
	info, _ := b.info()
	return []control.AgentInfo{info}
}

func (b *superviseBackend) Status(id string) (control.AgentStatus, error) {
	if id != b.agent.ID {
		return control.AgentStatus{}, fmt.Errorf("%w: %s (this supervise runs %s)", control.ErrNotFound, id, b.agent.ID)
	}
	info, st := b.info()
	return control.AgentStatus{AgentInfo: info, Source: b.agent.Source, Command: b.agent.Command, Mode: string(st.Mode),
		Containment: st.Containment, Run: daemon.WireRun(st)}, nil
}

func (b *superviseBackend) Kill(ctx context.Context, req control.KillRequest) ([]control.KillResult, error) {
	if req.ID != b.agent.ID {
		return nil, fmt.Errorf("%w: this supervise runs %s; it kills it by its id only", control.ErrNotFound, b.agent.ID)
	}
	b.run.Kill(req.Operator, req.Reason)
	if !req.Wait {
		return []control.KillResult{{ID: req.ID}}, nil
	}
	select {
	case <-b.run.Done():
	case <-ctx.Done():
		return []control.KillResult{{ID: req.ID, Error: "stopped waiting: " + ctx.Err().Error()}}, nil
	}
	out := b.run.Wait()
	return []control.KillResult{{ID: req.ID, Reached: string(out.Reached), Certificate: out.CertPath}}, nil
}

func (b *superviseBackend) Resume(ctx context.Context, req control.ResumeRequest) (control.ResumeResult, error) {
	if req.ID != b.agent.ID {
		return control.ResumeResult{}, fmt.Errorf("%w: %s (this supervise runs %s)", control.ErrNotFound, req.ID, b.agent.ID)
	}
	if err := daemon.ResumeRun(ctx, b.run, req); err != nil {
		return control.ResumeResult{}, err
	}
	return control.ResumeResult{ID: req.ID, State: b.run.Status().State}, nil
}

// AuditRequest records a changing request in the audit log, when there
// is one, and in the log.
func (b *superviseBackend) AuditRequest(c control.Caller, method, path string, body any) {
	b.log.Info("operator request", zap.String("caller", c.Name), zap.Int("pid", c.PID), zap.String("method", method),
		zap.String("path", path))
	if b.rec != nil && b.rec.Audit != nil {
		b.rec.Audit.Append(audit.Event{Type: audit.TypeOperatorRequest, AgentID: b.agent.ID, Sync: true, Data: map[string]any{
			"uid": c.UID, "gid": c.GID, "pid": c.PID, "caller": c.Name, "method": method, "path": path, "request": body}})
	}
}

func (b *superviseBackend) Estop(context.Context, control.EstopRequest) ([]control.KillResult, error) {
	return nil, errSuperviseOnly
}
func (b *superviseBackend) Release(control.ReleaseRequest) error { return errSuperviseOnly }
func (b *superviseBackend) Stop(context.Context, control.StopRequest) (control.ActionResult, error) {
	return control.ActionResult{}, errSuperviseOnly
}
func (b *superviseBackend) Start(context.Context, control.StartRequest) (control.ActionResult, error) {
	return control.ActionResult{}, errSuperviseOnly
}
func (b *superviseBackend) Restart(context.Context, control.RestartRequest) (control.ActionResult, error) {
	return control.ActionResult{}, errSuperviseOnly
}
func (b *superviseBackend) Logs(context.Context, string, control.LogsRequest) (io.ReadCloser, error) {
	return nil, errSuperviseOnly
}
func (b *superviseBackend) Revoke(context.Context, control.RevokeRequest) (control.RevokeResult, error) {
	return control.RevokeResult{}, errSuperviseOnly
}
func (b *superviseBackend) Revocations() []control.Revocation           { return nil }
func (b *superviseBackend) Lift(control.LiftRequest) error              { return errSuperviseOnly }
func (b *superviseBackend) Budgets() []control.Budget                   { return nil }
func (b *superviseBackend) LiftBudget(control.BudgetLiftRequest) error  { return errSuperviseOnly }
func (b *superviseBackend) Certs(string) ([]control.CertSummary, error) { return nil, errSuperviseOnly }
func (b *superviseBackend) Cert(string) ([]byte, error)                 { return nil, errSuperviseOnly }

// Subscribe: no event stream (the run's log and audit log have them);
// the channel closes when cancelled.
func (b *superviseBackend) Subscribe() (<-chan control.Event, func()) {
	ch := make(chan control.Event)
	var once sync.Once
	return ch, func() { once.Do(func() { close(ch) }) }
}
