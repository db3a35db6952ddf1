// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"errors"
	"fmt"
)

var (
	// errClosed is returned by Append after Close.
	errClosed = errors.New("audit log closed")
	// errNoType is returned by Append for an Event without a Type.
	errNoType = errors.New("audit event has no type")
	// errCorruptTail is returned by Open and Append when neither of the file's last two lines
	// is an audit record: that is not what a crash leaves, so the writer refuses to guess
	// where the chain ends. Move the file aside to start a new chain; Check says where the
	// damage starts.
	errCorruptTail = errors.New("last two lines are not audit records")

	// ErrNoAnchor means the anchor file is missing or empty.
	ErrNoAnchor = errors.New("no audit anchor")
	// ErrBadAnchor means the anchor file holds something other than one
	// anchor: torn by a power loss, or written by someone else.
	ErrBadAnchor = errors.New("malformed audit anchor")
	// ErrAnchorUnsigned means a key was given to check the anchor with and
	// the anchor has no signature.
	ErrAnchorUnsigned = errors.New("audit anchor is not signed")
	// ErrAnchorSignature means the anchor's signature does not verify with
	// the key given: another key signed it, or the anchor was changed.
	ErrAnchorSignature = errors.New("audit anchor signature does not verify")
)

// What Check finds when a file's chain holds but does not end, or start,
// where its anchor says; the Kind of an *AnchorError.
var (
	// errTailCut: the anchor names lines past the file's end.
	errTailCut = errors.New("tail cut")
	// errLineEdited: the line at the anchor's seq is not the line anchored.
	errLineEdited = errors.New("edited")
	// errPastAnchor: lines follow the anchored line, written after the
	// anchor was (by hand, or by a writer killed before it updated it).
	errPastAnchor = errors.New("lines past the anchor")
	// errFirstMissing: the file starts after the seq its anchor says.
	errFirstMissing = errors.New("first line missing")
	// errFirstChanged: the file's first line has another seq or
	// prev_sha256 than its anchor says.
	errFirstChanged = errors.New("first line changed")
	// errRolledBack: a witness saw a line past the files' end: an older
	// log (and its older anchor) was put back.
	errRolledBack = errors.New("rolled back")
	// errRewritten: the line at a witness's seq is not the line it saw.
	errRewritten = errors.New("rewritten")
)

// BrokenError is Check's answer for a chain that does not hold at Line (1-based). Reason is
// one of
//
//	not JSON
//	not an audit record: DETAIL                  (valid JSON without seq or prev_sha256)
//	edited or reordered: prev_sha256 does not match line N
//	deleted line(s): seq jumps from A to B
//	edited: seq is B, want A+1                   (the line links to its predecessor, so its
//	                                             own seq was changed)
//	reordered: seq goes back from A to B
//	reordered: lines N and N+1 swapped (seq B before seq A+1)
//	reordered: seq C is at line M, after seq B  (seq jumps from A to B, and a seq between A
//	                                             and B comes later in the file)
//
// with "the previous file's last line" for "line N" on the first line of a file that
// continues another. Which line is named: a line edited without breaking its JSON is reported
// at the line after it, whose prev_sha256 no longer matches; an edit that breaks the JSON at
// the line itself; a deleted line at the line that now takes its place; two swapped lines at
// the first of them. A seq
// jump is a deletion only when none of the skipped seqs comes later in the file: Check
// reads on past the break to tell.
type BrokenError struct {
	Line   int
	Reason string
}

func (e *BrokenError) Error() string {
	return fmt.Sprintf("audit chain broken at line %d: %s", e.Line, e.Reason)
}

// AnchorError is Check's answer for a file whose chain holds but disagrees with its anchor.
// Kind is one of errTailCut, errLineEdited, errPastAnchor, errFirstMissing and
// errFirstChanged; Line is the file's line concerned (1-based), 0 when it is not in the file
// (a cut tail); Reason says which seqs, starting with Kind's text:
//
//	tail cut: seq A-B missing (the anchor ends at seq B, the file at seq A-1)
//	edited: seq A is not the line anchored (its sha256 differs from the anchor's)
//	lines past the anchor: seq A-B (the anchor ends at seq A-1)
//	first line missing: seq A-B (the anchor says the file starts at seq A, it starts at B+1)
//	first line changed: …
type AnchorError struct {
	Kind   error
	Line   int
	Reason string
}

func (e *AnchorError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("audit anchor: line %d: %s", e.Line, e.Reason)
	}
	return "audit anchor: " + e.Reason
}

func (e *AnchorError) Unwrap() error { return e.Kind }
