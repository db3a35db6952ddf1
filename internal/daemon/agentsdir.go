// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// prepareAgentsDir creates the default agents_dir when it is missing, and
// says so. Any other missing agents_dir was refused before, by the
// daemon file's host check (config.Daemon.CheckHost: ErrNoAgentsDir).
func (d *Daemon) prepareAgentsDir() error {
	if !d.cfg.CreatesAgentsDir() {
		return nil
	}
	if err := os.MkdirAll(d.cfg.AgentsDir, 0o755); err != nil {
		return fmt.Errorf("agents_dir: %w", err)
	}
	d.log.Warn("agents_dir did not exist: created it, empty (the default layout); each agent is a YAML file there",
		zap.String("agents_dir", d.cfg.AgentsDir))
	return nil
}

// checkAgentHost checks what agent a, parsed from data, needs from this
// host to start: its user, cwd and command (config.Agent.CheckHost), and,
// for a user other than the daemon's, a daemon that runs as root
// (config.Agent.CheckRunAs).
func checkAgentHost(a *config.Agent, data []byte) error {
	if err := a.CheckHost(data); err != nil {
		return err
	}
	return a.CheckRunAs(data)
}
