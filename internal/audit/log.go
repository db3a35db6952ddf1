// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/atomicfile"
)

// Event types. Append accepts any non-empty type: an agent's events are
// named by the supervisor (its Event types), the daemon's by the daemon.
const (
	TypeOperatorRequest = "operator_request" // data carries the caller's "uid"
	typeRotated         = "rotated"          // written by the package: first line after a rotation
)

// Event is what Append writes as one line.
type Event struct {
	Type    string // required
	AgentID string // empty for daemon-level events
	// Data becomes the line's "data" through encoding/json; nil leaves it out. Tool arguments
	// go in as hashes only.
	Data any
	// Sync makes Append fsync the file before it returns.
	Sync bool
}

// Options tune a Log. The zero value appends without rotation and fsyncs only the events that
// ask for it.
type Options struct {
	// SyncEvery fsyncs after every line.
	SyncEvery bool
	// MaxBytes, when positive, rotates the file before a line would take it past MaxBytes.
	MaxBytes int64
	// Keep is how many rotated files are kept, FILE.1 (newest) to FILE.Keep; below 1 means 1.
	Keep int
	// Signer, when set, signs the anchor at every append, and a writer that finds an anchor
	// this key does not verify records it as a mismatch. Every writer of a log should use the
	// same key (certificates are signed with it too).
	Signer Signer
}

// Log appends events to one audit file. Its methods are safe for concurrent use, and other
// Logs, in this process or others, may append to the same file.
type Log struct {
	path string
	opts Options

	mu   sync.Mutex
	lock *os.File    // path+".lock": every writer of the chain holds flock(LOCK_EX) on it
	f    *os.File    // the file at path, O_APPEND; nil once closed or while it must be reopened
	fi   os.FileInfo // f's identity, for os.SameFile
	size int64       // f's size when this Log last saw it; -1 forces a re-read of the tail
	seq  uint64      // seq of f's last line
	prev string      // sha256 of f's last line
	torn int64       // torn bytes cut off and not yet recorded in a line

	anchorF *os.File // path+".anchor", written in place (never O_APPEND: pwrite(2) would append)
	anchor  Anchor   // what anchorF holds, as this Log last wrote or read it; Seq 0 before any line

	head atomic.Pointer[Head] // (seq, prev) published for Head; nil before any line
}

// Open opens the audit log at path, creating it (0640) and its directory (0750) if missing,
// cuts off a torn tail a crash left, and checks the log against its anchor, recording a
// mismatch in a line of its own (see the package comment). It also creates path+".lock", the
// file every writer of the chain locks, and AnchorPath(path). Errors: errCorruptTail, or the
// failing system call's (*fs.PathError, *os.SyscallError).
func Open(path string, opts Options) (*Log, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	lock, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	l := &Log{path: path, opts: opts, lock: lock, size: -1}
	err = l.locked(func() error {
		// Created under the lock, like every change to the chain's files.
		f, err := openCreate(AnchorPath(path), os.O_RDWR)
		if err != nil {
			return err
		}
		l.anchorF = f
		return l.catchUp()
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open audit log %s: %w", path, err), l.Close())
	}
	return l, nil
}

// Append writes ev as the next line of the chain, in one write(2), and fsyncs it when ev.Sync
// or Options.SyncEvery say so. It may rotate the file first. It
// blocks while another writer of the file appends. Errors: errNoType, errClosed, an
// encoding/json error for Data, errCorruptTail, or the failing system call's.
func (l *Log) Append(ev Event) error {
	if ev.Type == "" {
		return errNoType
	}
	data, err := marshalData(ev.Data)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lock == nil {
		return errClosed
	}
	err = l.lockedHeld(func() error {
		if err := l.catchUp(); err != nil {
			return err
		}
		rec := record{Type: ev.Type, AgentID: ev.AgentID, Data: data}
		line, err := l.next(rec)
		if err != nil {
			return err
		}
		if l.opts.MaxBytes > 0 && l.size > 0 && l.size+int64(len(line)) > l.opts.MaxBytes {
			if err := l.rotate(); err != nil {
				return err
			}
			if line, err = l.next(rec); err != nil {
				return err
			}
		}
		return l.write(line, ev.Sync || l.opts.SyncEvery)
	})
	if err != nil {
		return fmt.Errorf("audit log %s: %w", l.path, err)
	}
	return nil
}

// Head returns the chain's head as this Log last saw it: the seq and sha256 of the last line
// it wrote or found at the end of the file (another process's later appends show once this
// Log appends again). ok is false while the log has no line. It never blocks: it reads a
// snapshot published after each append, so a caller may ask while an append waits on the disk.
func (l *Log) Head() (h Head, ok bool) {
	if p := l.head.Load(); p != nil {
		return *p, true
	}
	return Head{}, false
}

// Close closes the log. Further Appends return errClosed; Close itself may be called again.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	if l.f != nil {
		errs = append(errs, l.f.Close())
		l.f = nil
	}
	if l.anchorF != nil {
		errs = append(errs, l.anchorF.Close())
		l.anchorF = nil
	}
	if l.lock != nil {
		errs = append(errs, l.lock.Close())
		l.lock = nil
	}
	return errors.Join(errs...)
}

// locked runs fn under l.mu and the file lock.
func (l *Log) locked(fn func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lockedHeld(fn)
}

// lockedHeld runs fn under the file lock; l.mu is held.
func (l *Log) lockedHeld(fn func() error) (err error) {
	if err := flock(l.lock, unix.LOCK_EX); err != nil {
		return err
	}
	defer func() {
		if uerr := flock(l.lock, unix.LOCK_UN); uerr != nil && err == nil {
			err = uerr
		}
	}()
	return fn()
}

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			return os.NewSyscallError("flock", err) // nil stays nil
		}
	}
}

// catchUp makes l.f the file now at l.path and l.seq, l.prev its last line, after whatever
// other writers did since this Log last looked: appended, rotated, or died leaving a torn tail
// or a line past the anchor; then it reconciles the anchor with that. The file lock is held.
func (l *Log) catchUp() error {
	fi, err := l.current()
	if err != nil {
		return err
	}
	if fi.Size() == l.size {
		return nil
	}
	t, err := scanTail(l.f, fi.Size())
	if err != nil {
		return err
	}
	if t.end < fi.Size() {
		if err := l.f.Truncate(t.end); err != nil {
			return err
		}
		l.torn += fi.Size() - t.end
	}
	l.size = t.end
	if t.last != nil {
		l.setTail(t.link.seq, hashLine(t.last))
	} else {
		// An empty file starts a fresh chain, unless a crash between renaming it to FILE.1 and
		// writing the "rotated" line left FILE.1 holding the chain's end.
		l.setTail(0, zeroHash)
		if err := l.linkToRotated(); err != nil {
			return err
		}
	}
	return l.reconcile()
}

// setTail records seq and prev as the chain's last line, and publishes them for Head.
func (l *Log) setTail(seq uint64, prev string) {
	l.seq, l.prev = seq, prev
	if seq == 0 {
		l.head.Store(nil)
		return
	}
	l.head.Store(&Head{Seq: seq, SHA256: prev})
}

// linkToRotated continues the chain from the last good line of FILE.1, if there is one.
func (l *Log) linkToRotated() error {
	old, err := os.Open(l.rotated(1))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer old.Close()
	fi, err := old.Stat()
	if err != nil {
		return err
	}
	t, err := scanTail(old, fi.Size())
	if err != nil || t.last == nil {
		return err
	}
	l.setTail(t.link.seq, hashLine(t.last))
	return nil
}

// current returns the file now at l.path, making it l.f: it (re)opens the file when this Log
// has none or another writer rotated the one it has. One stat(2) in the usual case.
func (l *Log) current() (os.FileInfo, error) {
	if l.f != nil {
		cur, err := os.Stat(l.path)
		if err == nil && os.SameFile(cur, l.fi) {
			return cur, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		l.f.Close() // read-only use from here on; nothing buffered to lose
		l.f = nil
	}
	f, err := openAppend(l.path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	l.f, l.fi, l.size = f, fi, -1
	return fi, nil
}

// openAppend opens path for appending, creating it 0640 and, if it did, fsyncing its
// directory so the file outlives a power loss.
func openAppend(path string) (*os.File, error) {
	return openCreate(path, os.O_RDWR|os.O_APPEND)
}

// openCreate opens path with flags, creating it 0640 and, if it did, fsyncing its directory.
func openCreate(path string, flags int) (*os.File, error) {
	flags |= os.O_CREATE
	f, err := os.OpenFile(path, flags|os.O_EXCL, 0o640)
	if errors.Is(err, fs.ErrExist) {
		return os.OpenFile(path, flags, 0o640)
	}
	if err != nil {
		return nil, err
	}
	if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}

// next returns rec as the line that follows l's last line.
func (l *Log) next(rec record) ([]byte, error) {
	rec.Seq = l.seq + 1
	rec.Time = formatTime(time.Now())
	rec.TornBytes = l.torn
	rec.PrevSHA256 = l.prev
	return encodeLine(rec)
}

// write appends line with a single Write: one write(2) in the normal case, then updates the
// anchor. A short write (disk full) is cut back off so the chain stays whole.
func (l *Log) write(line []byte, sync bool) error {
	if _, err := l.f.Write(line); err != nil {
		if terr := l.f.Truncate(l.size); terr != nil {
			l.size = -1 // the next append re-reads the tail and cuts it there
		}
		return err
	}
	l.advance(line)
	var err error
	if sync {
		// On failure the line is written but maybe not durable; the chain is intact.
		err = l.f.Sync()
	}
	return errors.Join(err, l.writeAnchor(sync))
}

// advance records that line is now the file's last line.
func (l *Log) advance(line []byte) {
	if l.size == 0 { // the file's first line: where its anchor says it starts
		l.anchor.FirstSeq, l.anchor.FirstPrev = l.seq+1, l.prev
	}
	l.size += int64(len(line))
	l.setTail(l.seq+1, hashLine(line[:len(line)-1]))
	l.anchor.Head = Head{Seq: l.seq, SHA256: l.prev}
	l.torn = 0
}

// writeAnchor writes l.anchor, signed when there is a key, over the anchor file in one
// pwrite(2). It comes after the line it names: a writer killed in between leaves one line
// past the anchor, which the next writer finds and records (reconcile). With sync it is
// fdatasync(2)ed, as durable as the line. The file lock is held.
func (l *Log) writeAnchor(sync bool) error {
	a := l.anchor
	a.Signature = nil
	if l.opts.Signer != nil {
		a = sign(a, l.opts.Signer)
	}
	buf, err := encodeAnchor(a)
	if err == nil {
		_, err = l.anchorF.WriteAt(buf, 0)
	}
	if err == nil && sync {
		err = fdatasync(l.anchorF)
	}
	if err != nil {
		// The anchor may now lag the log: the next append re-reads both (and records it).
		l.size = -1
		return err
	}
	l.anchor = a
	return nil
}

// fdatasync flushes f's data: after its first write an anchor file keeps its length, so no
// metadata is needed to read it back (fdatasync(2)).
func fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return os.NewSyscallError("fdatasync", err) // nil stays nil
		}
	}
}
