// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// defaultRemoveWait bounds how long Remove waits for a cgroup to empty
// when rmdir(2) says EBUSY.
const defaultRemoveWait = 2 * time.Second

// Manager creates and cleans up agent cgroups under one base directory.
// Its methods are safe for concurrent use.
type Manager struct {
	h           hierarchy
	base        string
	mode        string
	procRoot    string
	owners      []string
	pid         int
	start       uint64 // our start time: with pid, the owner's identity in group names
	pidns       uint64 // our PID namespace: pids mean something only inside it
	controllers []string
	warnings    []error

	fallbackKill bool
	removeWait   time.Duration

	next atomic.Uint64
}

// Base returns the directory agent cgroups are created in.
func (m *Manager) Base() string { return m.base }

// Mount returns the cgroup2 mount point.
func (m *Manager) Mount() string { return m.h.mount.point }

// Controllers returns the controllers enabled for agent cgroups (the
// base's cgroup.subtree_control); empty on a hybrid host.
func (m *Manager) Controllers() []string { return m.controllers }

// Warnings returns what Detect could not do without it being fatal:
// controllers it failed to enable, processes it failed to move out of a
// delegated base. The caller logs them.
func (m *Manager) Warnings() []error { return m.warnings }

// Describe returns one line for the log, e.g.
// "cgroup v2 at /sys/fs/cgroup/unified, agents under /sys/fs/cgroup/unified/hermeskill (root; controllers: none)".
func (m *Manager) Describe() string {
	ctl := "none"
	if len(m.controllers) > 0 {
		ctl = strings.Join(m.controllers, ",")
	}
	return fmt.Sprintf("cgroup v2 at %s, agents under %s (%s; controllers: %s)", m.h.mount.point, m.base, m.mode, ctl)
}

// maxCreateTries bounds the names tried when one already exists (a stale
// cgroup of an earlier hermeskilld that had our pid).
const maxCreateTries = 16

// Create makes the cgroup of one agent run, named
// "<sanitised-id>.<our pid>-<our start time>-<our PID namespace>.<n>", and opens it for CLONE_INTO_CGROUP.
// The caller spawns the agent with
// SysProcAttr{UseCgroupFD: true, CgroupFD: g.FD()} and calls Remove when
// the run is over.
func (m *Manager) Create(agentID string) (*Group, error) {
	for range maxCreateTries {
		dir := filepath.Join(m.base, groupName(agentID, m.pid, m.start, m.pidns, m.next.Add(1)))
		err := os.Mkdir(dir, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("create cgroup for agent %q: %w", agentID, err)
		}
		g, err := m.open(dir)
		if err != nil {
			_ = unix.Rmdir(dir)
			return nil, fmt.Errorf("create cgroup for agent %q: %w", agentID, err)
		}
		return g, nil
	}
	return nil, fmt.Errorf("create cgroup for agent %q: %d names taken under %s", agentID, maxCreateTries, m.base)
}

// open returns the Group of an existing cgroup directory.
func (m *Manager) open(dir string) (*Group, error) {
	cg, err := m.h.cgroupOf(dir)
	if err != nil {
		return nil, err
	}
	// clone(2) CLONE_INTO_CGROUP wants "a file descriptor referring to
	// a directory in a version 2 cgroup hierarchy"; O_PATH or O_RDONLY.
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	return &Group{m: m, dir: dir, cgroup: cg, f: f}, nil
}
