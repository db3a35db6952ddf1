// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Group is the cgroup of one agent run. Its methods are safe for
// concurrent use; after Remove or Close, FD returns -1.
type Group struct {
	m *Manager
	// dir is the cgroup's directory under the mount.
	dir string
	// cgroup is its path as /proc/PID/cgroup spells it.
	cgroup string

	mu sync.Mutex
	f  *os.File // O_RDONLY|O_DIRECTORY|O_CLOEXEC
}

// Path returns the cgroup's directory.
func (g *Group) Path() string { return g.dir }

// FD returns the descriptor of the cgroup directory, for
// syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: g.FD()}, which makes
// Go start the child with clone3(2) CLONE_INTO_CGROUP (Linux 5.7). It
// stays valid until Remove or Close, and is -1 after.
func (g *Group) FD() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.f == nil {
		return -1
	}
	return int(g.f.Fd())
}

// Close releases the directory descriptor without removing the cgroup.
func (g *Group) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.f == nil {
		return nil
	}
	err := g.f.Close()
	g.f = nil
	return err
}

// Attach moves a running process (all its threads) into the group, for
// kernels where CLONE_INTO_CGROUP is missing. As non-root it needs write
// access to the cgroup.procs of the common ancestor of both cgroups
// (cgroup-v2.rst "Delegation Containment").
func (g *Group) Attach(pid int) error {
	if err := writeFile(filepath.Join(g.dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
		return fmt.Errorf("attach pid %d: %w", pid, err)
	}
	return nil
}

// PIDs returns the processes of the group and of every sub-cgroup, from
// their cgroup.procs, sorted. Zombies are not listed ("a zombie process
// does not appear in cgroup.procs", cgroup-v2.rst). It is a snapshot: the
// tree may fork or exit while it is read.
func (g *Group) PIDs() ([]int, error) {
	var pids []int
	var dirs int
	err := filepath.WalkDir(g.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			// A sub-cgroup removed while we walk had no process left.
			if p != g.dir && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		dirs++
		data, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			if p != g.dir && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipDir
			}
			return err
		}
		pids, err = appendPIDs(pids, data)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list processes of %s: %w", g.dir, err)
	}
	slices.Sort(pids)
	if dirs > 1 {
		// A process migrating between sub-cgroups can be read twice.
		pids = slices.Compact(pids)
	}
	return pids, nil
}

// Contains reports whether pid is in the group or one of its sub-cgroups,
// from the "0::" line of /proc/PID/cgroup (cgroups(7)). A pid that does
// not exist is not contained. A zombie still counts: its line names the
// cgroup it died in.
func (g *Group) Contains(pid int) (bool, error) {
	data, err := os.ReadFile(filepath.Join(g.m.procRoot, strconv.Itoa(pid), "cgroup"))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			return false, nil
		}
		return false, err
	}
	cg, err := parseProcCgroup(data)
	if err != nil {
		return false, fmt.Errorf("pid %d: %w", pid, err)
	}
	return cg == g.cgroup || strings.HasPrefix(cg, g.cgroup+"/"), nil
}

// Populated reports the "populated" key of cgroup.events: "1 if the
// cgroup or its descendants contains any live processes; otherwise, 0"
// (cgroup-v2.rst).
func (g *Group) Populated() (bool, error) {
	ev, err := readEvents(g.dir)
	if err != nil {
		return false, err
	}
	return ev["populated"] != 0, nil
}

// Remove removes the group and any sub-cgroups (rmdir(2), deepest first)
// and closes FD. A cgroup still holding a process fails rmdir with EBUSY;
// that is expected for a moment after the last process was killed, so
// Remove then waits for cgroup.events to say "populated 0", bounded, and
// tries again. Removing an already removed group is not an error.
//
// Errors: ErrBusy when processes are still there after the bound.
func (g *Group) Remove() error {
	err := g.m.removeTree(g.dir)
	if cerr := g.Close(); err == nil {
		err = cerr
	}
	return err
}

func (m *Manager) removeTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := m.removeTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return m.rmdir(dir)
}

// maxRmdirTries bounds the rmdir(2) attempts of one cgroup.
const maxRmdirTries = 5

// rmdir removes one empty cgroup. On EBUSY it waits (inotify on
// cgroup.events, m.removeWait in total) for "populated 0" and tries again.
func (m *Manager) rmdir(dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), m.removeWait)
	defer cancel()
	for try := 1; ; try++ {
		err := unix.Rmdir(dir)
		switch {
		case err == nil, errors.Is(err, unix.ENOENT):
			return nil
		case !errors.Is(err, unix.EBUSY):
			return &fs.PathError{Op: "rmdir", Path: dir, Err: err}
		case try == maxRmdirTries:
			return fmt.Errorf("%w: %w", ErrBusy, &fs.PathError{Op: "rmdir", Path: dir, Err: err})
		}
		werr := waitEvents(ctx, dir, nil, emptyEvents)
		if werr != nil && !errors.Is(werr, fs.ErrNotExist) {
			return fmt.Errorf("%w: %w (%w)", ErrBusy, &fs.PathError{Op: "rmdir", Path: dir, Err: err}, werr)
		}
	}
}
