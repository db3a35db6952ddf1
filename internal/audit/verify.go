// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Report describes a chain Check (or verify) walked.
type Report struct {
	Lines     int    // complete lines checked; a torn tail is not counted
	FirstSeq  uint64 // seq of the first line
	LastSeq   uint64 // seq of the last line
	FirstPrev string // prev_sha256 of the first line: 64 zeros when the file starts a chain
	LastHash  string // sha256 of the last line: the next line's prev_sha256
	// TornTail says the input ends with a torn line, as a writer that crashed inside write(2)
	// leaves: bytes after the last "\n", and before them at most one line that is not an
	// audit record. It is tolerated (Open cuts it off); callers should warn.
	TornTail  bool
	TornBytes int64 // the torn tail's length, "\n" included: what Open would cut off
	// Mismatches are the lines of type anchor_mismatch: each says a writer found the log and
	// its anchor disagreeing, and went on from there (see the package comment).
	Mismatches []Mismatch
}

// Mismatch is a line of type anchor_mismatch.
type Mismatch struct {
	Line int    // 1-based, in the file
	Seq  uint64 // the line's seq
	Data MismatchData
}

// verify walks the chain in r from its first line, which may carry any seq and prev_sha256
// (a file that starts a chain has seq 1 and 64 zeros; Report.FirstSeq and Report.FirstPrev
// tell). Every later complete line must be an audit record whose prev_sha256 is the sha256 of
// the line before it and whose seq is one more. The first line that is not gives a
// *BrokenError; a read error is returned wrapped. Everything up to the break is in the Report.
// verify does not read the anchor: Check does, and walks several files with the same
// verifier.
func verify(r io.Reader) (Report, error) { return verifyFrom(r, Report{}) }

// verifyFrom is verify for a file that continues the chain Report prev describes, typically
// FILE after FILE.1: its first line must link to prev's last. With prev.Lines == 0 it is verify.
func verifyFrom(r io.Reader, prev Report) (Report, error) {
	v := verifier{}
	if prev.Lines > 0 {
		v.prev = &prev
	}
	err := v.walk(r)
	return v.rep, err
}

type verifier struct {
	prev *Report // the file this one continues; nil for none
	rep  Report

	// watch is a seq whose line to note (the anchor's head); 0 for none.
	watch uint64
	// watchedLine and watchedHash are that line's number and sha256, once seen.
	watchedLine int
	watchedHash string
	// witness holds the seqs whose lines to note for Check's witnesses; nil for none.
	witness map[uint64]witnessLine

	// jump is set by check when the chain breaks with a seq jump from jump[0] to jump[1].
	jump *[2]uint64
}

func (v *verifier) walk(r io.Reader) error {
	br := bufio.NewReader(r)
	// A line is checked once the next one is read: a bad line is a break when a complete
	// line follows it, and part of a torn tail when it is the last.
	var pending []byte
	for {
		seg, err := br.ReadBytes('\n')
		if err == nil {
			if pending != nil {
				if err := v.check(pending); err != nil {
					return v.explain(err, seg, br)
				}
			}
			pending = seg[:len(seg)-1]
			continue
		}
		if err != io.EOF {
			return fmt.Errorf("read audit log: %w", err)
		}
		if len(seg) > 0 {
			v.rep.TornTail = true
			v.rep.TornBytes += int64(len(seg))
		}
		if pending != nil {
			if _, err := decodeLink(pending); err != nil {
				v.rep.TornTail = true
				v.rep.TornBytes += int64(len(pending)) + 1
			} else if err := v.check(pending); err != nil {
				return v.explain(err, nil, br)
			}
		}
		return nil
	}
}

// check verifies the next complete line (no "\n") and adds it to the report.
func (v *verifier) check(line []byte) error {
	n := v.rep.Lines + 1
	l, err := decodeLink(line)
	if err != nil {
		return &BrokenError{Line: n, Reason: err.Error()}
	}
	var reason string
	switch {
	case v.rep.Lines > 0:
		reason = v.linkReason(l, v.rep.LastHash, v.rep.LastSeq, fmt.Sprintf("line %d", n-1))
	case v.prev != nil:
		reason = v.linkReason(l, v.prev.LastHash, v.prev.LastSeq, "the previous file's last line")
	}
	if reason != "" {
		return &BrokenError{Line: n, Reason: reason}
	}
	if v.rep.Lines == 0 {
		v.rep.FirstSeq, v.rep.FirstPrev = l.seq, l.prev
	}
	v.rep.Lines = n
	v.rep.LastSeq, v.rep.LastHash = l.seq, hashLine(line)
	if v.watch != 0 && l.seq == v.watch {
		v.watchedLine, v.watchedHash = n, v.rep.LastHash
	}
	if _, ok := v.witness[l.seq]; ok {
		v.witness[l.seq] = witnessLine{seen: true, hash: v.rep.LastHash, line: n}
	}
	if l.typ == typeAnchorMismatch {
		m := Mismatch{Line: n, Seq: l.seq}
		var rec struct{ Data MismatchData }
		// Data that does not decode leaves an unknown cause: still a mismatch to report.
		json.Unmarshal(line, &rec)
		m.Data = rec.Data
		v.rep.Mismatches = append(v.rep.Mismatches, m)
	}
	return nil
}

// linkReason says why l does not follow the line whose hash and seq are given, named before;
// "" when it does. A jump forward is noted in v.jump, for explain.
func (v *verifier) linkReason(l link, hash string, seq uint64, before string) string {
	hashOK := l.prev == hash
	switch {
	case hashOK && l.seq == seq+1:
		return ""
	case hashOK: // it follows its line, so its own seq was changed
		return fmt.Sprintf("edited: seq is %d, want %d", l.seq, seq+1)
	case l.seq == seq+1:
		return "edited or reordered: prev_sha256 does not match " + before
	case l.seq > seq+1:
		v.jump = &[2]uint64{seq, l.seq}
		return fmt.Sprintf("deleted line(s): seq jumps from %d to %d", seq, l.seq)
	default:
		return fmt.Sprintf("reordered: seq goes back from %d to %d", seq, l.seq)
	}
}

// explain refines err, the break check found, by reading on: a seq jump from A to B is a
// reordering, not a deletion, when a seq between A and B comes later in the file. next is the
// complete line after the break, rest the input after it.
func (v *verifier) explain(err error, next []byte, rest *bufio.Reader) error {
	var broken *BrokenError
	if v.jump == nil || !errors.As(err, &broken) {
		return err
	}
	from, to := v.jump[0], v.jump[1]
	for n := broken.Line + 1; ; n++ {
		line := next
		if line == nil {
			var rerr error
			if line, rerr = rest.ReadBytes('\n'); len(line) == 0 {
				if rerr != nil && rerr != io.EOF {
					return errors.Join(err, fmt.Errorf("read audit log: %w", rerr))
				}
				return err
			}
		}
		next = nil
		l, lerr := decodeLink(trimNewline(line))
		if lerr != nil || l.seq <= from || l.seq >= to {
			continue
		}
		if n == broken.Line+1 && l.seq == from+1 && to == from+2 {
			broken.Reason = fmt.Sprintf("reordered: lines %d and %d swapped (seq %d before seq %d)",
				broken.Line, n, to, l.seq)
		} else {
			broken.Reason = fmt.Sprintf("reordered: seq %d is at line %d, after seq %d", l.seq, n, to)
		}
		return broken
	}
}

func trimNewline(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\n' {
		return b[:len(b)-1]
	}
	return b
}
