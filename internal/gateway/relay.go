// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"time"
)

// relayBufSize is the read buffer of a stream: an event of the providers
// is a few hundred bytes; a longer line is read in pieces.
const relayBufSize = 4 << 10

// keepEventCap is the capacity the event buffer keeps between events; a
// larger one (after a large event) is released.
const keepEventCap = 64 << 10

// relay forwards a server-sent event stream from the upstream to the
// agent event by event, flushing after each, and shows each event's data
// to the meter on the way. An event is held only until its blank line;
// one longer than maxEvent is forwarded as it comes and not read.
type relay struct {
	src          *bufio.Reader
	w            http.ResponseWriter
	rc           *http.ResponseController
	writeTimeout time.Duration
	maxEvent     int
	meter        streamMeter // nil: forward only

	ev       []byte // the event being read, until its blank line
	data     []byte // its data lines, joined
	midLine  bool   // the last piece read did not end its line
	overflow bool   // the current event passed maxEvent: the rest passes unread
	skipped  bool   // an event was not read
}

// agentError is a write to the agent that failed: it went away or stopped
// reading.
type agentError struct{ err error }

func (e *agentError) Error() string { return "write to agent: " + e.err.Error() }
func (e *agentError) Unwrap() error { return e.err }

// run relays until the upstream's stream ends: nil at its end, an
// *agentError when the agent cannot be written to, else the upstream's
// read error (what was held of the broken event is dropped: the agent
// never gets half an event).
func (rl *relay) run() error {
	for {
		line, err := rl.src.ReadSlice('\n')
		if len(line) > 0 {
			if werr := rl.line(line, err == nil); werr != nil {
				return werr
			}
		}
		switch {
		case err == nil, err == bufio.ErrBufferFull:
		case err == io.EOF:
			if len(rl.ev) > 0 { // the last event had no blank line
				return rl.endEvent()
			}
			return nil
		default:
			rl.resetEvent()
			return err
		}
	}
}

// line takes one read piece: a whole line (ending in '\n') or part of one.
func (rl *relay) line(b []byte, whole bool) error {
	blank := !rl.midLine && whole && (len(b) == 1 || len(b) == 2 && b[0] == '\r')
	rl.midLine = !whole
	if rl.overflow {
		if blank {
			rl.overflow = false
		}
		return rl.write(b, blank)
	}
	rl.ev = append(rl.ev, b...)
	if blank {
		return rl.endEvent()
	}
	if len(rl.ev) > rl.maxEvent {
		rl.overflow, rl.skipped = true, true
		err := rl.write(rl.ev, false)
		rl.resetEvent()
		return err
	}
	return nil
}

// endEvent shows the held event to the meter and forwards it unless the
// meter drops it.
func (rl *relay) endEvent() error {
	drop := false
	if data, ok := rl.eventData(); ok && rl.meter != nil {
		drop = rl.meter.event(data)
	}
	var err error
	if !drop {
		err = rl.write(rl.ev, true)
	}
	rl.resetEvent()
	return err
}

func (rl *relay) resetEvent() {
	if cap(rl.ev) > keepEventCap {
		rl.ev, rl.data = nil, nil
		return
	}
	rl.ev = rl.ev[:0]
}

// eventData joins the held event's data lines with '\n' (the SSE rule);
// ok is false for an event without data (a comment, a keep-alive).
func (rl *relay) eventData() (data []byte, ok bool) {
	rl.data = rl.data[:0]
	for rest := rl.ev; len(rest) > 0; {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte{'\n'})
		v, isData := bytes.CutPrefix(bytes.TrimSuffix(line, []byte{'\r'}), []byte("data:"))
		if !isData {
			continue
		}
		if ok {
			rl.data = append(rl.data, '\n')
		}
		rl.data = append(rl.data, bytes.TrimPrefix(v, []byte{' '})...)
		ok = true
	}
	return rl.data, ok
}

// write sends b to the agent, within the write timeout.
func (rl *relay) write(b []byte, flush bool) error {
	if rl.writeTimeout > 0 {
		_ = rl.rc.SetWriteDeadline(time.Now().Add(rl.writeTimeout)) // unsupported: the server's own timeouts apply
	}
	if _, err := rl.w.Write(b); err != nil {
		return &agentError{err}
	}
	if flush {
		if err := rl.rc.Flush(); err != nil {
			return &agentError{err}
		}
	}
	return nil
}
