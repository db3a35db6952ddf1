// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"bytes"
	"unicode/utf8"
)

// ellipsis marks a cut command line.
const ellipsis = "…"

// cmdlineSlack is how far past maxLen Cmdline reads, to tell a command line
// that is cut from one that only has trailing NULs there.
const cmdlineSlack = 64

// Cmdline returns the command line of the process, its arguments joined by
// single spaces. When maxLen > 0 the result is at most maxLen bytes: a
// longer one is cut on a UTF-8 boundary and ends in "…". A process with an
// empty command line, a zombie or a kernel thread, is shown as "[comm]", as
// ps(1) does. The bytes are as the process left them: arguments may hold
// spaces, newlines or invalid UTF-8 (a process can overwrite its argv).
//
// The error wraps ErrNoProcess when the process does not exist.
func (fs FS) Cmdline(pid, maxLen int) (string, error) {
	return fs.cmdline(pid, maxLen, "")
}

// cmdline is Cmdline with the comm already known (comm != "") or to be read.
func (fs FS) cmdline(pid, maxLen int, comm string) (string, error) {
	buf := getBuf()
	defer putBuf(buf)

	path := fs.path(pid, "cmdline")
	limit := 0
	if maxLen > 0 {
		limit = maxLen + cmdlineSlack
	}
	raw, err := readFile(path, buf, limit)
	if err == nil && limit > 0 && len(raw) == limit && allNUL(raw[maxLen:]) {
		// Past maxLen there are only NULs so far: read it all to learn
		// whether they are trailing (it fits) or separate empty arguments.
		raw, err = readFile(path, buf, 0)
	}
	if err != nil {
		return "", wrapErr("cmdline", pid, err)
	}
	if s := JoinCmdline(raw, maxLen); s != "" {
		return s, nil
	}
	if comm == "" {
		st, err := fs.stat(pid, true)
		if err != nil {
			return "", err
		}
		comm = st.Comm
	}
	return truncate("["+comm+"]", maxLen), nil
}

// JoinCmdline turns the contents of /proc/PID/cmdline, arguments each ended
// by a NUL, into the arguments joined by spaces, cut to maxLen bytes as
// Cmdline does. Empty input gives "".
func JoinCmdline(raw []byte, maxLen int) string {
	raw = bytes.TrimRight(raw, "\x00")
	cut := len(raw)
	suffix := ""
	if maxLen > 0 && len(raw) > maxLen {
		cut, suffix = cutPoint(raw, maxLen)
	}
	out := make([]byte, cut, cut+len(suffix))
	for i, c := range raw[:cut] {
		if c == 0 {
			c = ' '
		}
		out[i] = c
	}
	return string(append(out, suffix...))
}

// truncate cuts s to maxLen bytes as Cmdline does.
func truncate(s string, maxLen int) string {
	if maxLen <= 0 || len(s) <= maxLen {
		return s
	}
	cut, suffix := cutPoint([]byte(s), maxLen)
	return s[:cut] + suffix
}

// cutPoint returns where to cut b, longer than maxLen, so that b[:cut] plus
// the suffix fits in maxLen bytes without splitting a UTF-8 sequence.
func cutPoint(b []byte, maxLen int) (cut int, suffix string) {
	cut, suffix = maxLen-len(ellipsis), ellipsis
	if cut < 0 {
		cut, suffix = maxLen, "" // no room for the ellipsis
	}
	// If a rune that starts at most UTFMax-1 bytes back would end past the
	// cut, cut before it. Invalid bytes decode as runes of size 1, so they
	// are cut anywhere.
	for s := cut; s >= 0 && s > cut-utf8.UTFMax; s-- {
		if utf8.RuneStart(b[s]) {
			if _, size := utf8.DecodeRune(b[s:]); s+size > cut {
				cut = s
			}
			break
		}
	}
	return cut, suffix
}

func allNUL(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
