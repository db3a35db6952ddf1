// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/metrics"
	"github.com/hermeskill/hermeskilld/internal/outbox"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
)

// supervise and a control plane: the fleet path, one supervise per pod.
// Certificates go through the daemon's durable outbox, in --state-dir;
// kill directives are polled while the agent runs; at exit the outbox is
// flushed for at most --flush-timeout, and what is left is delivered by
// the next run that uses the same state directory.

// defaultFlushTimeout is --flush-timeout's default.
const defaultFlushTimeout = 5 * time.Second

// cpFlags are supervise's control-plane flags. --control-plane-url and
// --control-plane-token-file set keys of the agent file's control_plane;
// --state-dir and --flush-timeout have no key.
type cpFlags struct {
	url, tokenFile, stateDir string
	flushTimeout             time.Duration
}

// apply sets the control_plane keys given as flags on a, over --config.
func (f *cpFlags) apply(a *config.Agent) error {
	if f.url != "" {
		if err := a.Set("control_plane.url", f.url); err != nil {
			return fmt.Errorf("--control-plane-url: %w", err)
		}
	}
	if f.tokenFile != "" {
		p, err := filepath.Abs(f.tokenFile)
		if err == nil {
			err = a.Set("control_plane.token_file", p)
		}
		if err != nil {
			return fmt.Errorf("--control-plane-token-file: %w", err)
		}
	}
	if f.flushTimeout < 0 {
		return fmt.Errorf("--flush-timeout %s: must not be negative", f.flushTimeout)
	}
	return nil
}

// defaultStateDir is --state-dir when not given: the directory that holds
// the certificates directory, as the daemon's state_dir holds certs/ and
// outbox/ side by side (~/.local/state/hermeskill for the default
// ~/.local/state/hermeskill/certs; /var/lib/hermeskill for
// /var/lib/hermeskill/certs).
func defaultStateDir(certsDir string) string {
	if abs, err := filepath.Abs(certsDir); err == nil {
		certsDir = abs
	}
	return filepath.Dir(filepath.Clean(certsDir))
}

// cpLink is supervise's connection to the control plane for one run.
type cpLink struct {
	id       string // the agent's
	link     *outbox.Link
	stateDir string
	log      *zap.Logger

	run       atomic.Pointer[supervisor.Run] // set once the agent started
	cancel    context.CancelFunc
	done      chan error // Link.Run's result
	closeOnce sync.Once

	mu        sync.Mutex
	queued    []string // cert ids of this run, queued
	notQueued []error  // certificates of this run the outbox refused
}

// openControlPlane opens the outbox in stateDir for cp and starts the
// sender at once (certificates earlier runs left are delivered while the
// agent runs) and the directive poller. Errors are supervise's exit 125.
func openControlPlane(id string, cp *config.ControlPlane, stateDir string, log *zap.Logger, m *metrics.Metrics) (*cpLink, error) {
	if cp.TokenFile != "" {
		if err := outbox.CheckTokenFile(cp.TokenFile); err != nil {
			return nil, fmt.Errorf("control_plane.token_file: %w", err)
		}
	}
	var onStats func(outbox.Stats)
	if m != nil {
		onStats = func(s outbox.Stats) {
			m.SetOutbox(s.Pending, s.Parked, s.Delivered, s.Failures)
			m.SetOutboxRejected(s.Rejected)
		}
	}
	link, err := outbox.FromConfig(cp, stateDir, log, onStats)
	if errors.Is(err, outbox.ErrLocked) {
		err = fmt.Errorf("%w: another hermeskilld delivers from --state-dir %s; give each concurrent supervise a state directory of its own", err, stateDir)
	}
	if err != nil {
		return nil, err
	}
	c := &cpLink{id: id, link: link, stateDir: stateDir, log: log, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() { c.done <- link.Run(ctx, c.agents, c.kill, c.kill) }()
	if st := link.Outbox.Stats(); st.Pending > 0 {
		log.Info("delivering certificates earlier runs left for the control plane",
			zap.Int("pending", st.Pending), zap.String("state_dir", stateDir))
	}
	return c, nil
}

// agents are the ids the poller asks directives for: the agent's, while
// it runs.
func (c *cpLink) agents() []string {
	r := c.run.Load()
	if r == nil {
		return nil
	}
	select {
	case <-r.Done():
		return nil
	default:
		return []string{c.id}
	}
}

// kill is a kill directive: a manual kill through the ladder, whose
// certificate names the control plane's operator and reason. A revoke
// directive is the same kill under supervise: there is no later start to
// refuse, and the ladder withdraws the gateway handle first anyway.
func (c *cpLink) kill(_ context.Context, id, reason, operator string) error {
	r := c.run.Load()
	if r == nil {
		return errors.New("the agent is not running")
	}
	if id != c.id {
		return fmt.Errorf("no agent %q here (this is %q)", id, c.id)
	}
	c.log.Warn("kill directive from the control plane; stopping the agent through the ladder",
		zap.String("operator", operator), zap.String("reason", reason))
	r.Kill(operator, reason)
	return nil
}

// Enqueue queues a certificate of this run (a recorder sink) and
// remembers it for the exit line.
func (c *cpLink) Enqueue(cert *certs.Certificate, raw []byte) error {
	err := c.link.Outbox.Enqueue(cert, raw)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.notQueued = append(c.notQueued, err)
	} else {
		c.queued = append(c.queued, cert.CertID)
	}
	return err
}

// close stops the sender and the poller and releases the outbox without
// waiting for a delivery (an early exit, or after finish). Idempotent.
func (c *cpLink) close() {
	c.closeOnce.Do(func() {
		c.cancel()
		if err := <-c.done; err != nil {
			c.log.Warn("control plane", zap.Error(err))
		}
		if err := c.link.Close(); err != nil {
			c.log.Warn("control plane outbox", zap.Error(err))
		}
	})
}

// finish flushes the outbox for at most timeout (a stop signal cuts it
// short), then closes it, and sums up what happened to the certificates.
func (c *cpLink) finish(timeout time.Duration, sigs <-chan os.Signal) *cpSummary {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	go func() {
		for {
			select {
			case s := <-sigs:
				switch s {
				case syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT:
					c.log.Warn("stop signal received; not waiting for the control plane any longer",
						zap.String("signal", config.SignalName(s.(syscall.Signal))))
					cancel()
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	ob := c.link.Outbox
	if ob.Stats().Pending > 0 {
		c.log.Info("delivering to the control plane before exiting", zap.Duration("flush_timeout", timeout))
	}
	st := ob.Flush(ctx)
	cancel()
	s := &cpSummary{stateDir: c.stateDir, outboxDir: ob.Dir(), pending: st.Pending}
	c.mu.Lock()
	s.own, s.notQueued = len(c.queued), c.notQueued
	for _, id := range c.queued {
		switch {
		case ob.IsPending(id):
			s.ownPending++
		case ob.IsParked(id):
			s.ownParked++
		default:
			s.ownDelivered++
		}
	}
	c.mu.Unlock()
	s.earlierDelivered = max(int(st.Delivered)-s.ownDelivered, 0)
	c.close()
	if s.pending > 0 {
		c.log.Warn("certificates left undelivered in the outbox; the next run using this state directory delivers them",
			zap.Int("pending", s.pending), zap.String("state_dir", c.stateDir))
	}
	return s
}

// cpSummary is what became of the certificates at exit.
type cpSummary struct {
	stateDir, outboxDir string
	own                 int // this run's certificates queued
	ownDelivered        int
	ownPending          int
	ownParked           int
	notQueued           []error // this run's certificates the outbox refused (full, disk)
	earlierDelivered    int     // left by earlier runs, delivered by this one
	pending             int     // undelivered in the outbox now, this run's and earlier ones
}

// text is the control plane's part of the exit line; "" when there is
// nothing to say (no certificate, nothing left by earlier runs).
func (s *cpSummary) text() string {
	if s == nil {
		return ""
	}
	var parts []string
	retry := fmt.Sprintf("will be retried by the next run using %s", s.stateDir)
	switch {
	case s.own == 0:
	case s.ownDelivered == s.own:
		parts = append(parts, certsN(s.own)+" delivered to the control plane")
	case s.ownPending == s.own:
		parts = append(parts, fmt.Sprintf("%s queued for the control plane (%d undelivered, %s)", certsN(s.own), s.pending, retry))
	default:
		var ps []string
		if s.ownDelivered > 0 {
			ps = append(ps, fmt.Sprintf("%d delivered", s.ownDelivered))
		}
		if s.ownPending > 0 {
			ps = append(ps, fmt.Sprintf("%d queued (%d undelivered, %s)", s.ownPending, s.pending, retry))
		}
		if s.ownParked > 0 {
			ps = append(ps, fmt.Sprintf("%d refused", s.ownParked))
		}
		parts = append(parts, fmt.Sprintf("%s for the control plane: %s", certsN(s.own), strings.Join(ps, ", ")))
	}
	if s.ownParked > 0 {
		parts = append(parts, fmt.Sprintf("refused by the control plane: see %s", filepath.Join(s.outboxDir, outbox.ParkedDir)))
	}
	if n := len(s.notQueued); n > 0 {
		parts = append(parts, fmt.Sprintf("%s not queued for the control plane (%v); only in the certificates directory", certsN(n), s.notQueued[0]))
	}
	if s.earlierDelivered > 0 {
		parts = append(parts, earlierN(s.earlierDelivered)+" delivered to the control plane")
	}
	if earlier := s.pending - s.ownPending; earlier > 0 && s.ownPending == 0 {
		parts = append(parts, fmt.Sprintf("%s still queued for the control plane (%d undelivered, %s)", earlierN(earlier), s.pending, retry))
	}
	return strings.Join(parts, "; ")
}

// earlierN is "1 certificate of an earlier run", "N certificates of
// earlier runs".
func earlierN(n int) string {
	if n == 1 {
		return "1 certificate of an earlier run"
	}
	return fmt.Sprintf("%d certificates of earlier runs", n)
}

// certsN is "certificate" for one, "N certificates" otherwise.
func certsN(n int) string {
	if n == 1 {
		return "certificate"
	}
	return fmt.Sprintf("%d certificates", n)
}
