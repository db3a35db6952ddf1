// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Leftover is a temporary file of a WriteFile that never renamed it: its
// writer died after creating it (or the machine did). It may hold all of the
// data, part of it, or nothing.
type Leftover struct {
	// Path is the temporary file.
	Path string
	// Target is the file WriteFile was writing: the directory and the base
	// name the temporary name carries.
	Target string
	// File is the temporary file, open read-only and locked, so no writer
	// can take it while the caller decides; Leftovers closes it when the
	// callback returns. fsync(2) and fchmod(2) work on it.
	File *os.File
}

// TargetOf returns the base name of the file WriteFile was writing when it
// created the temporary file named name ("." + base + "." + 16 hex digits +
// ".tmp"), and false when name is not such a temporary name or its base may
// have been shortened (a base name longer than NAME_MAX less 22 bytes is
// cut to fit).
func TargetOf(name string) (string, bool) {
	if !strings.HasPrefix(name, tmpPrefix) || !strings.HasSuffix(name, tmpSuffix) {
		return "", false
	}
	rest := strings.TrimSuffix(strings.TrimPrefix(name, tmpPrefix), tmpSuffix)
	dot := len(rest) - randHex - 1
	if dot <= 0 || rest[dot] != '.' || !isLowerHex(rest[dot+1:]) {
		return "", false
	}
	base := rest[:dot]
	if len(base) >= maxBase || base == "." || base == ".." {
		return "", false
	}
	return base, true
}

func isLowerHex(s string) bool {
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Leftovers calls fn for every temporary file in dir that WriteFile left
// behind and no live writer holds: a file being written right now is
// locked (flock(2)), so it is skipped, and so is one renamed into place
// while Leftovers looked at it. fn may rename or remove lo.Path; the lock is
// held until fn returns. Entries that are not WriteFile's temporary files,
// or not regular files, are never opened.
//
// The error is for dir itself (a *fs.PathError with Op "read dir": it
// matches fs.ErrNotExist, fs.ErrPermission…), joined with those of
// temporary files that could not be opened or locked and those fn
// returned; the scan goes on past them.
func Leftovers(dir string, fn func(lo Leftover) error) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return stepErr("read dir", dir, err)
	}
	var errs []error
	for _, de := range ents {
		base, ok := TargetOf(de.Name())
		if !ok || !de.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, de.Name())
		f, err := takeLeftover(path)
		if err != nil {
			errs = append(errs, err)
		}
		if f == nil {
			continue
		}
		if err := fn(Leftover{Path: path, Target: filepath.Join(dir, base), File: f}); err != nil {
			errs = append(errs, err)
		}
		f.Close()
	}
	return errors.Join(errs...)
}

// takeLeftover opens and locks the temporary file at path, or returns nil
// when a live writer holds it or it is gone.
func takeLeftover(path string) (*os.File, error) {
	// O_NOFOLLOW: the entry was a regular file when listed; never follow a
	// symlink put in its place since.
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // renamed into place or removed meanwhile
	}
	if err != nil {
		return nil, stepErr("open", path, err)
	}
	err = flock(f, unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		f.Close()
		return nil, nil // a writer is at work on it
	}
	if err != nil {
		f.Close()
		return nil, stepErr("flock", path, err)
	}
	// Its writer may have renamed it between open and flock: then this is
	// the finished file under its final name, not a leftover.
	mine, err := stillNamed(f)
	if err != nil || !mine {
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("leftover %s: %w", path, err)
		}
		return nil, nil
	}
	return f, nil
}
