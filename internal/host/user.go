// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
)

// RunAs applies the `user:` of a foreground agent (supervise --config
// FILE) as the daemon does for its agents: run as root, the agent runs as
// that user (its uid, group and supplementary groups); run as anyone else,
// a user other than the caller is refused, since only root can change
// users. Before anything starts, the agent is checked against this host
// (the user exists, it can enter cwd, it may execute the command: see
// config.Agent.CheckHost). sockDir is heartbeat.SupervisorDir's, private
// to us: an agent of another user gets one it can reach instead
// (heartbeat.UserSupervisorDir). Without `user:`, or with our own, the
// credential is nil and sockDir is returned as is.
func RunAs(a *config.Agent, sockDir string) (*syscall.Credential, string, error) {
	if a.User == "" {
		return nil, sockDir, nil
	}
	// The file's keys at their lines; the command is the words after --,
	// not the file's, so it is checked without the file's lines.
	file := a.Clone()
	file.Command = nil
	if err := errors.Join(file.CheckHost(nil), file.CheckRunAs(nil)); err != nil {
		return nil, "", err
	}
	argv := a.Clone()
	argv.Source = ""
	if err := argv.CheckHost(nil); err != nil {
		return nil, "", fmt.Errorf("%s: %w", a.Source, err)
	}
	cred, err := config.UserCredential(a.User)
	if err != nil {
		return nil, "", err
	}
	if int(cred.Uid) == os.Geteuid() {
		return nil, sockDir, nil
	}
	dir, base, err := heartbeat.UserSupervisorDir(sockDir)
	if err == nil {
		// The agent could not send a heartbeat otherwise (an
		// $XDG_RUNTIME_DIR of mode 0700 is not searchable by it).
		if err = config.CheckEnter(cred, base); err != nil {
			err = fmt.Errorf("uid %d cannot reach %s: %w (set XDG_RUNTIME_DIR to a directory it can reach, or unset it)", cred.Uid, base, err)
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("the agent's socket directory (user: %s): %w", a.User, err)
	}
	return cred, dir, nil
}
