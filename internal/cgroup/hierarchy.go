// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// hierarchy is what /proc says about the cgroup v2 hierarchy.
type hierarchy struct {
	mount mount
	// own is this process's cgroup, as /proc/self/cgroup spells it.
	own string
}

// dirOf returns the directory of a cgroup path, or false when the cgroup
// lies outside the mounted subtree.
func (h hierarchy) dirOf(cg string) (string, bool) {
	root := h.mount.root
	if root == "/" {
		return filepath.Join(h.mount.point, cg), true
	}
	if cg != root && !strings.HasPrefix(cg, root+"/") {
		return "", false
	}
	return filepath.Join(h.mount.point, strings.TrimPrefix(cg, root)), true
}

// cgroupOf returns the cgroup path (as /proc/PID/cgroup spells it) of a
// directory inside the mount.
func (h hierarchy) cgroupOf(dir string) (string, error) {
	rel, err := filepath.Rel(h.mount.point, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%s is not inside the cgroup2 mount %s", dir, h.mount.point)
	}
	return path.Join(h.mount.root, filepath.ToSlash(rel)), nil
}

// readHierarchy reads the cgroup2 mount (rule 1) and our own cgroup
// (rule 2) from procRoot/self; mountPoint, when set, replaces the mount
// point found there.
func readHierarchy(procRoot, mountPoint string) (hierarchy, error) {
	mi := filepath.Join(procRoot, "self", "mountinfo")
	f, err := os.Open(mi)
	if err != nil {
		return hierarchy{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	mounts, err := parseCgroup2Mounts(f)
	_ = f.Close()
	if err != nil {
		return hierarchy{}, fmt.Errorf("%w: %s: %w", ErrUnavailable, mi, err)
	}
	var h hierarchy
	if mountPoint != "" {
		point := filepath.Clean(mountPoint)
		h.mount = mount{root: "/", point: point}
		for _, m := range mounts {
			if m.point == point {
				h.mount = m
				break
			}
		}
	} else {
		m, ok := pickMount(mounts)
		if !ok {
			return hierarchy{}, fmt.Errorf("%w: no cgroup2 mount in %s", ErrUnavailable, mi)
		}
		h.mount = m
	}

	pc := filepath.Join(procRoot, "self", "cgroup")
	data, err := os.ReadFile(pc)
	if err != nil {
		return hierarchy{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if h.own, err = parseProcCgroup(data); err != nil {
		return hierarchy{}, fmt.Errorf("%w: %s: %w", ErrUnavailable, pc, err)
	}
	return h, nil
}
