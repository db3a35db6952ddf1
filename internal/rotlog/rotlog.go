// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package rotlog is a size-rotated log file for an agent's output: when a
// write would take FILE past its limit, FILE becomes FILE.1 (FILE.1 becomes
// FILE.2, …, up to keep files) and a new FILE is started. Writes never
// fail because of rotation: a failed rename keeps appending to the
// current file.
//
// Shift and Name are that numbering on their own, for the other rotated
// files of hermeskilld (the audit log).
package rotlog

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"sync"
)

// Writer appends to a rotated file; safe for concurrent use.
type Writer struct {
	path string
	max  int64
	keep int

	mu   sync.Mutex
	f    *os.File
	size int64
}

// Open opens path for appending (0640, created if missing). maxBytes 0
// never rotates; keep < 1 keeps one rotated file.
func Open(path string, maxBytes int64, keep int) (*Writer, error) {
	w := &Writer{path: path, max: maxBytes, keep: max(keep, 1)}
	if err := w.open(); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *Writer) open() error {
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	w.f, w.size = f, fi.Size()
	return nil
}

// Write appends p, rotating first when p would take the file past its limit.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return 0, os.ErrClosed
	}
	if w.max > 0 && w.size > 0 && w.size+int64(len(p)) > w.max {
		w.rotate()
	}
	n, err := w.f.Write(p)
	w.size += int64(n)
	return n, err
}

// rotate shifts the files; on any failure it keeps the current file.
func (w *Writer) rotate() {
	if err := Shift(w.path, w.keep); err != nil {
		return
	}
	old := w.f
	if err := w.open(); err != nil {
		w.f = old // keep writing where we can
		return
	}
	old.Close()
}

// Close closes the file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// Name is the n-th newest rotated file of path: path.n.
func Name(path string, n int) string { return path + "." + strconv.Itoa(n) }

// Shift moves path aside as Name(path, 1), after moving each older
// rotated file up by one, oldest first, so that keep of them are left
// (keep < 1 counts as 1): the one at Name(path, keep) is replaced. A
// rotated file that does not exist is skipped. It stops at the first
// rename that fails, and then path has not moved; the caller keeps using
// it. Errors: the *os.LinkError of that rename.
func Shift(path string, keep int) error {
	for n := max(keep, 1) - 1; n >= 1; n-- {
		err := os.Rename(Name(path, n), Name(path, n+1))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return os.Rename(path, Name(path, 1))
}
