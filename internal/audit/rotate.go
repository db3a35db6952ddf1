// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/hermeskill/hermeskilld/internal/atomicfile"
	"github.com/hermeskill/hermeskilld/internal/rotlog"
)

// rotatedData is the data of a typeRotated line. PreviousFile is the old file's name when it
// was rotated; later rotations rename it again (FILE.1 becomes FILE.2).
type rotatedData struct {
	PreviousFile string `json:"previous_file"`
}

// rotated is the name of the n-th newest rotated file.
func (l *Log) rotated(n int) string { return rotlog.Name(l.path, n) }

// rotate moves the file aside (FILE → FILE.1, older ones up by one, the one past Keep
// replaced) and starts a new FILE whose first line, of type "rotated", links to the old file's
// last. The file lock is held, so no other writer sees the moment FILE is missing; a crash in
// that moment is repaired by catchUp, which links an empty FILE to FILE.1.
func (l *Log) rotate() error {
	// The old lines must be on disk before the old file is renamed as complete.
	if err := l.f.Sync(); err != nil {
		return err
	}
	if err := rotlog.Shift(l.path, l.opts.Keep); err != nil {
		return err
	}
	l.f.Close() // synced above and only read from here on
	// Until the new file is open, the next append reopens l.path and links to FILE.1.
	l.f = nil
	// O_EXCL: only writers holding the lock create the file, so an existing one is not ours.
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		return errors.Join(err, f.Close())
	}
	l.f, l.fi, l.size = f, fi, 0
	data, err := marshalData(rotatedData{PreviousFile: filepath.Base(l.rotated(1))})
	if err != nil {
		return err
	}
	line, err := l.next(record{Type: typeRotated, Data: data})
	if err != nil {
		return err
	}
	if err := l.write(line, true); err != nil {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(l.path))
}
