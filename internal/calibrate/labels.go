// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package calibrate owns the operators' verdicts on kills and the
// statistics drawn from them: `hermeskilld
// certs label` records whether a certificate's kill was right, and
// `hermeskilld calibrate` reports, per check, how often it was.
//
// Labels never touch the certificates (their signatures cover every
// field): they are appended, one JSON object a line, to LabelsFile in the
// certificates' directory. The last label of a certificate wins.
package calibrate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// LabelsFile is the labels' file name in the certificates' directory.
const LabelsFile = "labels.jsonl"

// LabelsMode is the labels file's mode when AppendLabel creates it: as a
// certificate's, readable by the group, never by others.
const LabelsMode os.FileMode = 0o640

// Verdicts.
const (
	TruePositive  = "true-positive"  // the agent had to die
	FalsePositive = "false-positive" // the check fired on a healthy agent
)

// maxLine bounds one label line (the note is the only free text).
const maxLine = 64 << 10

// ErrBadLabel means a label is incomplete or its verdict unknown.
var ErrBadLabel = errors.New("bad label")

// Label is one verdict on one certificate: a line of LabelsFile.
type Label struct {
	CertID       string    `json:"cert_id"`
	AgentID      string    `json:"agent_id"`
	TriggerCheck string    `json:"trigger_check"`
	Verdict      string    `json:"verdict"` // TruePositive or FalsePositive
	Note         string    `json:"note,omitempty"`
	At           time.Time `json:"at"`
	By           string    `json:"by"` // who labelled: "uid:1000(alice)"
}

// Check returns an error matching ErrBadLabel when l lacks its cert_id or
// verdict, or the verdict is unknown.
func (l Label) Check() error {
	switch {
	case l.CertID == "":
		return fmt.Errorf("%w: no cert_id", ErrBadLabel)
	case l.Verdict != TruePositive && l.Verdict != FalsePositive:
		return fmt.Errorf("%w: verdict %q (want %s or %s)", ErrBadLabel, l.Verdict, TruePositive, FalsePositive)
	}
	return nil
}

// AppendLabel appends l to dir's LabelsFile with a single write(2) on an
// O_APPEND descriptor, so that concurrent labellers never interleave, and
// fsyncs it. The file is created with LabelsMode exactly. A last line left
// without its newline (a write cut short) is ended first, so the new label
// stays readable.
func AppendLabel(dir string, l Label) error {
	if err := l.Check(); err != nil {
		return err
	}
	if l.At.IsZero() {
		l.At = time.Now()
	}
	l.At = l.At.UTC()
	line, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("label: %w", err)
	}
	line = append(line, '\n')
	if len(line) > maxLine {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrBadLabel, len(line), maxLine)
	}
	f, err := openLabels(filepath.Join(dir, LabelsFile))
	if err != nil {
		return err
	}
	defer f.Close()
	if torn, err := endsTorn(f); err != nil {
		return fmt.Errorf("label: %w", err)
	} else if torn {
		line = append([]byte{'\n'}, line...)
	}
	if _, err := f.Write(line); err != nil {
		return fmt.Errorf("label: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("label: %w", err)
	}
	return f.Close()
}

// openLabels opens path for appending, creating it with LabelsMode (not
// subject to the umask) when it does not exist.
func openLabels(path string) (*os.File, error) {
	const flags = os.O_WRONLY | os.O_APPEND | syscall.O_NOFOLLOW
	f, err := os.OpenFile(path, flags|os.O_CREATE|os.O_EXCL, LabelsMode)
	if err == nil {
		if err := f.Chmod(LabelsMode); err != nil {
			f.Close()
			return nil, fmt.Errorf("label: %w", err)
		}
		return f, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("label: %w", err)
	}
	f, err = os.OpenFile(path, flags, 0)
	if err != nil {
		return nil, fmt.Errorf("label: %w", err)
	}
	return f, nil
}

// endsTorn reports whether the file is not empty and does not end with a
// newline.
func endsTorn(f *os.File) (bool, error) {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return false, err
	}
	r, err := os.Open(f.Name())
	if err != nil {
		return false, err
	}
	defer r.Close()
	var last [1]byte
	if _, err := r.ReadAt(last[:], fi.Size()-1); err != nil {
		return false, err
	}
	return last[0] != '\n', nil
}

// BadLinesError lists the lines of a labels file that are not labels (for
// example what is left of a write cut short by a crash).
type BadLinesError struct {
	Path  string
	Lines []int // 1-based
	First error // why the first of them is bad
}

func (e *BadLinesError) Error() string {
	return fmt.Sprintf("labels %s: %d bad line(s), first line %d: %v", e.Path, len(e.Lines), e.Lines[0], e.First)
}

// Is makes errors.Is(err, ErrBadLabel) true.
func (e *BadLinesError) Is(target error) bool { return target == ErrBadLabel }

// ReadLabels returns the labels in dir's LabelsFile, in file order (no
// file: none). Lines that are not labels are skipped and reported by a
// *BadLinesError returned with the good labels, so that one damaged line
// does not hide the others; the caller decides whether to go on. A last
// line without its newline is a write in progress or cut short: it is
// skipped silently.
func ReadLabels(dir string) ([]Label, error) {
	path := filepath.Join(dir, LabelsFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("labels: %w", err)
	}
	defer f.Close()
	var out []Label
	var bad *BadLinesError
	r := bufio.NewReaderSize(f, 64<<10)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("labels %s: %w", path, err)
		}
		if !bytes.HasSuffix(line, []byte{'\n'}) {
			break
		}
		text := bytes.TrimSpace(line)
		if len(text) == 0 {
			continue
		}
		var l Label
		perr := json.Unmarshal(text, &l)
		if perr == nil {
			perr = l.Check()
		}
		if perr != nil {
			if bad == nil {
				bad = &BadLinesError{Path: path, First: perr}
			}
			bad.Lines = append(bad.Lines, n)
			continue
		}
		out = append(out, l)
	}
	if bad != nil {
		return out, bad
	}
	return out, nil
}
