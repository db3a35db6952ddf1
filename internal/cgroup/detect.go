// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/procfs"
)

// Options adjusts Detect. The zero value detects everything.
type Options struct {
	// Mount overrides the cgroup2 mount point found in mountinfo.
	Mount string
	// Base overrides the parent directory of agent cgroups; it must lie
	// inside the mount and is created (one level) when missing.
	Base string
	// ProcRoot is where proc(5) is mounted; "/proc" when empty. Tests
	// point it at fixtures.
	ProcRoot string
	// OwnerComm lists process names, besides "hermeskilld", that
	// CleanupStale accepts as a live owner (tests pass the test binary's
	// name).
	OwnerComm []string

	// fallbackKill makes Kill take the path of kernels without
	// cgroup.kill (tests only).
	fallbackKill bool
}

const (
	// baseName is the directory created under the mount root (rule 4).
	baseName = "hermeskill"
	// supervisorLeaf is the leaf hermeskilld moves itself into in a
	// delegated cgroup (rule 3).
	supervisorLeaf = "supervisor"
	// ownerName is the comm of a live hermeskilld.
	ownerName = "hermeskilld"
)

// How the base was chosen, for Describe.
const (
	modeDelegated = "delegated"
	modeRoot      = "root"
	modeOption    = "configured"
)

// plan is the outcome of the detection rules, before anything is
// created or moved.
type plan struct {
	h    hierarchy
	base string
	mode string
}

// locate applies the detection rules without side effects.
func locate(opts Options) (plan, error) {
	h, err := readHierarchy(cmp.Or(opts.ProcRoot, "/proc"), opts.Mount)
	if err != nil {
		return plan{}, err
	}
	if opts.Base != "" {
		base, err := filepath.Abs(opts.Base)
		if err != nil {
			return plan{}, fmt.Errorf("%w: base: %w", ErrUnavailable, err)
		}
		if _, err := h.cgroupOf(base); err != nil {
			return plan{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return plan{h: h, base: base, mode: modeOption}, nil
	}

	euid := os.Geteuid()
	var why string
	if own, ok := h.dirOf(h.own); !ok {
		why = fmt.Sprintf("own cgroup %s is outside the mounted subtree %s", h.own, h.mount.root)
	} else if h.own == "/" {
		why = "own cgroup is the root cgroup"
	} else {
		cand := own
		// A second Detect in the same process finds itself already in
		// the supervisor leaf of its delegated cgroup.
		if filepath.Base(own) == supervisorLeaf && delegated(filepath.Dir(own), euid) {
			cand = filepath.Dir(own)
		}
		if delegated(cand, euid) {
			return plan{h: h, base: cand, mode: modeDelegated}, nil
		}
		why = fmt.Sprintf("own cgroup %s is not delegated (no trusted.delegate or user.delegate xattr)", own)
	}
	if euid == 0 {
		if err := writable(h.mount.point); err != nil {
			return plan{}, fmt.Errorf("%w: %s; mount root: %w", ErrUnavailable, why, err)
		}
		return plan{h: h, base: filepath.Join(h.mount.point, baseName), mode: modeRoot}, nil
	}
	return plan{}, fmt.Errorf("%w: %s and not writable by uid %d", ErrUnavailable, why, euid)
}

// delegated reports whether dir was delegated to this process (rule 3).
func delegated(dir string, euid int) bool {
	var buf [8]byte
	for _, name := range []string{"trusted.delegate", "user.delegate"} {
		// getxattr(2); reading trusted.* needs CAP_SYS_ADMIN, so an
		// unprivileged reader relies on user.* or on the access check.
		n, err := unix.Getxattr(dir, name, buf[:])
		if err == nil && string(buf[:n]) == "1" {
			return true
		}
	}
	return euid != 0 && writable(dir) == nil && writable(filepath.Join(dir, "cgroup.procs")) == nil
}

// writable checks write access with the effective ids, as mkdir(2) and
// open(2) will (faccessat(2) AT_EACCESS); it also reports EROFS for a
// read-only mount, as containers often have.
func writable(p string) error {
	if err := unix.Faccessat(unix.AT_FDCWD, p, unix.W_OK, unix.AT_EACCESS); err != nil {
		return &fs.PathError{Op: "faccessat", Path: p, Err: err}
	}
	return nil
}

// Detect finds the cgroup v2 hierarchy and the base for agent cgroups by
// the rules of the package documentation, and prepares the base: created
// (rule 4, Options.Base), or this process moved into base/supervisor
// (rule 3). Controllers are enabled best effort; see Warnings.
//
// Errors: ErrUnavailable, wrapped with the reason. When it comes from the
// rules themselves (no cgroup2 mount, nothing delegated or writable),
// nothing was changed.
func Detect(opts Options) (*Manager, error) {
	p, err := locate(opts)
	if err != nil {
		return nil, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p.h.mount.point, &st); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, &fs.PathError{Op: "statfs", Path: p.h.mount.point, Err: err})
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return nil, fmt.Errorf("%w: %s is not a cgroup2 mount", ErrUnavailable, p.h.mount.point)
	}

	m := &Manager{
		h:            p.h,
		base:         p.base,
		mode:         p.mode,
		procRoot:     cmp.Or(opts.ProcRoot, "/proc"),
		owners:       append([]string{ownerName}, opts.OwnerComm...),
		pid:          os.Getpid(),
		start:        selfStart(cmp.Or(opts.ProcRoot, "/proc")),
		pidns:        selfPIDNS(cmp.Or(opts.ProcRoot, "/proc")),
		fallbackKill: opts.fallbackKill,
		removeWait:   defaultRemoveWait,
	}
	switch p.mode {
	case modeRoot, modeOption:
		if err := os.Mkdir(p.base, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	case modeDelegated:
		if err := m.leaveBase(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	if err := writable(p.base); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	m.enableControllers()
	return m, nil
}

// leaveBase moves every process of the delegated base, this one first,
// into base/supervisor: the base must be an inner node for the "no
// internal process" rule (cgroup-v2.rst) before controllers can be
// enabled for agent cgroups. Writing a pid to cgroup.procs migrates the
// whole process, all threads (cgroup-v2.rst "Processes"); "only one
// process can be migrated on a single write(2) call".
func (m *Manager) leaveBase() error {
	leaf := filepath.Join(m.base, supervisorLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	procs := filepath.Join(leaf, "cgroup.procs")
	if err := writeFile(procs, strconv.Itoa(m.pid)); err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(m.base, "cgroup.procs"))
	if err != nil {
		m.warnings = append(m.warnings, err)
		return nil
	}
	others, err := appendPIDs(nil, data)
	if err != nil {
		m.warnings = append(m.warnings, err)
		return nil
	}
	for _, pid := range others {
		if err := writeFile(procs, strconv.Itoa(pid)); err != nil && !errors.Is(err, unix.ESRCH) {
			m.warnings = append(m.warnings, fmt.Errorf("move pid %d into %s: %w", pid, leaf, err))
		}
	}
	return nil
}

// enableControllers turns on, in the base's cgroup.subtree_control, the
// wanted controllers its cgroup.controllers offers ("Enabling and
// Disabling", cgroup-v2.rst). A hybrid host offers none.
func (m *Manager) enableControllers() {
	data, err := os.ReadFile(filepath.Join(m.base, "cgroup.controllers"))
	if err != nil {
		m.warnings = append(m.warnings, err)
		return
	}
	avail := strings.Fields(string(data))
	ctl := filepath.Join(m.base, "cgroup.subtree_control")
	// memory and pids feed Stats; cpu allows limits later.
	for _, c := range []string{"cpu", "memory", "pids"} {
		if !slices.Contains(avail, c) {
			continue
		}
		// One write per controller, so one refusal (EBUSY from a
		// populated base, EACCES) does not cost the others.
		if err := writeFile(ctl, "+"+c); err != nil {
			m.warnings = append(m.warnings, fmt.Errorf("enable controller %s: %w", c, err))
		}
	}
	if data, err := os.ReadFile(ctl); err == nil {
		m.controllers = strings.Fields(string(data))
	}
}

// selfStart is our own start time (0 when unreadable: our groups then
// fall back to the name check of ownerAlive).
func selfStart(procRoot string) uint64 {
	st, err := procfs.FS{Root: procRoot}.Stat(os.Getpid())
	if err != nil {
		return 0
	}
	return st.StartTimeTicks
}

// selfPIDNS is the inode of our PID namespace (/proc/self/ns/pid reads
// "pid:[4026531836]"; namespaces(7)), 0 when unreadable.
func selfPIDNS(procRoot string) uint64 {
	link, err := os.Readlink(filepath.Join(procRoot, strconv.Itoa(os.Getpid()), "ns", "pid"))
	if err != nil {
		return 0
	}
	link = strings.TrimSuffix(strings.TrimPrefix(link, "pid:["), "]")
	ino, err := strconv.ParseUint(link, 10, 64)
	if err != nil {
		return 0
	}
	return ino
}
