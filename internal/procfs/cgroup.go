// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import "bytes"

// ParseCgroup2 returns the cgroup v2 path in the contents of
// /proc/PID/cgroup: the line "0::PATH" (cgroups(7)). It returns false when
// there is no such line, on a system with only cgroup v1 hierarchies.
//
// The path is relative to the cgroup namespace of the reader and is
// returned as the kernel wrote it; for a zombie whose cgroup was removed
// that is "PATH (deleted)".
func ParseCgroup2(data []byte) (string, bool) {
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		if path, ok := bytes.CutPrefix(line, []byte("0::")); ok {
			return string(path), true
		}
	}
	return "", false
}

// Cgroup2 returns the cgroup v2 path of the process (see ParseCgroup2), or
// "" and no error when it is in no v2 hierarchy. The error wraps
// ErrNoProcess when the process does not exist.
func (fs FS) Cgroup2(pid int) (string, error) {
	buf := getBuf()
	defer putBuf(buf)
	data, err := readFile(fs.path(pid, "cgroup"), buf, 0)
	if err != nil {
		return "", wrapErr("cgroup", pid, err)
	}
	path, _ := ParseCgroup2(data)
	return path, nil
}
