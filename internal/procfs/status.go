// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"bytes"
	"fmt"
)

// Status is the part of /proc/PID/status that hermeskilld uses.
type Status struct {
	UID, EUID int // real and effective user ID (line "Uid:")
	GID, EGID int // real and effective group ID (line "Gid:")

	// VmRSS and VmHWM are the resident set size and its peak, in bytes.
	// Both are 0 for kernel threads and zombies, which have no memory map
	// and so no Vm lines.
	VmRSS int64
	VmHWM int64

	Threads int // line "Threads:"
}

// ParseStatus parses the contents of /proc/PID/status. Uid, Gid and Threads
// are required; the Vm lines are optional (kernel threads and zombies have
// none). The error wraps ErrMalformed when a required line is missing or a
// value does not parse.
func ParseStatus(data []byte) (Status, error) {
	var (
		s                             Status
		haveUID, haveGID, haveThreads bool
	)
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		colon := bytes.IndexByte(line, ':')
		if colon < 0 {
			continue
		}
		key, val := line[:colon], line[colon+1:]
		var ok bool
		switch string(key) { // no allocation: the compiler converts in place
		case "Uid":
			s.UID, s.EUID, ok = parseIDs(val)
			haveUID = true
		case "Gid":
			s.GID, s.EGID, ok = parseIDs(val)
			haveGID = true
		case "Threads":
			f := fieldScanner{b: val}
			tok, _ := f.next()
			s.Threads, ok = parseIntField(tok)
			haveThreads = true
		case "VmRSS":
			s.VmRSS, ok = parseKB(val)
		case "VmHWM":
			s.VmHWM, ok = parseKB(val)
		default:
			continue
		}
		if !ok {
			return Status{}, malformed("status", fmt.Sprintf("%s: %q", key, bytes.TrimSpace(val)))
		}
	}
	switch {
	case !haveUID:
		return Status{}, malformed("status", "no Uid line")
	case !haveGID:
		return Status{}, malformed("status", "no Gid line")
	case !haveThreads:
		return Status{}, malformed("status", "no Threads line")
	}
	return s, nil
}

// parseIDs parses "real effective saved filesystem" and returns the first two.
func parseIDs(val []byte) (id, effective int, ok bool) {
	f := fieldScanner{b: val}
	tok, _ := f.next()
	if id, ok = parseIntField(tok); !ok {
		return 0, 0, false
	}
	tok, _ = f.next()
	if effective, ok = parseIntField(tok); !ok {
		return 0, 0, false
	}
	return id, effective, true
}

// parseKB parses "  1756 kB" into bytes.
func parseKB(val []byte) (int64, bool) {
	f := fieldScanner{b: val}
	num, _ := f.next()
	unit, _ := f.next()
	n, ok := parseInt(num)
	if !ok || string(unit) != "kB" || n < 0 || n > (1<<63-1)/1024 {
		return 0, false
	}
	return n * 1024, true
}

// Status reads /proc/PID/status. The error wraps ErrNoProcess when the
// process does not exist.
func (fs FS) Status(pid int) (Status, error) {
	buf := getBuf()
	defer putBuf(buf)
	data, err := readFile(fs.path(pid, "status"), buf, 0)
	if err != nil {
		return Status{}, wrapErr("status", pid, err)
	}
	s, err := ParseStatus(data)
	if err != nil {
		return Status{}, fmt.Errorf("status %d: %w", pid, err)
	}
	return s, nil
}
