// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package denials

import (
	"strconv"
	"strings"
)

// The audit record types read here (linux/audit.h).
const (
	typeSyscall        = 1300 // AUDIT_SYSCALL: the system call, with the pid that made it
	typeEOE            = 1320 // AUDIT_EOE: the end of a multi-record event
	typeLandlockAccess = 1423 // AUDIT_LANDLOCK_ACCESS: one denied access
	typeLandlockDomain = 1424 // AUDIT_LANDLOCK_DOMAIN: a domain's status
)

// record is one audit record, parsed as far as counting needs.
type record struct {
	typ    uint16
	serial uint64 // the event it belongs to: audit(SECONDS.MILLIS:SERIAL)
	fields map[string]string
}

// parseRecord parses an audit record's text:
//
//	audit(1796655287.489:12): domain=1e327d969 blockers=fs.make_reg path="/etc" dev="vda" ino=19
//
// Values are as the kernel wrote them, quotes removed (audit_log_untrustedstring
// writes a value with a space or a quote as hex instead, which is kept as is).
// ok is false for text without the audit(…) prefix.
func parseRecord(typ uint16, text string) (record, bool) {
	rest, ok := strings.CutPrefix(text, "audit(")
	if !ok {
		return record{}, false
	}
	stamp, rest, ok := strings.Cut(rest, "):")
	if !ok {
		return record{}, false
	}
	_, serialText, ok := strings.Cut(stamp, ":")
	if !ok {
		return record{}, false
	}
	serial, err := strconv.ParseUint(serialText, 10, 64)
	if err != nil {
		return record{}, false
	}
	r := record{typ: typ, serial: serial, fields: map[string]string{}}
	for _, kv := range strings.Fields(rest) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		r.fields[k] = strings.Trim(v, `"`)
	}
	return r, true
}

// domain is the record's Landlock domain id (hexadecimal in the record).
func (r record) domain() (uint64, bool) {
	v, ok := r.fields["domain"]
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(v, 16, 64)
	return id, err == nil
}

func (r record) int(key string) (int, bool) {
	v, ok := r.fields[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}
