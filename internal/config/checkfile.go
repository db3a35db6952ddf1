// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// CheckFile is `check-config` of one file: it loads the file as a daemon
// file, or as an agent file when the daemon schema refuses one of the
// top-level keys of an agent file (id, command, checks, escalation,
// labels), or always with forceAgent; it validates it and checks it
// against this host (Daemon.CheckHost, Agent.CheckHost). kind is "daemon"
// or "agent"; note, empty or starting with a space, says what the daemon
// will do of a valid file: create a missing default agents_dir, refuse
// an agent file with sections only `supervise --config` takes.
func CheckFile(path string, forceAgent bool) (kind, note string, err error) {
	if !forceAgent {
		cfg, err := LoadDaemon(path)
		if err == nil {
			return checkDaemonFile(cfg)
		}
		if !looksLikeAgentError(err) {
			return "", "", err
		}
	}
	a, err := LoadAgent(path, nil)
	if err != nil {
		return "", "", err
	}
	a.Normalize()
	if err := a.Validate(true); err != nil {
		return "", "", err
	}
	if err := a.CheckHost(nil); err != nil {
		return "", "", err
	}
	var only []string
	if a.Gateway.On() {
		only = append(only, "gateway")
	}
	if a.ControlPlane != nil {
		only = append(only, "control_plane")
	}
	if len(only) > 0 {
		// Valid for supervise --config; the daemon would refuse the file.
		it, section := "it", "section serves"
		if len(only) > 1 {
			it, section = "either", "sections serve"
		}
		note = fmt.Sprintf(" for supervise --config (%s: the daemon refuses an agent file that sets %s; its own file's %s every agent)",
			strings.Join(only, " and "), it, section)
	}
	return "agent", note, nil
}

// checkDaemonFile checks a valid daemon file as the daemon does when it
// starts on this host (Daemon.CheckHost); a default agents_dir that does
// not exist is created by the daemon (the note says so).
func checkDaemonFile(cfg *Daemon) (kind, note string, err error) {
	if err := cfg.CheckHost(); err != nil {
		return "", "", err
	}
	if cfg.CreatesAgentsDir() {
		note = fmt.Sprintf(" (agents_dir %s does not exist: the daemon will create it)", cfg.AgentsDir)
	}
	return "daemon", note, nil
}

// looksLikeAgentError: the daemon schema rejected a top-level agent key,
// so the file is probably an agent file.
func looksLikeAgentError(err error) bool {
	var ce *Error
	return errors.As(err, &ce) && ce.Kind == ErrUnknownKey &&
		slices.Contains([]string{"id", "command", "checks", "escalation", "labels"}, ce.Key)
}
