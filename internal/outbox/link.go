// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// Link is a host's connection to its control plane, as control_plane in
// the daemon file describes it: the Outbox that delivers certificates and,
// when poll_interval is above 0, a poller that pulls kill directives for
// the host's agents. FromConfig opens it, Run runs it, Close closes it.
type Link struct {
	// Outbox is where certificates are enqueued (a recorder sink).
	Outbox *Outbox

	cp  config.ControlPlane
	dir string
	log *zap.Logger
}

// Kill stops agentID through the escalation ladder for a kill directive;
// reason and operator are what its certificate records. It may wait for
// the ladder.
type Kill func(ctx context.Context, agentID, reason, operator string) error

// Dir is the outbox directory in a state directory: state_dir/outbox. It
// keeps the undelivered certificates and the directive ids already acted
// on.
func Dir(stateDir string) string { return filepath.Join(stateDir, "outbox") }

// FromConfig opens the outbox for the control plane cp in Dir(stateDir)
// (see Open). Its logs go to log named "outbox" and, for directives,
// "directives"; onStats, when not nil, is Options.OnStats.
//
// Errors: those of Open, prefixed "control_plane: ".
func FromConfig(cp *config.ControlPlane, stateDir string, log *zap.Logger, onStats func(Stats)) (*Link, error) {
	if cp.TokenFile != "" {
		// Refused at start rather than sent: a token others can read is
		// a token others can use.
		if err := checkTokenFile(cp.TokenFile); err != nil {
			return nil, fmt.Errorf("control_plane: %w", err)
		}
	}
	dir := Dir(stateDir)
	ob, err := Open(Options{URL: cp.URL, TokenFile: cp.TokenFile, Dir: dir, Timeout: cp.Timeout,
		MaxItems: cp.MaxOutbox, Log: log.Named("outbox"), OnStats: onStats})
	if err != nil {
		return nil, fmt.Errorf("control_plane: %w", err)
	}
	return &Link{Outbox: ob, cp: *cp, dir: dir, log: log}, nil
}

// Run delivers certificates and, when polling is configured, asks every
// poll interval for the directives of the agents that agents lists, until
// ctx ends. Each kill directive is handed to kill, detached from ctx: a
// kill, once begun, is not stopped half way because the daemon is shutting
// down. kill must return once the kill has begun (the ladder runs on the
// agent's side), not wait for the death. A kill that fails is logged.
//
// Errors: ErrClosed or ErrRunning from the Outbox, or the poller's.
func (l *Link) Run(ctx context.Context, agents func() []string, kill, revoke Kill) error {
	var p *poller
	if l.cp.PollInterval > 0 {
		log := l.log.Named("directives")
		var err error
		p, err = newPoller(pollerOptions{URL: l.cp.URL, TokenFile: l.cp.TokenFile, Dir: l.dir,
			Interval: l.cp.PollInterval, Timeout: l.cp.Timeout, Log: log, Agents: agents,
			Handle: func(id string, d Directive) {
				act := kill
				if d.Action == actionRevoke {
					act = revoke
				}
				if err := act(context.WithoutCancel(ctx), id, d.KillReason(), d.KillOperator()); err != nil {
					log.Error("control plane directive not applied", zap.String("agent", id),
						zap.String("directive", d.ID), zap.Error(err))
				}
			}})
		if err != nil {
			return fmt.Errorf("control_plane: %w", err)
		}
	}
	var wg sync.WaitGroup
	var pollErr error
	if p != nil {
		wg.Go(func() { pollErr = p.Run(ctx) })
	}
	err := l.Outbox.Run(ctx)
	wg.Wait()
	return errors.Join(err, pollErr)
}

// Close closes the Outbox (see Outbox.Close).
func (l *Link) Close() error { return l.Outbox.Close() }

// KillReason is the reason a kill directive's certificate records: the
// directive's own, or else one that names the directive.
func (d Directive) KillReason() string {
	if d.Reason == "" {
		return "control plane directive " + d.ID
	}
	return d.Reason
}

// KillOperator is who a kill directive's certificate names as operator:
// "control-plane:" and the directive's operator, or "control-plane".
func (d Directive) KillOperator() string {
	if d.Operator == "" {
		return "control-plane"
	}
	return "control-plane:" + d.Operator
}
