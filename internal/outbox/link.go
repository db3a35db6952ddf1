// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
)

// Link is a host's connection to its control plane, as control_plane in
// the daemon file describes it: the Outbox that delivers certificates and
// directive receipts and, when poll_interval is above 0, the pollers that
// pull directives (the host's by long poll, each agent's by polling) and
// the dead-man's switch of fail_closed_after. FromConfig opens it, Run
// runs it, Close closes it.
type Link struct {
	// Outbox is where certificates are enqueued (a recorder sink).
	Outbox *Outbox
	// Signer, when set before Run, signs the directive receipts (the key
	// certificates are signed with); nil: receipts are unsigned.
	Signer *certs.Signer
	// Host is the host name receipts carry and the host's directives are
	// asked for (FromConfig: os.Hostname).
	Host string

	cp  config.ControlPlane
	dir string
	log *zap.Logger
}

// Host is what the control plane's directives act on.
type Host interface {
	// AgentIDs are the agents to ask directives for.
	AgentIDs() []string
	// Act carries out directive d — kill or revoke the agents it names,
	// or estop: every agent, kept down — and returns once every run it
	// ended is over, its certificate written and its ladder's result
	// known: Acted lists them, and what failed. ctx is detached from
	// shutdown.
	Act(ctx context.Context, d Directive) Acted
	// FailClosed stops every agent because the control plane has not been
	// reached for unreachable (fail_closed_after is after). It returns
	// once the stops have begun.
	FailClosed(unreachable, after time.Duration)
}

// Dir is the outbox directory in a state directory: state_dir/outbox. It
// keeps the undelivered certificates and receipts, the directive ids
// already acted on and their receipts.
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
	host, _ := os.Hostname()
	return &Link{Outbox: ob, Host: host, cp: *cp, dir: dir, log: log}, nil
}

// Run delivers certificates and receipts and, when polling is configured,
// asks for the host's directives (long poll) and every poll interval for
// those of the agents h lists, until ctx ends. Each directive is carried
// out by h.Act, detached from ctx (a kill, once begun, is not stopped half
// way because the host is shutting down), and acknowledged with a signed
// receipt queued in the outbox; a directive already acted on is
// acknowledged again, not carried out twice. With fail_closed_after, a
// control plane not reached for that long makes h.FailClosed stop every
// agent. Run returns once the directives in flight are acknowledged.
//
// Errors: ErrClosed or ErrRunning from the Outbox, or the poller's.
func (l *Link) Run(ctx context.Context, h Host) error {
	var wg sync.WaitGroup
	var ack *acker
	if l.cp.PollInterval > 0 {
		log := l.log.Named("directives")
		ack = &acker{host: l.Host, signer: l.Signer, ob: l.Outbox, dir: filepath.Join(l.dir, receiptsDir),
			max: defaultMaxSeen, act: h.Act, log: log, inflight: map[seenKey]bool{}}
		detached := context.WithoutCancel(ctx)
		var dm *deadman
		if l.cp.FailClosedAfter > 0 {
			dm = newDeadman(l.cp.FailClosedAfter, func(unreachable time.Duration) {
				log.Error("control plane unreachable for fail_closed_after: stopping every agent",
					zap.Duration("unreachable", unreachable), zap.Duration("fail_closed_after", l.cp.FailClosedAfter))
				h.FailClosed(unreachable, l.cp.FailClosedAfter)
			})
			wg.Go(func() { dm.run(ctx) })
		}
		p, err := newPoller(pollerOptions{URL: l.cp.URL, TokenFile: l.cp.TokenFile, Dir: l.dir,
			Interval: l.cp.PollInterval, Timeout: l.cp.Timeout, Log: log, Agents: h.AgentIDs,
			Handle:    func(scope string, d Directive) { ack.handle(detached, scope, d) },
			Repeat:    ack.repeat,
			OnContact: dm.contact})
		if err != nil {
			return fmt.Errorf("control_plane: %w", err)
		}
		wg.Go(func() { _ = p.Run(ctx) })
		wg.Go(func() { _ = p.RunHost(ctx, l.Host, l.longPollWait()) })
	}
	err := l.Outbox.Run(ctx)
	wg.Wait()
	if ack != nil {
		ack.wait()
	}
	return err
}

// longPollWait is the ?wait= asked for: LongPollWait, or a third of
// fail_closed_after when that is shorter, so that a reachable control
// plane is heard from well within it.
func (l *Link) longPollWait() time.Duration {
	if fc := l.cp.FailClosedAfter; fc > 0 && fc/3 < LongPollWait {
		return fc / 3
	}
	return LongPollWait
}

// UnreachableReason is the reason the certificates of a stop by
// fail_closed_after give: how long the control plane was not reached.
func UnreachableReason(unreachable, after time.Duration) string {
	return fmt.Sprintf("control plane unreachable for %s (fail_closed_after %s): stopped rather than run where no stop can reach it",
		unreachable.Round(100*time.Millisecond), after)
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
