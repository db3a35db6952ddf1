// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"maps"
	"path/filepath"
	"slices"
)

// What changes while an agent runs, and what only at its next start, is
// decided here once: a live edit of an agent file applies Live fields at
// once (the symptoms engine and the ladder read them), StartDiff names the
// others, which need a new process.

// WithLive returns a with next's live fields: checks, escalation, mode,
// labels, restart, after_kill, on_budget and pause_timeout. Identity and how the agent is started
// (command, user, env, cwd, writable, network, allow, its gateway, its control_plane) stay a's.
func (a Agent) WithLive(next *Agent) *Agent {
	a.Checks, a.Escalation, a.Mode = next.Checks, next.Escalation, next.Mode
	a.Labels, a.Restart, a.AfterKill = next.Labels, next.Restart, next.AfterKill
	a.OnBudget, a.PauseTimeout = next.OnBudget, next.PauseTimeout
	return &a
}

// StartDiff names the settings that differ between a and next and take
// effect only at the next start.
func (a *Agent) StartDiff(next *Agent) []string {
	var d []string
	if !slices.Equal(a.Command, next.Command) {
		d = append(d, "command")
	}
	if a.User != next.User {
		d = append(d, "user")
	}
	if !maps.Equal(a.Env, next.Env) {
		d = append(d, "env")
	}
	if filepath.Clean(a.Cwd) != filepath.Clean(next.Cwd) {
		d = append(d, "cwd")
	}
	if !slices.Equal(a.Writable, next.Writable) {
		d = append(d, "writable")
	}
	if a.Network != next.Network {
		d = append(d, "network")
	}
	if !slices.Equal(a.Allow, next.Allow) {
		d = append(d, "allow")
	}
	if !slices.Equal(a.Gateway.Upstreams, next.Gateway.Upstreams) || !maps.Equal(a.Gateway.KeyFiles, next.Gateway.KeyFiles) ||
		a.Gateway.Prices != next.Gateway.Prices || a.Gateway.Listen != next.Gateway.Listen {
		d = append(d, "gateway")
	}
	if (a.ControlPlane == nil) != (next.ControlPlane == nil) || a.ControlPlane != nil && *a.ControlPlane != *next.ControlPlane {
		d = append(d, "control_plane") // supervise only: never set under the daemon
	}
	return d
}
