// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// typeAnchorMismatch is the type of the line a writer appends when it finds
// the log and its anchor disagreeing; its data is a MismatchData. Written by
// the package.
const typeAnchorMismatch = "anchor_mismatch"

// Causes of an anchor mismatch: MismatchData.Cause.
const (
	// causeLinesPastAnchor: the anchored line is in the log and lines
	// follow it. A writer killed between its line and its anchor leaves one.
	causeLinesPastAnchor = "lines_past_anchor"
	// causeAnchorPastLog: the anchor names a seq the log does not reach:
	// lines were cut, or lost to a power loss before they reached the disk.
	causeAnchorPastLog = "anchor_past_log"
	// causeAnchorDiverged: the log's line at the anchor's seq is not the one
	// anchored.
	causeAnchorDiverged = "anchor_diverged"
	// causeNoAnchor: the log has lines and there is no anchor: a log from
	// before anchors, or the anchor was deleted.
	causeNoAnchor = "no_anchor"
	// causeBadAnchor: the anchor file holds no anchor, or one whose
	// signature the writer's key does not verify.
	causeBadAnchor = "bad_anchor"
)

// MismatchData is the data of a typeAnchorMismatch line: what the writer
// found before it re-anchored the chain.
type MismatchData struct {
	Cause  string  `json:"cause"`
	Anchor *Anchor `json:"anchor,omitempty"` // what the anchor file held; absent when it held none
	Log    Head    `json:"log"`              // the chain's last line then
	Error  string  `json:"error,omitempty"`  // why the anchor was not usable (bad_anchor)
}

// String says what the writer found, in words.
func (m MismatchData) String() string {
	a := m.Anchor
	if a == nil && m.Cause != causeNoAnchor && m.Cause != causeBadAnchor {
		return fmt.Sprintf("cause %q without the anchor it was about", m.Cause)
	}
	switch m.Cause {
	case causeLinesPastAnchor:
		return fmt.Sprintf("seq %s had been written past the anchor (seq %d)", seqRange(a.Seq+1, m.Log.Seq), a.Seq)
	case causeAnchorPastLog:
		return fmt.Sprintf("the anchor named seq %d, the log ended at seq %d (seq %s missing)",
			a.Seq, m.Log.Seq, seqRange(m.Log.Seq+1, a.Seq))
	case causeAnchorDiverged:
		return fmt.Sprintf("the log's line at the anchor's seq %d was not the line anchored", a.Seq)
	case causeNoAnchor:
		return fmt.Sprintf("there was no anchor; the log ended at seq %d", m.Log.Seq)
	case causeBadAnchor:
		return fmt.Sprintf("the anchor was not usable (%s); the log ended at seq %d", m.Error, m.Log.Seq)
	}
	return fmt.Sprintf("unknown cause %q", m.Cause)
}

// seqRange writes "A" or "A-B".
func seqRange(from, to uint64) string {
	if from >= to {
		return fmt.Sprint(from)
	}
	return fmt.Sprintf("%d-%d", from, to)
}

// reconcile compares the anchor file with the chain's end (l.seq, l.prev)
// and makes l.anchor what the file holds. When they disagree it records what
// it found in a typeAnchorMismatch line, which also re-anchors the chain: a
// discrepancy is never accepted silently, and never stops the log. The file
// lock is held.
func (l *Log) reconcile() error {
	a, err := readAnchor(l.anchorF)
	tail := Head{Seq: l.seq, SHA256: l.prev}
	m := MismatchData{Log: tail}
	switch {
	case errors.Is(err, ErrNoAnchor):
		if l.seq == 0 {
			l.anchor = Anchor{} // a new chain: its first line creates the anchor
			return nil
		}
		m.Cause = causeNoAnchor
	case errors.Is(err, ErrBadAnchor):
		m.Cause, m.Error = causeBadAnchor, err.Error()
	case err != nil:
		return err
	default:
		if s := l.opts.Signer; s != nil {
			if err := a.VerifySignature(s.Public()); err != nil {
				m.Cause, m.Anchor, m.Error = causeBadAnchor, &a, err.Error()
				break
			}
		}
		if a.Head == tail {
			l.anchor = a
			return nil
		}
		m.Anchor = &a
		m.Cause, err = l.classify(a)
		if err != nil {
			return err
		}
	}
	return l.recordMismatch(m)
}

// classify says how anchor a, which names another line than the chain's
// last, disagrees with the file.
func (l *Log) classify(a Anchor) (string, error) {
	switch {
	case a.Seq > l.seq:
		return causeAnchorPastLog, nil
	case a.Seq == l.seq:
		return causeAnchorDiverged, nil
	}
	h, err := hashAt(l.f, l.size, a.Seq)
	if err != nil {
		return "", err
	}
	if h == a.SHA256 {
		return causeLinesPastAnchor, nil
	}
	return causeAnchorDiverged, nil
}

// recordMismatch appends m as a typeAnchorMismatch line, fsynced: the anchor
// written with it describes the file as it now is.
func (l *Log) recordMismatch(m MismatchData) error {
	l.anchor = Anchor{}
	if l.size > 0 {
		// An empty file gets its first line from the record (see advance).
		first, err := firstLink(l.f)
		if err != nil {
			return err
		}
		l.anchor.FirstSeq, l.anchor.FirstPrev = first.seq, first.prev
	}
	data, err := marshalData(m)
	if err != nil {
		return err
	}
	line, err := l.next(record{Type: typeAnchorMismatch, Data: data})
	if err != nil {
		return err
	}
	return l.write(line, true)
}

// hashAt returns the sha256 of the line with seq seq among the first end
// bytes of r, reading backwards from end; of the line before the first when
// the first's seq is seq+1 (it follows FILE.1's last line). "" when there is
// no such line, or a line on the way is not a record.
func hashAt(r io.ReaderAt, end int64, seq uint64) (string, error) {
	for end > 0 {
		start, line, err := lastSegment(r, end-1)
		if err != nil {
			return "", err
		}
		l, err := decodeLink(line)
		switch {
		case err != nil || l.seq < seq:
			return "", nil
		case l.seq == seq:
			return hashLine(line), nil
		case start == 0 && l.seq == seq+1:
			return l.prev, nil
		}
		end = start
	}
	return "", nil
}

// firstLink returns the link of r's first line: seq 0 and 64 zeros when it
// cannot be read as a record (Check reports it).
func firstLink(r io.ReaderAt) (link, error) {
	const chunk = 4096
	var line []byte
	for off := int64(0); ; off += chunk {
		buf := make([]byte, chunk)
		n, err := r.ReadAt(buf, off)
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			line = append(line, buf[:i]...)
			break
		}
		line = append(line, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			return link{}, fmt.Errorf("read audit log head: %w", err)
		}
	}
	l, err := decodeLink(line)
	if err != nil {
		return link{prev: zeroHash}, nil
	}
	return l, nil
}
