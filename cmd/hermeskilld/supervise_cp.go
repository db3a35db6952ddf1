// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/hermeskill/hermeskilld/internal/config"
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
