// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hermeskill/hermeskilld/internal/procfs"
)

// staleWait bounds the wait for a stale group to empty after Kill.
const staleWait = 5 * time.Second

// CleanupStale removes the agent cgroups under the base whose owner (the
// process named in their name) is gone: what still runs in them
// is killed (Kill), waited for (bounded), and the cgroup removed. It
// returns the directories removed; failures on some groups are joined in
// the error while the others are still cleaned. Directories whose name is
// not "<id>.<pid>-<start>-<pidns>.<n>" (or an older form) are not ours and are left alone, as is
// base/supervisor.
func (m *Manager) CleanupStale() ([]string, error) {
	entries, err := os.ReadDir(m.base)
	if err != nil {
		return nil, fmt.Errorf("clean up stale cgroups: %w", err)
	}
	var removed []string
	var errs []error
	// Each owner is looked up once: a live daemon's thousand agent
	// groups would otherwise be a thousand reads of its stat in every
	// start of ours.
	alive := make(map[groupOwner]bool)
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		owner, ok := parseGroupName(e.Name())
		if !ok {
			continue
		}
		live, seen := alive[owner]
		if !seen {
			live = m.ownerAlive(owner)
			alive[owner] = live
		}
		if live {
			continue
		}
		dir := filepath.Join(m.base, e.Name())
		if err := m.reap(dir); err != nil {
			errs = append(errs, fmt.Errorf("stale cgroup %s: %w", dir, err))
			continue
		}
		removed = append(removed, dir)
	}
	return removed, errors.Join(errs...)
}

// reap kills, waits for and removes one stale group.
func (m *Manager) reap(dir string) error {
	g, err := m.open(dir)
	if err != nil {
		return err
	}
	defer g.Close()
	if err := g.Kill(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), staleWait)
	defer cancel()
	if err := g.WaitEmpty(ctx); err != nil {
		return err
	}
	return g.Remove()
}

// ownerAlive reports whether the owner of a group is alive. A name with
// the owner's start time identifies it exactly: the pid must exist with
// that start time (whatever the binary is called: a renamed binary, a test
// binary). A name from another PID namespace (a hermeskilld in a
// container sharing the host's cgroup tree, or the host's, seen from the
// container) names a pid we cannot look up: it is never ours to judge, so
// its owner counts as alive. An older name without a start time falls back
// to the name: a live hermeskilld (or one of Options.OwnerComm), from
// proc(5) /proc/PID/comm or the base name of /proc/PID/exe. This process
// always is alive. A zombie is not: it runs nothing and will not clean up.
func (m *Manager) ownerAlive(o groupOwner) bool {
	pid, start := o.pid, o.start
	if o.pidns != 0 && m.pidns != 0 && o.pidns != m.pidns {
		return true
	}
	if pid == m.pid && (start == 0 || start == m.start) {
		return true
	}
	st, err := procfs.FS{Root: m.procRoot}.Stat(pid)
	if err != nil || st.State == 'Z' || st.State == 'X' {
		return false
	}
	if start != 0 {
		return st.StartTimeTicks == start
	}
	dir := filepath.Join(m.procRoot, strconv.Itoa(pid))
	if comm, err := os.ReadFile(filepath.Join(dir, "comm")); err == nil {
		if m.isOwner(strings.TrimSuffix(string(comm), "\n"), true) {
			return true
		}
	}
	if exe, err := os.Readlink(filepath.Join(dir, "exe")); err == nil {
		// An upgraded binary reads "/usr/bin/hermeskilld (deleted)".
		if m.isOwner(filepath.Base(strings.TrimSuffix(exe, " (deleted)")), false) {
			return true
		}
	}
	return false
}

// commLen is TASK_COMM_LEN-1: comm is truncated to 15 bytes (proc(5)).
const commLen = 15

func (m *Manager) isOwner(name string, comm bool) bool {
	for _, o := range m.owners {
		if name == o || (comm && len(name) == commLen && strings.HasPrefix(o, name)) {
			return true
		}
	}
	return false
}

// Owner identifies the hermeskilld process whose agent cgroups carry its
// name: pid, start time and PID namespace (see the package documentation).
type Owner struct {
	PID          int
	Start, PIDNS uint64
}

// Owner is this Manager's process, as its group names carry it.
func (m *Manager) Owner() Owner { return Owner{PID: m.pid, Start: m.start, PIDNS: m.pidns} }

// ReapOwned kills every process of every agent cgroup under base that
// owner created, then waits for each group to empty (bounded) and removes
// it. It is how a keeper empties the groups of a hermeskilld that died:
// unlike CleanupStale it needs no Manager of the dead process and judges
// nothing by /proc (the owner may be a zombie its parent has not reaped).
// Every group is killed before any is waited for, so one slow group does
// not keep the others alive. It returns the directories removed; failures
// are joined in the error while the other groups are still cleaned.
func ReapOwned(base string, owner Owner) ([]string, error) {
	if owner.PID <= 0 || owner.Start == 0 {
		return nil, fmt.Errorf("reap cgroups under %s: owner %+v is not exact", base, owner)
	}
	p, err := locate(Options{Base: base})
	if err != nil {
		return nil, err
	}
	m := &Manager{h: p.h, base: p.base, procRoot: "/proc", removeWait: defaultRemoveWait}
	entries, err := os.ReadDir(m.base)
	if err != nil {
		return nil, fmt.Errorf("reap cgroups: %w", err)
	}
	var groups []*Group
	var errs []error
	for _, e := range entries {
		o, ok := parseGroupName(e.Name())
		if !e.IsDir() || !ok || o.pid != owner.PID || o.start != owner.Start || o.pidns != owner.PIDNS {
			continue
		}
		g, err := m.open(filepath.Join(m.base, e.Name()))
		if err == nil {
			err = g.Kill()
		}
		if err != nil {
			errs = append(errs, err)
			if g != nil {
				g.Close()
			}
			continue
		}
		groups = append(groups, g)
	}
	var removed []string
	for _, g := range groups {
		ctx, cancel := context.WithTimeout(context.Background(), staleWait)
		err := g.WaitEmpty(ctx)
		cancel()
		if err == nil {
			err = g.Remove()
		} else {
			g.Close()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("cgroup %s: %w", g.dir, err))
			continue
		}
		removed = append(removed, g.dir)
	}
	return removed, errors.Join(errs...)
}
