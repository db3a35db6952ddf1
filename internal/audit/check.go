// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"crypto/ed25519"
	"fmt"
	"io"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// CheckOptions say what Check compares audit files with.
type CheckOptions struct {
	// Anchor is the anchor file of the last file (AnchorPath of it, or a copy kept
	// elsewhere); "" checks the chain alone.
	Anchor string
	// PublicKey, when set, must verify the anchor's signature.
	PublicKey ed25519.PublicKey
	// Accept lists the seqs of anchor_mismatch lines an operator has looked into and
	// explained: they are no longer failures.
	Accept []uint64
	// Witnesses are heads of the chain seen later than the files might be: the anchor a
	// delivered certificate carries, an anchor copied off the host. The files must hold
	// each one's line, unchanged; a log that ends before a witness's seq was rolled back
	// (an older log put back with its older anchor, which verify alone cannot tell).
	Witnesses []Witness
}

// Witness is a head of the chain known from outside the log, and where it came from.
type Witness struct {
	Head
	Source string // for the report: a certificate's path, say
}

// FileResult is what Check found in one file.
type FileResult struct {
	Path   string
	Report Report
	// Anchor is the anchor the file matched: set on the last file when CheckOptions.Anchor
	// is, and Err is nil.
	Anchor *Anchor
	// Mismatches are the file's anchor_mismatch lines CheckOptions.Accept does not list:
	// each is a failure.
	Mismatches []Mismatch
	// Err is why the file does not verify: a *BrokenError (the chain), an *AnchorError (the
	// chain holds, its anchor says otherwise), the anchor's own error (ErrNoAnchor,
	// ErrBadAnchor, ErrAnchorUnsigned, ErrAnchorSignature), or a read error.
	Err error
}

// OK reports whether the file verified.
func (r FileResult) OK() bool { return r.Err == nil && len(r.Mismatches) == 0 }

// Check verifies files as one chain, oldest first (FILE.2 FILE.1 FILE), and, with
// opts.Anchor, the last of them against its anchor: it must start at the anchor's
// first_seq with its first_prev_sha256, and end at the anchor's line. It returns a result
// per file, up to and including the first whose Err is set: the files after a break cannot
// link to it. The error is for a file that cannot be opened.
//
// When the last file has a lock file (FILE.lock, as a live log has), the files are opened
// and the anchor read under a shared flock(2) on it, and each file is read only as far as it
// went then: a writer appending meanwhile cannot make them disagree.
func Check(files []string, opts CheckOptions) ([]FileResult, error) {
	if len(files) == 0 {
		return nil, nil
	}
	snap, err := takeSnapshot(files, opts.Anchor)
	if err != nil {
		return nil, err
	}
	defer snap.close()

	w := chainWalk{anchor: snap.anchor, witnessed: map[uint64]witnessLine{}}
	for _, wt := range opts.Witnesses {
		w.witnessed[wt.Seq] = witnessLine{}
	}
	var results []FileResult
	for i, name := range files {
		res := w.file(name, snap.readers[i])
		res.Mismatches = slices.DeleteFunc(slices.Clone(res.Report.Mismatches), func(m Mismatch) bool {
			return slices.Contains(opts.Accept, m.Seq)
		})
		if res.Err == nil && i == len(files)-1 && opts.Anchor != "" {
			res.Anchor, res.Err = w.checkAnchor(res.Report, snap.anchorErr, opts)
		}
		if res.Err == nil && i == len(files)-1 {
			res.Err = w.checkWitnesses(opts.Witnesses)
		}
		results = append(results, res)
		if res.Err != nil {
			break
		}
	}
	return results, nil
}

// chainWalk carries what Check needs from one file to the next.
type chainWalk struct {
	prev   Report  // the last file with lines
	anchor *Anchor // nil when there is none to compare with

	watched     bool   // the anchor's line was seen
	watchedHash string // its sha256
	watchedLine int    // its line number, in the file it was in
	watchedLast bool   // that file is the last one walked

	last      string                 // the file walked last
	witnessed map[uint64]witnessLine // the witnesses' seqs: their lines, once seen
}

// witnessLine is the line at a witness's seq, as the files hold it.
type witnessLine struct {
	seen bool
	hash string
	line int    // in the file it is in
	file string // that file
}

func (w *chainWalk) file(name string, r io.Reader) FileResult {
	v := verifier{}
	if w.prev.Lines > 0 {
		v.prev = &w.prev
	}
	if w.anchor != nil {
		v.watch = w.anchor.Seq
	}
	v.witness = w.witnessed
	err := v.walk(r)
	res := FileResult{Path: name, Report: v.rep, Err: err}
	for seq, l := range w.witnessed {
		if l.seen && l.file == "" {
			l.file = name
			w.witnessed[seq] = l
		}
	}
	w.last = name
	w.watchedLast = false
	if v.watchedLine > 0 {
		w.watched, w.watchedHash, w.watchedLine, w.watchedLast = true, v.watchedHash, v.watchedLine, true
	}
	if v.rep.Lines > 0 {
		w.prev = v.rep
	}
	return res
}

// checkAnchor compares the last file, whose chain holds, with the anchor.
func (w *chainWalk) checkAnchor(rep Report, anchorErr error, opts CheckOptions) (*Anchor, error) {
	if anchorErr != nil {
		return nil, anchorErr
	}
	a := w.anchor
	if opts.PublicKey != nil {
		if err := a.VerifySignature(opts.PublicKey); err != nil {
			return nil, fmt.Errorf("%s: %w", opts.Anchor, err)
		}
	}
	// The end first: the anchor's first_seq describes the file before a rotation the writer
	// was killed in the middle of, and its head says so.
	tail := Head{Seq: w.prev.LastSeq, SHA256: w.prev.LastHash} // over every file given
	switch {
	case a.Seq > tail.Seq:
		return nil, &AnchorError{Kind: errTailCut, Reason: fmt.Sprintf(
			"tail cut: seq %s missing (the anchor ends at seq %d, the file at seq %d)",
			seqRange(tail.Seq+1, a.Seq), a.Seq, tail.Seq)}
	case a.Seq == tail.Seq && a.SHA256 != tail.SHA256:
		return nil, &AnchorError{Kind: errLineEdited, Line: rep.Lines, Reason: fmt.Sprintf(
			"edited: seq %d is not the line anchored (its sha256 differs from the anchor's)", a.Seq)}
	case a.Seq < tail.Seq:
		return nil, w.pastAnchor(rep, tail)
	}
	if rep.Lines > 0 {
		switch {
		case rep.FirstSeq > a.FirstSeq:
			return nil, &AnchorError{Kind: errFirstMissing, Reason: fmt.Sprintf(
				"first line missing: seq %s (the anchor says the file starts at seq %d, it starts at seq %d)",
				seqRange(a.FirstSeq, rep.FirstSeq-1), a.FirstSeq, rep.FirstSeq)}
		case rep.FirstSeq != a.FirstSeq || rep.FirstPrev != a.FirstPrev:
			return nil, &AnchorError{Kind: errFirstChanged, Line: 1, Reason: fmt.Sprintf(
				"first line changed: it has seq %d and prev_sha256 %.12s…, the anchor says seq %d and %.12s…",
				rep.FirstSeq, rep.FirstPrev, a.FirstSeq, a.FirstPrev)}
		}
	}
	return a, nil
}

// checkWitnesses compares the chain, which holds, with heads seen from outside it.
func (w *chainWalk) checkWitnesses(ws []Witness) error {
	tail := w.prev.LastSeq
	for _, wt := range ws {
		got := w.witnessed[wt.Seq]
		switch {
		case wt.Seq > tail:
			return &AnchorError{Kind: errRolledBack, Reason: fmt.Sprintf(
				"rolled back: %s saw seq %d (sha256 %.12s…), the log ends at seq %d: seq %s missing",
				wt.Source, wt.Seq, wt.SHA256, tail, seqRange(tail+1, wt.Seq))}
		case got.seen && got.hash != wt.SHA256:
			line := 0
			if got.file == w.last {
				line = got.line
			}
			return &AnchorError{Kind: errRewritten, Line: line, Reason: fmt.Sprintf(
				"rewritten: seq %d is not the line %s saw (its sha256 differs)", wt.Seq, wt.Source)}
		}
		// Before the first file's first line: not here to check (rotated away).
	}
	return nil
}

// pastAnchor describes a chain that goes on after the anchor's line.
func (w *chainWalk) pastAnchor(rep Report, tail Head) *AnchorError {
	a := w.anchor
	// The anchored line's hash, its line number and the first line past it, in the last file
	// (0 when they are in an earlier one).
	seen, hash, line, past := w.watched, w.watchedHash, 0, 0
	switch {
	case w.watchedLast:
		line, past = w.watchedLine, w.watchedLine+1
	case !seen && rep.FirstSeq == a.Seq+1:
		// The anchored line is the one before this file's first: FILE.1's last.
		seen, hash, past = true, rep.FirstPrev, 1
	}
	switch {
	case !seen:
		return &AnchorError{Kind: errPastAnchor, Reason: fmt.Sprintf(
			"lines past the anchor: seq %s (the anchor ends at seq %d, a line these files do not hold)",
			seqRange(a.Seq+1, tail.Seq), a.Seq)}
	case hash != a.SHA256:
		return &AnchorError{Kind: errLineEdited, Line: line, Reason: fmt.Sprintf(
			"edited: seq %d is not the line anchored (its sha256 differs from the anchor's); seq %s follow it",
			a.Seq, seqRange(a.Seq+1, tail.Seq))}
	}
	return &AnchorError{Kind: errPastAnchor, Line: past, Reason: fmt.Sprintf(
		"lines past the anchor: seq %s (the anchor ends at seq %d)", seqRange(a.Seq+1, tail.Seq), a.Seq)}
}

// snapshot is the files of a chain, and its anchor, as they were at one instant.
type snapshot struct {
	files     []*os.File
	readers   []io.Reader // each file up to its size then
	anchor    *Anchor     // nil when none was asked for or it could not be read
	anchorErr error
}

func takeSnapshot(files []string, anchorPath string) (*snapshot, error) {
	unlock := lockShared(files[len(files)-1] + ".lock")
	defer unlock()
	s := &snapshot{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			s.close()
			return nil, err
		}
		s.files = append(s.files, f)
		fi, err := f.Stat()
		if err != nil {
			s.close()
			return nil, err
		}
		s.readers = append(s.readers, io.NewSectionReader(f, 0, fi.Size()))
	}
	if anchorPath != "" {
		a, err := ReadAnchor(anchorPath)
		if err != nil {
			s.anchorErr = err
		} else {
			s.anchor = &a
		}
	}
	return s, nil
}

func (s *snapshot) close() {
	for _, f := range s.files {
		f.Close()
	}
}

// lockShared takes flock(LOCK_SH) on the lock file at path, if there is one that can be
// opened, and returns its release. Without one (a copy of a log, a lock file not readable by
// the caller) files are read unlocked.
func lockShared(path string) (unlock func()) {
	f, err := os.Open(path)
	if err != nil {
		return func() {}
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_SH)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return func() {}
	}
	return func() { f.Close() } // closing the last descriptor releases the lock
}
