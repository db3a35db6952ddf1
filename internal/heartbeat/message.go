// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat

import (
	"bytes"
	"errors"
	"strconv"
	"unicode/utf8"
)

// MaxDatagram is the largest datagram accepted; longer ones are dropped and
// counted as oversize.
const MaxDatagram = 8 << 10

// maxText caps free-text values (STATUS, ERROR, TOOL) kept from one message.
const maxText = 1 << 10

// Field is one known key of the protocol; Message.Has reports which were set.
type Field uint32

// The known keys. sd_notify(3) keys first, then hermeskill's.
const (
	FieldReady Field = 1 << iota
	FieldWatchdog
	FieldTrigger
	FieldWatchdogUSec
	FieldExtendTimeoutUSec
	FieldStatus
	FieldStopping
	FieldMainPID
	FieldErrno
	FieldBarrier
	FieldProgress
	FieldTokens
	FieldCostUSD
	FieldTool
	FieldToolArgsSHA256
	FieldError
	FieldDumpSignal
)

// Parse errors: a datagram that fails with one of these is dropped whole.
var (
	ErrEmpty    = errors.New("empty datagram")
	ErrNotUTF8  = errors.New("datagram is not UTF-8")
	ErrEmbedNUL = errors.New("datagram has an embedded NUL")
	ErrOversize = errors.New("datagram over 8 KiB")
)

// Message is one parsed datagram. Only the fields whose bit is set in the
// presence mask (see Has) carry a value.
type Message struct {
	has Field

	WatchdogUSec      uint64
	ExtendTimeoutUSec uint64
	Status            string
	MainPID           int
	Errno             int
	Progress          uint64
	Tokens            uint64
	CostUSD           float64
	Tool              string
	ToolArgsSHA256    string
	Error             string
	DumpSignal        string

	// BadFields counts known keys whose value did not parse; those keys
	// are ignored, the rest of the message is kept (systemd does the same).
	BadFields int
}

// Has reports whether the message set f.
func (m *Message) Has(f Field) bool { return m.has&f != 0 }

// Set marks f as present; used by tests and by callers building messages.
func (m *Message) Set(f Field) { m.has |= f }

// Empty reports whether no known key was set.
func (m *Message) Empty() bool { return m.has == 0 }

// Reset clears m for reuse.
func (m *Message) Reset() { *m = Message{} }

// Parse decodes one datagram into m (which it resets first). It fails only
// when the datagram as a whole is unusable: oversize, not UTF-8, or carrying
// an embedded NUL (one trailing NUL is tolerated, as systemd does). Lines
// without '=' and unknown keys are ignored, a known key with a bad value is
// ignored and counted in BadFields, and the first of duplicate keys wins:
// its first line alone decides, even when its value is bad (as systemd's
// strv_find_startswith does), so "WATCHDOG=1\nWATCHDOG=trigger" is a
// heartbeat, not both a heartbeat and a kill request.
func Parse(data []byte, m *Message) error {
	m.Reset()
	if len(data) > MaxDatagram {
		return ErrOversize
	}
	if n := len(data); n > 0 && data[n-1] == 0 {
		data = data[:n-1]
	}
	if len(data) == 0 {
		return ErrEmpty
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return ErrEmbedNUL
	}
	if !utf8.Valid(data) {
		return ErrNotUTF8
	}
	var seen Field // keys met so far, valid or not
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		eq := bytes.IndexByte(line, '=')
		if eq <= 0 {
			continue
		}
		m.assign(line[:eq], line[eq+1:], &seen)
	}
	return nil
}

// assign stores one KEY=VALUE pair unless the key was seen before in this
// datagram; seen records it. The switch on string(key) does not allocate. A
// value is stored only when it is valid, so a field whose bit is clear
// always holds its zero value.
func (m *Message) assign(key, val []byte, seen *Field) {
	var k Field // the key's bit in seen
	switch string(key) {
	case "READY":
		k = FieldReady
	case "WATCHDOG": // one key, two meanings: both bits mark it seen
		k = FieldWatchdog | FieldTrigger
	case "WATCHDOG_USEC":
		k = FieldWatchdogUSec
	case "EXTEND_TIMEOUT_USEC":
		k = FieldExtendTimeoutUSec
	case "STATUS":
		k = FieldStatus
	case "STOPPING":
		k = FieldStopping
	case "MAINPID":
		k = FieldMainPID
	case "ERRNO":
		k = FieldErrno
	case "BARRIER":
		k = FieldBarrier
	case "PROGRESS":
		k = FieldProgress
	case "TOKENS":
		k = FieldTokens
	case "COST_USD":
		k = FieldCostUSD
	case "TOOL":
		k = FieldTool
	case "TOOL_ARGS_SHA256":
		k = FieldToolArgsSHA256
	case "ERROR":
		k = FieldError
	case "DUMP_SIGNAL":
		k = FieldDumpSignal
	default:
		return // unknown keys are ignored (sd_notify(3))
	}
	if *seen&k != 0 {
		return // duplicate: the first wins
	}
	*seen |= k
	if f, ok := m.value(k, val); ok {
		m.has |= f
	} else {
		m.BadFields++
	}
}

// value parses val for key k and stores it; it returns the field to mark
// present, and false when val is not a valid value for k.
func (m *Message) value(k Field, val []byte) (Field, bool) {
	switch k {
	case FieldReady, FieldStopping, FieldBarrier:
		return k, string(val) == "1"
	case FieldWatchdog | FieldTrigger:
		switch string(val) {
		case "1":
			return FieldWatchdog, true
		case "trigger":
			return FieldTrigger, true
		}
		return 0, false
	case FieldWatchdogUSec:
		v, ok := parseUint(val)
		if ok {
			m.WatchdogUSec = v
		}
		return k, ok
	case FieldExtendTimeoutUSec:
		v, ok := parseUint(val)
		if ok {
			m.ExtendTimeoutUSec = v
		}
		return k, ok
	case FieldMainPID:
		v, ok := parseUint(val)
		ok = ok && v > 0 && v < 1<<22 // PID_MAX_LIMIT (proc(5))
		if ok {
			m.MainPID = int(v)
		}
		return k, ok
	case FieldErrno:
		v, ok := parseUint(val)
		ok = ok && v < 1<<16
		if ok {
			m.Errno = int(v)
		}
		return k, ok
	case FieldProgress:
		v, ok := parseUint(val)
		if ok {
			m.Progress = v
		}
		return k, ok
	case FieldTokens:
		v, ok := parseUint(val)
		if ok {
			m.Tokens = v
		}
		return k, ok
	case FieldCostUSD:
		v, err := strconv.ParseFloat(string(val), 64)
		ok := err == nil && v >= 0 && v < 1e15 // also refuses NaN and Inf
		if ok {
			m.CostUSD = v
		}
		return k, ok
	case FieldStatus:
		m.Status = text(val)
		return k, true
	case FieldError:
		m.Error = text(val)
		return k, true
	case FieldTool:
		if len(val) == 0 {
			return k, false
		}
		m.Tool = text(val)
		return k, true
	case FieldToolArgsSHA256:
		if !isHex64(val) {
			return k, false
		}
		m.ToolArgsSHA256 = string(val)
		return k, true
	case FieldDumpSignal:
		if len(val) == 0 {
			return k, false
		}
		m.DumpSignal = text(val)
		return k, true
	}
	return k, false
}

// parseUint parses a decimal uint64 without allocating.
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

func isHex64(b []byte) bool {
	if len(b) != 64 {
		return false
	}
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// text keeps at most maxText bytes of a free-text value, cut on a rune boundary.
func text(b []byte) string {
	if len(b) > maxText {
		b = b[:maxText]
		for len(b) > 0 && !utf8.Valid(b) {
			b = b[:len(b)-1]
		}
	}
	return string(b)
}
