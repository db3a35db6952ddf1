// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// idClock is the last timestamp NewID used, in units of 1/4096 ms, so that
// IDs from one process are strictly increasing even within a millisecond.
var idClock struct {
	sync.Mutex
	last int64
}

// NewID returns a new certificate id: a UUIDv7 (RFC 9562) in its text form,
// e.g. "0193d5d8-7c4b-7a3e-9f21-0c5b1e2d3f40". The first 48 bits are the Unix
// time in ms, the next 12 (after the version) a sub-millisecond fraction
// (RFC 9562 §6.2, method 3), bumped by one when the clock did not advance,
// and 62 bits come from crypto/rand. IDs from one process sort, as strings,
// in the order they were made; IDs from different processes are unique and
// sort by time to the millisecond.
func NewID() string { return newID(time.Now()) }

func newID(now time.Time) string {
	ns := max(now.UnixNano(), 0)
	t := (ns/1e6)<<12 | (ns%1e6)*4096/1e6
	idClock.Lock()
	if t <= idClock.last {
		t = idClock.last + 1
	}
	idClock.last = t
	idClock.Unlock()

	var u [16]byte
	rand.Read(u[8:]) // crypto/rand never fails
	ms, frac := t>>12, t&0xfff
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	u[6] = 0x70 | byte(frac>>8) // version 7
	u[7] = byte(frac)
	u[8] = 0x80 | u[8]&0x3f // variant 10
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}

// DefaultDir is where certificates go when no directory is configured:
// /var/lib/hermeskill/certs for root; otherwise $XDG_STATE_HOME/hermeskill/certs,
// or ~/.local/state/hermeskill/certs when XDG_STATE_HOME is unset or not an
// absolute path (as the XDG Base Directory specification says). Without a
// home directory it falls back to hermeskill-certs-UID under os.TempDir().
func DefaultDir() string { return defaultDir(os.Geteuid(), os.Getenv, os.UserHomeDir) }

func defaultDir(euid int, getenv func(string) string, home func() (string, error)) string {
	if euid == 0 {
		return "/var/lib/hermeskill/certs"
	}
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "hermeskill", "certs")
	}
	if h, err := home(); err == nil && h != "" {
		return filepath.Join(h, ".local", "state", "hermeskill", "certs")
	}
	return filepath.Join(os.TempDir(), "hermeskill-certs-"+strconv.Itoa(euid))
}

// fileTimeLayout is the time part of FileName: UTC, fixed width, so names
// sort as times.
const fileTimeLayout = "20060102T150405.000Z"

// FileName is the certificate's file name:
// "20261202T101503.123Z_<agent_id>_<cert_id>.json", the time being when the
// death was triggered (terminated_at, then started_at, when that is zero),
// so that names sort by time. Agent and cert ids are sanitised: bytes other
// than [A-Za-z0-9._-] become "_", and each is cut to 64 bytes.
func FileName(c *Certificate) string {
	return sortTime(c).UTC().Format(fileTimeLayout) + "_" +
		sanitize(c.AgentID, "unknown") + "_" + sanitize(c.CertID, "noid") + ".json"
}

// sortTime is the time a certificate is filed and listed under.
func sortTime(c *Certificate) time.Time {
	for _, t := range []time.Time{c.TriggeredAt, c.TerminatedAt, c.StartedAt} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

func sanitize(s, empty string) string {
	const maxLen = 64
	if s == "" {
		return empty
	}
	if len(s) > maxLen {
		s = s[:maxLen]
	}
	return strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s)
}
