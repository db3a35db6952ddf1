// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
)

// Resume is POST /v1/resume: a paused run's budget raised, its tree
// thawed, its held LLM requests let go.
func (d *Daemon) Resume(ctx context.Context, req control.ResumeRequest) (control.ResumeResult, error) {
	d.mu.Lock()
	s := d.slots[req.ID]
	d.mu.Unlock()
	if s == nil {
		return control.ResumeResult{}, fmt.Errorf("%w: %s", control.ErrNotFound, req.ID)
	}
	s.mu.Lock()
	r := s.run
	s.mu.Unlock()
	if r == nil {
		return control.ResumeResult{}, fmt.Errorf("%w: agent %s is not running, so not paused", control.ErrConflict, req.ID)
	}
	if err := ResumeRun(ctx, r, req); err != nil {
		return control.ResumeResult{}, err
	}
	return control.ResumeResult{ID: req.ID, State: r.Status().State}, nil
}

// Resumable is a run that may be paused: *supervisor.Run.
type Resumable interface {
	Resume(ctx context.Context, req supervisor.ResumeRequest) error
	Status() supervisor.Status
}

// ResumeRun resumes the paused run r as req asks (the daemon's and
// supervise's control sockets both), its errors the control API's:
// ErrConflict when it is not paused, ErrBadInput when the budget does not
// raise it enough.
func ResumeRun(ctx context.Context, r Resumable, req control.ResumeRequest) error {
	err := r.Resume(ctx, supervisor.ResumeRequest{CostUSD: req.CostUSD, Tokens: req.Tokens, Operator: req.Operator})
	var re *gateway.ResumeError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, supervisor.ErrNotPaused):
		return fmt.Errorf("%w: agent %s is not paused (%s)", control.ErrConflict, req.ID, r.Status().State)
	case errors.Is(err, supervisor.ErrResumeBudget), errors.As(err, &re):
		return fmt.Errorf("%w: agent %s stays paused: %w", control.ErrBadInput, req.ID, err)
	}
	return err
}

// WirePause is a pause in progress as the control API shows it.
func WirePause(p *certs.Pause) *control.Pause {
	if p == nil {
		return nil
	}
	return &control.Pause{Since: p.PausedAt.UTC(), Check: p.Check, Reason: p.Reason, Frozen: p.Frozen,
		HeldRequests: p.HeldRequests, TimeoutAt: p.PausedAt.Add(time.Duration(p.TimeoutMS) * time.Millisecond).UTC()}
}

// WireRun is a live run's status as the control API shows it (supervise's
// control socket shows its one run so).
func WireRun(st supervisor.Status) *control.RunStatus { return wireRun(st) }
