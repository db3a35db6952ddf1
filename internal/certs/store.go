// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hermeskill/hermeskilld/internal/atomicfile"
)

// Modes of the certificate directory and files: the files may be
// read by the group (e.g. an operators group), never by others.
const (
	DirMode  os.FileMode = 0o750
	FileMode os.FileMode = 0o640
)

// MaxSize is the largest certificate file Read accepts. A certificate holds
// at most 64 KiB of each output stream, so real ones are far smaller.
const MaxSize = 16 << 20

// Marshal returns the certificate as written to its file: indented JSON with
// fields in schema order, map keys sorted, no HTML escaping, and a trailing
// newline. The same certificate always gives the same bytes.
func Marshal(c *Certificate) ([]byte, error) {
	if c == nil {
		return nil, errors.New("marshal certificate: nil")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("marshal certificate: %w", err)
	}
	return buf.Bytes(), nil
}

// Write stores c in dir under FileName(c) and returns the file's path. It
// fills in Schema and CertID (NewID) when they are empty, signs c when s is
// not nil (setting c.Signature), creates dir with DirMode when missing, and
// writes the file atomically and durably with FileMode exactly (see
// atomicfile.WriteFile). A certificate of another schema gives ErrSchema.
//
// When Write fails the certificate is not on disk; Marshal still gives its
// bytes for a fallback such as stderr.
func Write(dir string, c *Certificate, s *Signer) (string, error) {
	if c == nil {
		return "", errors.New("write certificate: nil")
	}
	if c.Schema == "" {
		c.Schema = Schema
	}
	if c.Schema != Schema {
		return "", fmt.Errorf("write certificate: %w %q", ErrSchema, c.Schema)
	}
	if c.CertID == "" {
		c.CertID = NewID()
	}
	if s != nil {
		if err := s.Sign(c); err != nil {
			return "", err
		}
	}
	data, err := Marshal(c)
	if err != nil {
		return "", err
	}
	if err := mkdirAll(dir); err != nil {
		return "", fmt.Errorf("write certificate: %w", err)
	}
	path := filepath.Join(dir, FileName(c))
	if err := atomicfile.WriteFile(path, data, FileMode); err != nil {
		return "", fmt.Errorf("write certificate: %w", err)
	}
	return path, nil
}

// mkdirAll creates dir and its missing parents with DirMode (less the
// umask), and fsyncs the parent of each directory it created so that the
// new entries are as durable as the certificate written into them.
func mkdirAll(dir string) error {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		missing = append(missing, d)
	}
	if len(missing) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return err
	}
	for _, d := range slices.Backward(missing) {
		if err := atomicfile.SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// ReadFile returns the bytes of a certificate file as stored, whatever
// they hold: at most MaxSize bytes of a regular file.
func ReadFile(path string) ([]byte, error) { return readLimited(path, MaxSize) }

// Read reads the certificate file at path and returns it with the file's
// bytes (for Verify). Unknown fields are ignored; a file that is not a
// certificate gives ErrMalformed, one of another schema ErrSchema, one larger
// than MaxSize an error.
func Read(path string) (*Certificate, []byte, error) {
	data, err := readLimited(path, MaxSize)
	if err != nil {
		return nil, nil, fmt.Errorf("read certificate: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, nil, fmt.Errorf("read certificate %s: %w", path, err)
	}
	return c, data, nil
}

// Parse parses a certificate file's bytes. Unknown fields are ignored;
// bytes that are not a certificate give ErrMalformed, a certificate of
// another schema ErrSchema.
func Parse(data []byte) (*Certificate, error) {
	c := new(Certificate)
	if err := json.Unmarshal(data, c); err != nil {
		return nil, malformedErr(err)
	}
	if c.Schema != Schema {
		return nil, fmt.Errorf("%w %q", ErrSchema, c.Schema)
	}
	return c, nil
}

// Entry is one file found by List: Cert when it could be read, Err
// otherwise.
type Entry struct {
	Path string
	Cert *Certificate
	Err  error
}

// List reads every certificate in dir: the regular files named *.json (not
// hidden, so not atomicfile's temporary files; subdirectories are not
// searched). Oldest first: by the time FileName files them under (triggered
// time), then by path.
//
// A file that cannot be read or is not a certificate is not skipped
// silently: it is listed with Err set (and Cert nil), at the position of its
// modification time, so that `certs ls` can show corrupt or planted files.
// A *.json entry that is not a regular file (a symlink, a FIFO) is listed
// with an error and never opened. The error result is for dir itself (it
// matches fs.ErrNotExist when dir does not exist).
func List(dir string) ([]Entry, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list certificates: %w", err)
	}
	type keyed struct {
		Entry
		at time.Time
	}
	var out []keyed
	for _, de := range ents {
		name := de.Name()
		if !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		e := keyed{Entry: Entry{Path: filepath.Join(dir, name)}}
		if !de.Type().IsRegular() {
			e.Err = fmt.Errorf("%s: not a regular file (%s)", e.Path, de.Type())
		} else {
			e.Cert, _, e.Err = Read(e.Path)
		}
		if e.Cert != nil {
			e.at = sortTime(e.Cert)
		} else if fi, err := de.Info(); err == nil {
			e.at = fi.ModTime()
		}
		out = append(out, e)
	}
	slices.SortStableFunc(out, func(a, b keyed) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(a.Path, b.Path)
	})
	entries := make([]Entry, len(out))
	for i, e := range out {
		entries[i] = e.Entry
	}
	return entries, nil
}
