// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// A SIGHUP names every setting it cannot apply until the next start.
func TestReloadNamesWhatWaitsForARestart(t *testing.T) {
	old := config.DefaultDaemon()
	assert.Empty(t, atNextStart(old, config.DefaultDaemon()))

	nc := config.DefaultDaemon()
	nc.HeartbeatRate = old.HeartbeatRate + 1 // applies to the next runs: not named
	nc.StateDir = "/elsewhere"
	nc.Control.OperatorsGroup = "ops"
	nc.ControlPlane = &config.ControlPlane{URL: "https://cp.example"}
	nc.Audit.Keep = old.Audit.Keep + 1
	assert.Equal(t, []string{"state_dir", "control", "control_plane", "audit"}, atNextStart(old, nc))
}
