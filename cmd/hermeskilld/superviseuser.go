// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
	"github.com/hermeskill/hermeskilld/internal/sockpath"
)

// superviseUser applies the `user:` of `supervise --config FILE` as the
// daemon does: run as root, supervise runs the agent as that user (its
// uid, group and supplementary groups); run as anyone else, a user other
// than the caller is refused, since only root can change users. Before
// anything starts, the file is checked against this host (the user
// exists, it can enter cwd, it may execute the command after --: see
// config.Agent.CheckHost). sockDir is heartbeat.SupervisorDir's, private
// to us: an agent of another user gets one it can reach instead
// (userSocketDir). Without `user:`, or with our own, nothing changes.
func superviseUser(a *config.Agent, sockDir string) (*syscall.Credential, string, error) {
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
	dir, err := userSocketDir(sockDir, cred)
	if err != nil {
		return nil, "", fmt.Errorf("the agent's socket directory (user: %s): %w", a.User, err)
	}
	return cred, dir, nil
}

// userSocketDirName is the directory, beside supervise's own private one
// in the runtime directory, of the socket directories of agents that run
// as another user: root's, mode 0711, so that each agent reaches its own
// directory (0700, its user's) by name and lists none.
const userSocketDirName = "supervise-as-user"

// userSocketDir is the socket directory of a run whose agent is another
// user: the same name as sockDir (ID.PID), in userSocketDirName beside
// sockDir's parent. Every directory above it must be searchable by cred
// (an $XDG_RUNTIME_DIR of mode 0700 is not): the agent could not send a
// heartbeat otherwise.
func userSocketDir(sockDir string, cred *syscall.Credential) (string, error) {
	runtime := filepath.Dir(filepath.Dir(sockDir))
	base := filepath.Join(runtime, userSocketDirName)
	if err := os.Mkdir(base, 0o711); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	fi, err := os.Lstat(base)
	if err != nil {
		return "", err
	}
	st := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return "", fmt.Errorf("%s is not a directory: %w", base, heartbeat.ErrUnsafeDir)
	case int(st.Uid) != os.Geteuid():
		return "", fmt.Errorf("%s is owned by uid %d: %w", base, st.Uid, heartbeat.ErrUnsafeDir)
	}
	if err := os.Chmod(base, 0o711); err != nil {
		return "", err
	}
	heartbeat.RemoveStaleRunDirs(base) // left by SIGKILLed runs
	if err := config.CheckEnter(cred, base); err != nil {
		return "", fmt.Errorf("uid %d cannot reach %s: %w (set XDG_RUNTIME_DIR to a directory it can reach, or unset it)", cred.Uid, base, err)
	}
	dir := filepath.Join(base, filepath.Base(sockDir))
	if err := sockpath.Check(filepath.Join(dir, heartbeat.SocketName)); err != nil {
		return "", err
	}
	return dir, nil
}
