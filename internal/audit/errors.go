package audit

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by Append after Close.
	ErrClosed = errors.New("audit log closed")
	// ErrNoType is returned by Append for an Event without a Type.
	ErrNoType = errors.New("audit event has no type")
	// ErrCorruptTail is returned by Open and Append when neither of the file's last two lines
	// is an audit record: that is not what a crash leaves, so the writer refuses to guess
	// where the chain ends. Move the file aside to start a new chain; Verify says where the
	// damage starts.
	ErrCorruptTail = errors.New("last two lines are not audit records")
)

// BrokenError is Verify's answer for a chain that does not hold at Line (1-based). Reason is
// one of
//
//	not JSON
//	not an audit record: DETAIL                  (valid JSON without seq or prev_sha256)
//	edited or reordered: prev_sha256 does not match line N
//	deleted line(s): seq jumps from A to B
//	edited: seq is B, want A+1                   (the line links to its predecessor, so its
//	                                             own seq was changed)
//	reordered: seq goes back from A to B
//
// with "the previous file's last line" for "line N" on VerifyFrom's first line. Which line is
// named: a line edited without breaking its JSON is reported at the line after it, whose
// prev_sha256 no longer matches; an edit that breaks the JSON at the line itself; a deleted
// line at the line that now takes its place; two swapped lines at the first of them, as a
// seq jump.
type BrokenError struct {
	Line   int
	Reason string
}

func (e *BrokenError) Error() string {
	return fmt.Sprintf("audit chain broken at line %d: %s", e.Line, e.Reason)
}
