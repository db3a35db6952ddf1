// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"bytes"
	"io"
)

// relayBufSize is a stream's copy buffer (streamBufs), that the relay
// reads the upstream into: an event of the providers is a few hundred
// bytes; a longer line is read in pieces.
const relayBufSize = 4 << 10

// minRelayRead is the least room a read of the upstream is given in the
// caller's buffer; with less, the relay returns what it has, or (an event
// being held that fills the buffer) reads into a buffer of its own.
const minRelayRead = 512

// keepEventCap is the capacity the event buffer keeps between events; a
// larger one (after a large event) is released.
const keepEventCap = 64 << 10

// relay reads a server-sent event stream from the upstream as the agent
// gets it, and shows each event's data to the meter on the way. An event
// is held only until its blank line; one longer than maxEvent is passed on
// as it comes and not read. The reverse proxy writes and flushes what each
// Read returns, so a Read returns as soon as it has a whole event and
// nothing more of what the upstream sent is in hand: the events that came
// in one read of the upstream go out in one write and one flush, and none
// waits for the next to arrive.
//
// The relay has no read buffer of its own: it reads the upstream into the
// caller's buffer, past what it returns and the event it holds (a stream's
// copy buffer is held as long as the stream is open, and a second buffer
// per stream would be 4 KiB more of each). The bytes read are taken line
// by line; an event's bytes are copied out to where the output goes, which
// never passes the bytes not yet taken (the read begins past the room the
// held event needs). What is left when the caller's buffer is full is kept
// in the relay's own memory (spill) until the next Read.
type relay struct {
	src      io.Reader
	maxEvent int
	meter    streamMeter // nil: forward only
	// limit, when set, is asked after each event the meter read: the
	// events that end the stream there (it was cut at the budget), or nil.
	limit func() []byte

	in     []byte // read from src and not yet taken
	inP    bool   // in (and out, when outP) is in the caller's buffer
	outP   bool
	srcErr error  // src's error or io.EOF, taken once in is
	spill  []byte // in and out kept over a return, and the read buffer of an event held past the caller's

	ev       []byte // the event being read, until its blank line
	data     []byte // its data lines, joined
	out      []byte // what Read returns next: an event, or a piece of one too long to hold
	end      []byte // what limit ended the stream with, returned after out
	midLine  bool   // the last piece read did not end its line
	crOnly   bool   // and its line so far is "\r"
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
		c := copy(p[n:], rl.out) // out may be in p, at or past n: copy moves
		rl.out, n = rl.out[c:], n+c
		switch {
		case len(rl.out) > 0: // p is full
			rl.detach()
			return n, nil
		case len(rl.end) > 0:
			rl.out, rl.end, rl.outP = rl.end, nil, false
			continue
		case rl.err != nil && n > 0:
			return n, nil
		case rl.err != nil:
			return 0, rl.err
		case n > 0 && len(rl.in) == 0:
			return n, nil
		}
		rl.outP = false
		if !rl.next(p, n) {
			return n, nil
		}
	}
}

// detach moves what of in and out is in the caller's buffer to the
// relay's own, before Read returns.
func (rl *relay) detach() {
	if !rl.inP {
		return
	}
	if rl.outP {
		no := len(rl.out)
		rl.spill = append(append(rl.spill[:0], rl.out...), rl.in...)
		rl.out, rl.in = rl.spill[:no:no], rl.spill[no:]
	} else {
		rl.spill = append(rl.spill[:0], rl.in...)
		rl.in = rl.spill
	}
	rl.inP, rl.outP = false, false
}

// next takes one piece of the source: a whole line or part of one, read
// into p past n (what Read returns so far) and the held event when
// nothing read is left. It is false when p has no room for a read and
// Read has bytes to return.
func (rl *relay) next(p []byte, n int) bool {
	if len(rl.in) == 0 {
		if rl.srcErr != nil {
			rl.sourceEnd(rl.srcErr)
			return true
		}
		buf := p[min(n+len(rl.ev), len(p)):]
		rl.inP = true
		if len(buf) < minRelayRead {
			if n > 0 {
				return false
			}
			// The held event fills p: read into the relay's own buffer.
			if cap(rl.spill) < relayBufSize {
				rl.spill = make([]byte, relayBufSize)
			}
			buf, rl.inP = rl.spill[:cap(rl.spill)], false
		}
		m, err := rl.src.Read(buf)
		rl.in, rl.srcErr = buf[:m], err
		return true
	}
	line, whole := rl.in, false
	if i := bytes.IndexByte(rl.in, '\n'); i >= 0 {
		line, whole = rl.in[:i+1], true
	}
	rl.in = rl.in[len(line):]
	rl.line(line, whole)
	return true
}

// sourceEnd takes the source's end: io.EOF, or its read error.
func (rl *relay) sourceEnd(err error) {
	if err == io.EOF {
		rl.err = io.EOF
		if len(rl.ev) > 0 { // the last event had no blank line
			rl.endEvent()
		}
		return
	}
	rl.resetEvent()
	rl.err = err
}

// line takes one read piece: a whole line (ending in '\n') or part of one.
func (rl *relay) line(b []byte, whole bool) {
	// A line comes in pieces where a read of the upstream ended in it: a
	// blank line may be "\r", then "\n".
	blank := whole && (!rl.midLine && (len(b) == 1 || len(b) == 2 && b[0] == '\r') || rl.midLine && rl.crOnly && len(b) == 1)
	rl.crOnly = !whole && !rl.midLine && len(b) == 1 && b[0] == '\r'
	rl.midLine = !whole
	if rl.overflow {
		if blank {
			rl.overflow = false
		}
		rl.out, rl.outP = b, rl.inP
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
				// Nothing more is read: what came after the event is dropped.
				rl.end, rl.err, rl.in = end, io.EOF, nil
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
