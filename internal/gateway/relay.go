// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"bufio"
	"bytes"
	"io"
)

// relayBufSize is the read buffer of a stream: an event of the providers
// is a few hundred bytes; a longer line is read in pieces.
const relayBufSize = 4 << 10

// keepEventCap is the capacity the event buffer keeps between events; a
// larger one (after a large event) is released.
const keepEventCap = 64 << 10

// relay reads a server-sent event stream from the upstream as the agent
// gets it, and shows each event's data to the meter on the way. An event
// is held only until its blank line; one longer than maxEvent is passed on
// as it comes and not read. The reverse proxy writes and flushes what each
// Read returns, so a Read returns as soon as it has a whole event and the
// source has no further line already read: the events that came in one
// read of the upstream go out in one write and one flush, and none waits
// for the next to arrive.
type relay struct {
	src      *bufio.Reader
	maxEvent int
	meter    streamMeter // nil: forward only
	// limit, when set, is asked after each event the meter read: the
	// events that end the stream there (it was cut at the budget), or nil.
	limit func() []byte

	ev       []byte // the event being read, until its blank line
	data     []byte // its data lines, joined
	out      []byte // what Read returns next: an event, or a piece of one too long to hold
	end      []byte // what limit ended the stream with, returned after out
	midLine  bool   // the last piece read did not end its line
	overflow bool   // the current event passed maxEvent: the rest passes unread
	skipped  bool   // an event was not read
	err      error  // the source's end: io.EOF, or its read error
}

// agentError is a write to the agent that failed: it went away or stopped
// reading.
type agentError struct{ err error }

func (e *agentError) Error() string { return "write to agent: " + e.err.Error() }
func (e *agentError) Unwrap() error { return e.err }

// Read returns the stream's next bytes for the agent: io.EOF at the
// stream's end, else the upstream's read error (what was held of the
// broken event is dropped: the agent never gets half an event). It blocks
// on the source only while it has nothing to return.
func (rl *relay) Read(p []byte) (int, error) {
	n := 0
	for {
		c := copy(p[n:], rl.out)
		rl.out, n = rl.out[c:], n+c
		switch {
		case len(rl.out) > 0: // p is full
			return n, nil
		case len(rl.end) > 0:
			rl.out, rl.end = rl.end, nil
			continue
		case rl.err != nil && n > 0:
			return n, nil
		case rl.err != nil:
			return 0, rl.err
		case n > 0 && !rl.lineBuffered():
			return n, nil
		}
		rl.next()
	}
}

// lineBuffered is true when the source's next piece is already read: a
// whole line, or a full buffer of one.
func (rl *relay) lineBuffered() bool {
	b, _ := rl.src.Peek(rl.src.Buffered())
	return len(b) == rl.src.Size() || bytes.IndexByte(b, '\n') >= 0
}

// next reads one piece of the source: a whole line or part of one.
func (rl *relay) next() {
	line, err := rl.src.ReadSlice('\n')
	if len(line) > 0 {
		rl.line(line, err == nil)
	}
	switch {
	case err == nil, err == bufio.ErrBufferFull:
	case err == io.EOF:
		rl.err = io.EOF
		if len(rl.ev) > 0 { // the last event had no blank line
			rl.endEvent()
		}
	default:
		rl.resetEvent()
		rl.err = err
	}
}

// line takes one read piece: a whole line (ending in '\n') or part of one.
func (rl *relay) line(b []byte, whole bool) {
	blank := !rl.midLine && whole && (len(b) == 1 || len(b) == 2 && b[0] == '\r')
	rl.midLine = !whole
	if rl.overflow {
		if blank {
			rl.overflow = false
		}
		rl.out = b
		return
	}
	rl.ev = append(rl.ev, b...)
	if blank {
		rl.endEvent()
		return
	}
	if len(rl.ev) > rl.maxEvent {
		rl.overflow, rl.skipped = true, true
		rl.out = rl.ev
		rl.resetEvent()
	}
}

// endEvent shows the held event to the meter and passes it on unless the
// meter drops it; when limit ends the stream after it, nothing more is
// read from the source.
func (rl *relay) endEvent() {
	drop := false
	if data, ok := rl.eventData(); ok && rl.meter != nil {
		drop = rl.meter.event(data)
		if rl.limit != nil {
			if end := rl.limit(); end != nil {
				rl.end, rl.err = end, io.EOF
			}
		}
	}
	if !drop {
		rl.out = rl.ev
	}
	rl.resetEvent()
}

// resetEvent empties the event buffer. What out holds of it stays valid:
// the buffer is written again only once out has been read.
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
