// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"errors"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/denials"
	"github.com/hermeskill/hermeskilld/internal/landlock"
)

// denialsSettle bounds how long the certificate waits for the kernel's own
// totals of the agent's Landlock domains (denials.Counter.Settle).
const denialsSettle = 250 * time.Millisecond

// errNoDenials: checks.denials with nothing that could count them.
var errNoDenials = errors.New("checks.denials: the agent's denials cannot be counted")

// trackDenials starts counting what Landlock refuses the agent: always
// for a run with checks.denials (which is not started when they cannot
// be counted: a check that could never fire must not pass for one that
// holds), and for a run whose files are confined when the kernel's audit
// log can be read.
func (r *Run) trackDenials(a *config.Agent, confine landlock.Ruleset) error {
	want := a.Checks.Denials != nil
	if !want && confine.Writable == nil {
		return nil
	}
	abi := r.o.Runtime.LandlockABI()
	var err error
	switch {
	case r.o.Denials == nil:
		err = errors.New("this hermeskilld reads no audit log")
	case !confine.Restricts():
		err = fmt.Errorf("Landlock confines nothing of the agent here (ABI %d)", abi)
	case abi < landlock.LoggingABI:
		err = fmt.Errorf("this kernel's Landlock (ABI %d) logs no denials after an execve(2): that takes ABI %d, Linux 6.15", abi, landlock.LoggingABI)
	}
	var rd *denials.Reader
	if err == nil {
		rd, err = r.o.Denials()
	}
	if err != nil {
		if want {
			return fmt.Errorf("%w: %w; the agent is not started", errNoDenials, err)
		}
		r.log.Debug("Landlock's denials of the agent are not counted", zap.Error(err))
		return nil
	}
	self := os.Getpid()
	exclusive := r.o.Exclusive
	r.denials = rd.Track(func(pid int) bool {
		if exclusive && pid == self {
			// The domain's creator, when it was made on one of our
			// threads: ours is the only agent.
			return true
		}
		t := r.denialsTree.Load()
		if t == nil {
			return false
		}
		ok, _ := t.Contains(pid)
		return ok
	})
	return nil
}

// certDenials is the certificate's record of the agent's denials.
func (r *Run) certDenials() *certs.Denials {
	if r.denials == nil {
		return nil
	}
	r.denials.Settle(denialsSettle)
	s := r.denials.Summary()
	out := &certs.Denials{Count: s.Count, ByBlocker: s.ByBlocker}
	for _, d := range s.Recent {
		out.Recent = append(out.Recent, certs.Denial{Blockers: d.Blockers, Target: d.Target, PID: d.PID})
	}
	return out
}
