package audit

import (
	"bufio"
	"fmt"
	"io"
)

// Report describes a chain Verify walked.
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
}

// Verify walks the chain in r from its first line, which may carry any seq and prev_sha256
// (a file that starts a chain has seq 1 and 64 zeros; Report.FirstSeq and Report.FirstPrev
// tell). Every later complete line must be an audit record whose prev_sha256 is the sha256 of
// the line before it and whose seq is one more. The first line that is not gives a
// *BrokenError; a read error is returned wrapped. Everything up to the break is in the Report.
func Verify(r io.Reader) (Report, error) {
	return verify(r, nil)
}

// VerifyFrom is Verify for a file that continues the chain Report prev describes, typically
// FILE after FILE.1: its first line must link to prev's last. With prev.Lines == 0 it is Verify.
func VerifyFrom(r io.Reader, prev Report) (Report, error) {
	if prev.Lines == 0 {
		return verify(r, nil)
	}
	return verify(r, &prev)
}

func verify(r io.Reader, prev *Report) (Report, error) {
	v := verifier{prev: prev}
	br := bufio.NewReader(r)
	// A line is checked once the next one is read: a bad line is a break when a complete
	// line follows it, and part of a torn tail when it is the last.
	var pending []byte
	for {
		seg, err := br.ReadBytes('\n')
		if err == nil {
			if pending != nil {
				if err := v.check(pending); err != nil {
					return v.rep, err
				}
			}
			pending = seg[:len(seg)-1]
			continue
		}
		if err != io.EOF {
			return v.rep, fmt.Errorf("read audit log: %w", err)
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
				return v.rep, err
			}
		}
		return v.rep, nil
	}
}

type verifier struct {
	prev *Report // the file this one continues; nil for none
	rep  Report
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
		reason = linkReason(l, v.rep.LastHash, v.rep.LastSeq, fmt.Sprintf("line %d", n-1))
	case v.prev != nil:
		reason = linkReason(l, v.prev.LastHash, v.prev.LastSeq, "the previous file's last line")
	}
	if reason != "" {
		return &BrokenError{Line: n, Reason: reason}
	}
	if v.rep.Lines == 0 {
		v.rep.FirstSeq, v.rep.FirstPrev = l.seq, l.prev
	}
	v.rep.Lines = n
	v.rep.LastSeq, v.rep.LastHash = l.seq, hashLine(line)
	return nil
}

// linkReason says why l does not follow the line whose hash and seq are given, named before;
// "" when it does.
func linkReason(l link, hash string, seq uint64, before string) string {
	hashOK := l.prev == hash
	switch {
	case hashOK && l.seq == seq+1:
		return ""
	case hashOK: // it follows its line, so its own seq was changed
		return fmt.Sprintf("edited: seq is %d, want %d", l.seq, seq+1)
	case l.seq == seq+1:
		return "edited or reordered: prev_sha256 does not match " + before
	case l.seq > seq+1:
		return fmt.Sprintf("deleted line(s): seq jumps from %d to %d", seq, l.seq)
	default:
		return fmt.Sprintf("reordered: seq goes back from %d to %d", seq, l.seq)
	}
}
