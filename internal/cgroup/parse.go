// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// This file holds the pure parsers of the /proc and cgroupfs formats the
// package reads; everything that touches the filesystem lives elsewhere,
// so the formats are tested against fixtures in testdata/.

// mount is a cgroup2 entry of /proc/PID/mountinfo.
type mount struct {
	// root is the cgroup mounted there, as /proc/PID/cgroup paths spell
	// it (field 4, "the pathname of the directory in the filesystem which
	// forms the root of this mount", proc(5)). "/" unless a subtree was
	// bind-mounted.
	root string
	// point is the mount point (field 5).
	point string
}

// parseCgroup2Mounts returns the cgroup2 mounts listed in a mountinfo file.
//
// proc(5) gives the line format
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// with a variable number of optional fields ended by a single "-", after
// which comes the filesystem type. Paths have space, tab, newline and
// backslash escaped as octal (\040 ...), as the kernel's seq_path does.
func parseCgroup2Mounts(r io.Reader) ([]mount, error) {
	var mounts []mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(fields) {
			return nil, fmt.Errorf("mountinfo: malformed line %q", sc.Text())
		}
		if fields[sep+1] != "cgroup2" {
			continue
		}
		mounts = append(mounts, mount{
			root:  unescapeOctal(fields[3]),
			point: unescapeOctal(fields[4]),
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	return mounts, nil
}

// pickMount prefers a mount of the whole hierarchy (root "/"), the one
// whose paths match /proc/PID/cgroup without translation.
func pickMount(mounts []mount) (mount, bool) {
	for _, m := range mounts {
		if m.root == "/" {
			return m, true
		}
	}
	if len(mounts) > 0 {
		return mounts[0], true
	}
	return mount{}, false
}

// unescapeOctal undoes the kernel's \NNN escaping of mountinfo paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseProcCgroup returns the cgroup v2 path of a /proc/PID/cgroup file.
//
// cgroups(7): each line is "hierarchy-ID:controller-list:cgroup-path"; for
// the cgroup v2 hierarchy the first two fields are "0" and empty. The path
// is relative to the reader's cgroup namespace root, and ends in
// " (deleted)" once the cgroup was removed (cgroup-v2.rst: a zombie stays
// associated with a removed cgroup).
func parseProcCgroup(data []byte) (string, error) {
	for line := range bytes.Lines(data) {
		rest, ok := bytes.CutPrefix(bytes.TrimRight(line, "\n"), []byte("0::"))
		if !ok {
			continue
		}
		path := strings.TrimSuffix(string(rest), " (deleted)")
		if !strings.HasPrefix(path, "/") {
			return "", fmt.Errorf("cgroup path %q is not absolute", path)
		}
		return path, nil
	}
	return "", errNoUnifiedLine
}

// parseFlatKeyed parses a cgroup "flat keyed" file (cgroup-v2.rst
// "Interface Files": "KEY0 VAL0\nKEY1 VAL1\n"), such as cgroup.events or
// memory.events.
func parseFlatKeyed(data []byte) (map[string]uint64, error) {
	kv := make(map[string]uint64, 8)
	if err := eachFlatKeyed(data, func(k []byte, v uint64) { kv[string(k)] = v }); err != nil {
		return nil, err
	}
	return kv, nil
}

// eachFlatKeyed calls fn for every key and value of a flat keyed file, in
// order, without allocating; it stops at the first malformed line.
func eachFlatKeyed(data []byte, fn func(key []byte, val uint64)) error {
	for line := range bytes.Lines(data) {
		k, v, ok := bytes.Cut(bytes.TrimSpace(line), []byte(" "))
		if !ok {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			return fmt.Errorf("flat keyed line %q has no value", line)
		}
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			return fmt.Errorf("flat keyed %q: %w", k, err)
		}
		fn(k, n)
	}
	return nil
}

// parseCPUStat returns user_usec and system_usec of a cpu.stat file
// (cgroup-v2.rst "cpu.stat": flat keyed, usage_usec, user_usec,
// system_usec, and more with the cpu controller); ok is false when one is
// missing or the file is malformed.
func parseCPUStat(data []byte) (userUsec, sysUsec uint64, ok bool) {
	var haveUser, haveSys bool
	err := eachFlatKeyed(data, func(k []byte, v uint64) {
		switch string(k) {
		case "user_usec":
			userUsec, haveUser = v, true
		case "system_usec":
			sysUsec, haveSys = v, true
		}
	})
	return userUsec, sysUsec, err == nil && haveUser && haveSys
}

// parseSingleValue parses a "single value" file such as memory.current.
func parseSingleValue(data []byte) (uint64, error) {
	return strconv.ParseUint(string(bytes.TrimSpace(data)), 10, 64)
}

// appendPIDs appends the pids of a cgroup.procs file ("newline separated",
// cgroup-v2.rst) to dst.
func appendPIDs(dst []int, data []byte) ([]int, error) {
	for len(data) > 0 {
		line, rest, _ := bytes.Cut(data, []byte("\n"))
		data = rest
		if len(line) == 0 {
			continue
		}
		pid, err := strconv.Atoi(string(line))
		if err != nil || pid <= 0 {
			return dst, fmt.Errorf("cgroup.procs: bad pid %q", line)
		}
		dst = append(dst, pid)
	}
	return dst, nil
}

// maxIDLen bounds the agent id part of a cgroup name; the whole name must
// stay under NAME_MAX (255).
const maxIDLen = 64

// sanitizeID turns an agent id into a cgroup directory name component:
// letters, digits, '-' and '_' are kept, anything else (the '.' that
// separates the name's fields, '/', control characters) becomes '_'.
// CGROUP_DELEGATION.md warns that cgroup names share the directory with
// the kernel's interface files; a name with our ".pid.n" suffix can never
// be one of them.
func sanitizeID(id string) string {
	var b strings.Builder
	for _, r := range id {
		if b.Len() >= maxIDLen {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "agent"
	}
	return b.String()
}

// groupName is the directory name of an agent cgroup.
func groupName(id string, owner int, start, pidns uint64, n uint64) string {
	who := strconv.Itoa(owner) + "-" + strconv.FormatUint(start, 10)
	if pidns != 0 {
		who += "-" + strconv.FormatUint(pidns, 10)
	}
	return sanitizeID(id) + "." + who + "." + strconv.FormatUint(n, 10)
}

// groupOwner is who made a group: its pid, start time and PID namespace
// (the inode of /proc/PID/ns/pid), 0 when the name does not say.
type groupOwner struct {
	pid          int
	start, pidns uint64
}

// parseGroupName returns the owner of a name made by groupName, or false
// when the name is not one of ours. Older names carry less:
// "<id>.<pid>.<n>" no start time, "<id>.<pid>-<start>.<n>" no namespace.
func parseGroupName(name string) (groupOwner, bool) {
	var o groupOwner
	rest, n, ok := cutLast(name, '.')
	if !ok || !allDigits(n) {
		return o, false
	}
	id, who, ok := cutLast(rest, '.')
	if !ok || id == "" || sanitizeID(id) != id {
		return o, false
	}
	fields := strings.Split(who, "-")
	if len(fields) > 3 {
		return o, false
	}
	for _, f := range fields {
		if !allDigits(f) {
			return o, false
		}
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil || pid <= 0 {
		return o, false
	}
	o.pid = pid
	if len(fields) > 1 {
		if o.start, err = strconv.ParseUint(fields[1], 10, 64); err != nil {
			return o, false
		}
	}
	if len(fields) > 2 {
		if o.pidns, err = strconv.ParseUint(fields[2], 10, 64); err != nil {
			return o, false
		}
	}
	return o, true
}

func cutLast(s string, sep byte) (before, after string, ok bool) {
	i := strings.LastIndexByte(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
