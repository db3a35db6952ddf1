// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/supervisor"
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

// Kill is a kill directive: a manual kill through the ladder, whose
// certificate names the control plane's operator and reason.
func (o *OneRun) Kill(_ context.Context, id, reason, operator string) error {
	r := o.run.Load()
	if r == nil {
		return errors.New("the agent is not running")
	}
	if id != o.id {
		return fmt.Errorf("no agent %q here (this is %q)", id, o.id)
	}
	o.log.Warn("kill directive from the control plane; stopping the agent through the ladder",
		zap.String("operator", operator), zap.String("reason", reason))
	r.Kill(operator, reason)
	return nil
}

// Revoke is the same kill for one agent: there is no later start to
// refuse, and the ladder withdraws the gateway handle first anyway.
func (o *OneRun) Revoke(ctx context.Context, id, reason, operator string) error {
	return o.Kill(ctx, id, reason, operator)
}
