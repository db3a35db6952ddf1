// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/outbox"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// OneRun is the control plane's Directives for a host of one agent: its
// run, once started, while it runs.
type OneRun struct {
	id  string
	log *zap.Logger
	run atomic.Pointer[supervisor.Run]
}

var _ Directives = (*OneRun)(nil)

// NewOneRun takes the directives for agent id; Set gives it the run.
func NewOneRun(id string, log *zap.Logger) *OneRun { return &OneRun{id: id, log: log} }

// Set is the run the directives act on, once it started.
func (o *OneRun) Set(r *supervisor.Run) { o.run.Store(r) }

// AgentIDs is the agent's id while its run runs.
func (o *OneRun) AgentIDs() []string {
	r := o.run.Load()
	if r == nil {
		return nil
	}
	select {
	case <-r.Done():
		return nil
	default:
		return []string{o.id}
	}
}

// Act carries out a directive for the one agent: kill, revoke (the same
// kill: there is no later start to refuse, and the ladder withdraws the
// gateway handle first anyway) or estop, and waits for the run's end.
func (o *OneRun) Act(ctx context.Context, d outbox.Directive) outbox.Acted {
	if d.Action != outbox.ActionEstop && !slices.Contains(d.Agents, o.id) {
		return outbox.Acted{Failed: []outbox.Failure{{Error: fmt.Sprintf("names no agent of this host (this is %q)", o.id)}}}
	}
	r := o.run.Load()
	if r == nil {
		return outbox.Acted{Failed: []outbox.Failure{{AgentID: o.id, Error: "not running"}}}
	}
	operator, reason := d.KillOperator(), d.KillReason()
	o.log.Warn("directive from the control plane; stopping the agent through the ladder",
		zap.String("directive_id", d.ID), zap.String("action", d.Action),
		zap.String("operator", operator), zap.String("reason", reason))
	r.Kill(operator, reason)
	return Ended(ctx, o.id, r)
}

// FailClosed stops the agent: the control plane was not reached for
// fail_closed_after.
func (o *OneRun) FailClosed(unreachable, after time.Duration) {
	if r := o.run.Load(); r != nil {
		r.HostStop(symptoms.ControlPlaneUnreachable, unreachable.Round(time.Millisecond).String(),
			outbox.UnreachableReason(unreachable, after))
	}
}

// Ended waits for run r of agent id to end (or ctx) and says what
// became of it, for a directive's receipt: the run with its certificate,
// or why there is none.
func Ended(ctx context.Context, id string, r interface {
	Done() <-chan struct{}
	Wait() supervisor.Outcome
}) outbox.Acted {
	select {
	case <-r.Done():
	case <-ctx.Done():
		return outbox.Acted{Failed: []outbox.Failure{{AgentID: id, Error: "stopped waiting for the run's end: " + ctx.Err().Error()}}}
	}
	out := r.Wait()
	switch {
	case out.Cert == nil:
		return outbox.Acted{Failed: []outbox.Failure{{AgentID: id, Error: "the run ended without a certificate: " + out.Exit.String()}}}
	case out.CertPath == "":
		return outbox.Acted{Failed: []outbox.Failure{{AgentID: id, Error: fmt.Sprintf("certificate %s not written: %v", out.Cert.CertID, out.CertErr)}}}
	}
	return outbox.Acted{Runs: []outbox.RunEnded{outbox.RunOf(out.Cert, out.TreeEmpty)}}
}
