// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package controltest is an in-memory control.Backend for tests of the
// control server, its client and the operator commands. control.Backend
// is hermeskilld's own interface, so a fake is the right double here: the
// daemon's real implementation is tested in its own package.
//
// The fake keeps agents, certificates and event subscribers in memory and
// records every call in order (Calls), so that a test can check that a
// request was audited before it was acted on.
package controltest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/control"
)

// Audit is one AuditRequest call.
type Audit struct {
	Caller       control.Caller
	Method, Path string
	Body         any
}

// Backend is the fake. Set its fields before serving it; afterwards use
// its methods (it is then used concurrently by the server).
type Backend struct {
	mu       sync.Mutex
	info     control.DaemonInfo
	agents   map[string]*control.AgentStatus
	certs    []control.CertSummary
	files    map[string][]byte // cert id -> file
	audits   []Audit
	calls    []string
	subs     map[int]chan control.Event
	nextSub  int
	estopped bool
	revoked  []control.Revocation
	budgets  []control.Budget
	logs     map[string][]byte // agent id -> its output
	nextPID  int

	// KillHook, when set, replaces the fake's kill (after the fake has
	// recorded the call).
	KillHook func(ctx context.Context, req control.KillRequest) ([]control.KillResult, error)

	subscribed   chan struct{}
	unsubscribed chan struct{}
}

var _ control.Backend = (*Backend)(nil)

// New returns a fake serving agents (by ID).
func New(info control.DaemonInfo, agents ...control.AgentStatus) *Backend {
	b := &Backend{
		info:         info,
		agents:       map[string]*control.AgentStatus{},
		files:        map[string][]byte{},
		subs:         map[int]chan control.Event{},
		logs:         map[string][]byte{},
		nextPID:      9000,
		subscribed:   make(chan struct{}, 64),
		unsubscribed: make(chan struct{}, 64),
	}
	for _, a := range agents {
		b.agents[a.ID] = &a
	}
	return b
}

// AddAgent adds (or replaces) an agent.
func (b *Backend) AddAgent(a control.AgentStatus) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.agents[a.ID] = &a
}

// AddCert adds a certificate: its summary and its file.
func (b *Backend) AddCert(s control.CertSummary, file []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.certs = append(b.certs, s)
	b.files[s.CertID] = file
}

// Audits returns the AuditRequest calls so far.
func (b *Backend) Audits() []Audit {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.audits)
}

// Calls returns the calls that change something, in order: "audit METHOD
// PATH", "kill", "estop", "release", "stop", "start", "restart".
func (b *Backend) Calls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.calls)
}

// Agent returns an agent's current status.
func (b *Backend) Agent(id string) control.AgentStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	return *b.agents[id]
}

// Subscribed receives once per Subscribe call; Unsubscribed once per
// cancel.
func (b *Backend) Subscribed() <-chan struct{}   { return b.subscribed }
func (b *Backend) Unsubscribed() <-chan struct{} { return b.unsubscribed }

// Publish sends e to every subscriber (blocking: tests publish little).
func (b *Backend) Publish(e control.Event) {
	b.mu.Lock()
	subs := slices.Collect(maps.Values(b.subs))
	b.mu.Unlock()
	for _, ch := range subs {
		ch <- e
	}
}

// EndStreams closes every subscription, as a daemon shutting down does.
func (b *Backend) EndStreams() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, ch := range b.subs {
		close(ch)
		delete(b.subs, id)
	}
}

func (b *Backend) Info() control.DaemonInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	info := b.info
	info.Estopped = b.estopped
	info.Agents = map[string]int{}
	for _, a := range b.agents {
		info.Agents[a.State]++
	}
	return info
}

func (b *Backend) List() []control.AgentInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []control.AgentInfo
	for _, id := range slices.Sorted(maps.Keys(b.agents)) {
		out = append(out, b.agents[id].AgentInfo)
	}
	return out
}

func (b *Backend) Status(id string) (control.AgentStatus, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, ok := b.agents[id]
	if !ok {
		return control.AgentStatus{}, fmt.Errorf("%w: %s", control.ErrNotFound, id)
	}
	return *a, nil
}

// Kill kills the matching running agents: they become quarantined, with
// Reached "sigterm" and a certificate path when req.Wait.
func (b *Backend) Kill(ctx context.Context, req control.KillRequest) ([]control.KillResult, error) {
	b.mu.Lock()
	b.calls = append(b.calls, "kill")
	hook := b.KillHook
	b.mu.Unlock()
	if hook != nil {
		return hook(ctx, req)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var ids []string
	if req.ID != "" {
		a, ok := b.agents[req.ID]
		if !ok {
			return nil, fmt.Errorf("%w: %s", control.ErrNotFound, req.ID)
		}
		if a.State != control.StateRunning {
			return nil, fmt.Errorf("%w: agent %s is %s", control.ErrConflict, req.ID, a.State)
		}
		ids = []string{req.ID}
	} else {
		for _, id := range slices.Sorted(maps.Keys(b.agents)) {
			if a := b.agents[id]; a.State == control.StateRunning && matches(a, req) {
				ids = append(ids, id)
			}
		}
	}
	return b.killLocked(ids, req.Reason, req.Operator, req.Wait), nil
}

func matches(a *control.AgentStatus, req control.KillRequest) bool {
	if !req.Selector.Empty() && !req.Selector.Matches(a.Labels) {
		return false
	}
	return req.StartedBefore.IsZero() || a.StartedAt.Before(req.StartedBefore)
}

func (b *Backend) killLocked(ids []string, reason, operator string, wait bool) []control.KillResult {
	var out []control.KillResult
	for _, id := range ids {
		a := b.agents[id]
		a.State = control.StateQuarantined
		a.Quarantine = &control.Quarantine{Reason: reason, Operator: operator}
		r := control.KillResult{ID: id}
		if wait {
			r.Reached = "sigterm"
			r.Certificate = "/certs/" + id + ".json"
		}
		out = append(out, r)
	}
	return out
}

// Estop kills every running agent.
func (b *Backend) Estop(_ context.Context, req control.EstopRequest) ([]control.KillResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, "estop")
	b.estopped = true
	var ids []string
	for _, id := range slices.Sorted(maps.Keys(b.agents)) {
		if b.agents[id].State == control.StateRunning {
			ids = append(ids, id)
		}
	}
	res := b.killLocked(ids, req.Reason, req.Operator, req.Wait)
	for _, id := range ids {
		b.agents[id].State = control.StateEstopped
	}
	return res, nil
}

// Release makes a quarantined agent (or every e-stopped one) running.
// Revoke records a revocation (the fake kills nothing).
func (b *Backend) Revoke(_ context.Context, req control.RevokeRequest) (control.RevokeResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, "revoke")
	r := control.Revocation{Rule: fmt.Sprintf("r%d", len(b.revoked)+1), ID: req.ID, Selector: req.Selector,
		StartedBefore: req.StartedBefore, Reason: req.Reason, Operator: req.Operator, Since: time.Now().UTC()}
	b.revoked = append(b.revoked, r)
	return control.RevokeResult{Revocation: r, Killed: []control.KillResult{}}, nil
}

// Revocations lists what Revoke recorded.
func (b *Backend) Revocations() []control.Revocation {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]control.Revocation(nil), b.revoked...)
}

// Lift removes a recorded revocation.
func (b *Backend) Lift(req control.LiftRequest) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, "lift")
	for i, r := range b.revoked {
		if r.Rule == req.Rule {
			b.revoked = append(b.revoked[:i], b.revoked[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("%w: %s", control.ErrNotFound, req.Rule)
}

// SetBudgets sets what Budgets lists.
func (b *Backend) SetBudgets(list ...control.Budget) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.budgets = append([]control.Budget(nil), list...)
}

// Budgets lists what SetBudgets set.
func (b *Backend) Budgets() []control.Budget {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]control.Budget(nil), b.budgets...)
}

// LiftBudget marks a tripped budget lifted.
func (b *Backend) LiftBudget(req control.BudgetLiftRequest) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, "lift-budget")
	for i := range b.budgets {
		if b.budgets[i].Name != req.Name {
			continue
		}
		if b.budgets[i].State != "tripped" {
			return fmt.Errorf("%w: budget %s is not tripped", control.ErrConflict, req.Name)
		}
		b.budgets[i].State, b.budgets[i].Since = "lifted", time.Now().UTC()
		return nil
	}
	return fmt.Errorf("%w: no budget %q", control.ErrNotFound, req.Name)
}

func (b *Backend) Release(req control.ReleaseRequest) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, "release")
	if req.Estop {
		if !b.estopped {
			return fmt.Errorf("%w: the e-stop is not engaged", control.ErrConflict)
		}
		b.estopped = false
		for _, a := range b.agents {
			if a.State == control.StateEstopped {
				a.State, a.Quarantine = control.StateRunning, nil
			}
		}
		return nil
	}
	a, ok := b.agents[req.ID]
	if !ok {
		return fmt.Errorf("%w: %s", control.ErrNotFound, req.ID)
	}
	if a.State != control.StateQuarantined {
		return fmt.Errorf("%w: agent %s is %s, not quarantined", control.ErrConflict, req.ID, a.State)
	}
	a.State, a.Quarantine = control.StateRunning, nil
	return nil
}

func (b *Backend) Certs(agentID string) ([]control.CertSummary, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []control.CertSummary
	for _, c := range b.certs {
		if agentID == "" || c.AgentID == agentID {
			out = append(out, c)
		}
	}
	return out, nil
}

func (b *Backend) Cert(certID string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	// Named as the daemon names them.
	i, n := certs.Match(certID, b.certs, func(s control.CertSummary) (string, string) { return s.CertID, s.Path })
	if n != 1 {
		return nil, fmt.Errorf("%w: certificate %s (%d matches)", control.ErrNotFound, certID, n)
	}
	return b.files[b.certs[i].CertID], nil
}

func (b *Backend) Subscribe() (<-chan control.Event, func()) {
	b.mu.Lock()
	id := b.nextSub
	b.nextSub++
	ch := make(chan control.Event, 16)
	b.subs[id] = ch
	b.mu.Unlock()
	b.subscribed <- struct{}{}
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.subs, id)
			b.mu.Unlock()
			b.unsubscribed <- struct{}{}
		})
	}
}

func (b *Backend) AuditRequest(c control.Caller, method, path string, body any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.audits = append(b.audits, Audit{Caller: c, Method: method, Path: path, Body: body})
	b.calls = append(b.calls, "audit "+method+" "+path)
}

// Stop makes a running agent exited (Reached "sigterm" and a certificate
// when req.Wait); any other state is a conflict.
func (b *Backend) Stop(_ context.Context, req control.StopRequest) (control.ActionResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, err := b.actionLocked("stop", req.ID)
	if err != nil {
		return control.ActionResult{}, err
	}
	if a.State != control.StateRunning {
		return control.ActionResult{}, fmt.Errorf("%w: agent %s is not running (%s)", control.ErrConflict, req.ID, a.State)
	}
	a.State, a.PID, a.StartedAt = control.StateExited, 0, time.Time{}
	a.Note = "stopped by " + req.Operator
	res := control.ActionResult{ID: req.ID, Stopped: true, State: a.State, Note: a.Note}
	if req.Wait {
		res.Reached, res.Certificate = "sigterm", "/certs/"+req.ID+".json"
	}
	return res, nil
}

// Resume makes a paused agent running; any other state is a conflict.
func (b *Backend) Resume(_ context.Context, req control.ResumeRequest) (control.ResumeResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, err := b.actionLocked("resume", req.ID)
	if err != nil {
		return control.ResumeResult{}, err
	}
	if a.State != control.StatePaused {
		return control.ResumeResult{}, fmt.Errorf("%w: agent %s is not paused (%s)", control.ErrConflict, req.ID, a.State)
	}
	a.State = control.StateRunning
	if a.Run != nil {
		a.Run.State, a.Run.Pause = control.StateRunning, nil
	}
	return control.ResumeResult{ID: req.ID, State: a.State}, nil
}

// actionLocked records a lifecycle call and finds its agent; b.mu is held.
func (b *Backend) actionLocked(call, id string) (*control.AgentStatus, error) {
	b.calls = append(b.calls, call)
	a, ok := b.agents[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", control.ErrNotFound, id)
	}
	return a, nil
}

// Start makes an exited or failed agent running with a new pid.
func (b *Backend) Start(_ context.Context, req control.StartRequest) (control.ActionResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, err := b.actionLocked("start", req.ID)
	if err != nil {
		return control.ActionResult{}, err
	}
	switch a.State {
	case control.StateExited, control.StateFailed, control.StateBackoff:
	case control.StateRunning:
		return control.ActionResult{}, fmt.Errorf("%w: agent %s is already running (pid %d)", control.ErrConflict, req.ID, a.PID)
	default:
		return control.ActionResult{}, fmt.Errorf("%w: agent %s cannot start: it is %s", control.ErrConflict, req.ID, a.State)
	}
	return b.startLocked(a), nil
}

// Restart gives a running or exited agent a new pid.
func (b *Backend) Restart(_ context.Context, req control.RestartRequest) (control.ActionResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, err := b.actionLocked("restart", req.ID)
	if err != nil {
		return control.ActionResult{}, err
	}
	switch a.State {
	case control.StateRunning:
		res := b.startLocked(a)
		res.Stopped, res.Reached, res.Certificate = true, "sigterm", "/certs/"+req.ID+".json"
		return res, nil
	case control.StateExited, control.StateFailed, control.StateBackoff:
		return b.startLocked(a), nil
	}
	return control.ActionResult{}, fmt.Errorf("%w: agent %s cannot start: it is %s", control.ErrConflict, req.ID, a.State)
}

func (b *Backend) startLocked(a *control.AgentStatus) control.ActionResult {
	b.nextPID++
	a.State, a.PID, a.StartedAt, a.Note = control.StateRunning, b.nextPID, time.Now().UTC(), ""
	return control.ActionResult{ID: a.ID, State: a.State, PID: a.PID, StartedAt: a.StartedAt}
}

// AppendLog adds output to an agent's log (followers see it).
func (b *Backend) AppendLog(id string, data []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.logs[id] = append(b.logs[id], data...)
}

// Logs serves what AppendLog added: the last req.Tail lines, then, when
// following, what is appended until ctx ends. An agent without output
// has an empty log; an id that is no agent is not found.
func (b *Backend) Logs(ctx context.Context, id string, req control.LogsRequest) (io.ReadCloser, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.agents[id]; !ok {
		return nil, fmt.Errorf("%w: %s", control.ErrNotFound, id)
	}
	data := b.logs[id]
	start := 0
	if req.Tail >= 0 {
		start = len(data)
		for n := 0; n < req.Tail && start > 0; n++ {
			start = bytes.LastIndexByte(data[:start-1], '\n') + 1
		}
	}
	return &fakeLog{b: b, id: id, ctx: ctx, off: start, follow: req.Follow}, nil
}

type fakeLog struct {
	b      *Backend
	id     string
	ctx    context.Context
	off    int
	follow bool
}

func (l *fakeLog) Read(p []byte) (int, error) {
	for {
		l.b.mu.Lock()
		data := l.b.logs[l.id]
		l.b.mu.Unlock()
		if l.off < len(data) {
			n := copy(p, data[l.off:])
			l.off += n
			return n, nil
		}
		if !l.follow {
			return 0, io.EOF
		}
		select {
		case <-l.ctx.Done():
			return 0, io.EOF
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (l *fakeLog) Close() error { return nil }
