// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package atomicfile writes files atomically and durably: a reader of the
// destination path sees either the old content or the new content, never a
// mix, an empty file or no file, and once WriteFile returns nil the new
// content survives a crash or power loss (as far as the filesystem honours
// fsync).
//
// It owns exactly that and nothing else; hermeskilld uses it for death
// certificates and signing keys. The model is containerd's pkg/atomicfile.
// The sequence and why each step is needed:
//
//   - create the temporary file in the destination directory, because
//     rename(2) cannot cross mount points (EXDEV);
//   - write everything, fchmod, then fsync(2) the file: without it "a
//     zero-length file is a valid and possible outcome after the rename"
//     (Ted Ts'o, as quoted by google/renameio);
//   - rename(2) over the destination: "atomically replaced, so that there is
//     no point at which another process attempting to access newpath will
//     find it missing";
//   - fsync(2) the directory, because fsync of the file "does not
//     necessarily ensure that the entry in the directory containing the file
//     has also reached disk".
//
// A writer that dies between creating the temporary file and renaming it
// leaves the file behind, complete or not. The writer holds flock(2)
// LOCK_EX on it from creation until after the rename, so Leftovers can tell
// such an orphan from a file another process is writing right now: a
// lock is released when its holder dies (flock(2): "the lock is released
// ... when all file descriptors ... have been closed").
//
// See fsync(2) and rename(2): https://man7.org/linux/man-pages/man2/fsync.2.html
// and flock(2): https://man7.org/linux/man-pages/man2/flock.2.html
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Temporary files are named "." + base + "." + 16 hex digits + ".tmp": hidden
// from ls, never matching a reader's "*.json" glob, and recognisably ours.
const (
	tmpPrefix = "."
	tmpSuffix = ".tmp"
	randHex   = 16
	nameMax   = 255 // NAME_MAX of Linux filesystems
	tmpTries  = 100
)

// WriteFile writes data to path atomically and durably, with permission bits
// exactly perm whatever the process umask. An existing file at path is
// replaced (a symlink at path is replaced, not followed); its owner and mode
// are not carried over.
//
// The temporary file is created next to path with O_EXCL|O_CLOEXEC and mode
// 0600, so nobody else can open it while it is being written, and locked
// until it is renamed (see Leftovers); on any error it is removed. Errors are *fs.PathError values whose Op names the step
// that failed ("create temp", "flock", "write", "chmod", "fsync",
// "open dir", "fsync dir") or the *os.LinkError of rename; the errno stays
// matchable, e.g. errors.Is(err, fs.ErrPermission) for an unwritable
// directory or errors.Is(err, syscall.ENOTDIR) when a parent is not a
// directory.
//
// When rename succeeded but the directory could not be synced, the new
// content is in place but may not be durable yet, and the error says so
// ("fsync dir /x: …").
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := writeTemp(dir, filepath.Base(path), data, perm)
	if err != nil {
		return err
	}
	tmp := f.Name()
	// The lock is held across the rename: Leftovers must never see the
	// temporary name unlocked while this writer is alive.
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		f.Close()
		return err // *os.LinkError: "rename OLD NEW: errno"
	}
	// Written and synced already: close can lose nothing (it releases the lock).
	f.Close()
	return SyncDir(dir)
}

// writeTemp creates the temporary file for base in dir, writes data, sets
// perm and fsyncs it, and returns it still open and locked. On error it
// removes it.
func writeTemp(dir, base string, data []byte, perm os.FileMode) (_ *os.File, err error) {
	f, err := createTemp(dir, base)
	if err != nil {
		return nil, err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
			f.Close()
		}
	}()

	n, err := f.Write(data)
	if err == nil && n < len(data) {
		err = io.ErrShortWrite // os.File.Write loops on short writes; defensive
	}
	if err != nil {
		return nil, stepErr("write", tmp, err)
	}
	// fchmod on the descriptor, before fsync: the mode is set on the inode we
	// wrote (a path could have been swapped) and is made durable with it.
	if err := f.Chmod(perm); err != nil {
		return nil, stepErr("chmod", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return nil, stepErr("fsync", tmp, err)
	}
	return f, nil
}

// SyncDir fsyncs directory dir so that entries created, renamed or removed
// in it are durable. Errors are *fs.PathError with Op "open dir" or
// "fsync dir".
//
// EINVAL from fsync is ignored: some filesystems cannot sync a directory
// (PostgreSQL's fsync_fname_ext makes the same exception), and there is
// nothing more durable to be had on them.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return stepErr("open dir", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return stepErr("fsync dir", dir, err)
	}
	return nil
}

// maxBase is the longest base name a temporary name keeps whole: longer
// ones are cut so that the temporary name stays within NAME_MAX.
const maxBase = nameMax - len(tmpPrefix) - 1 - randHex - len(tmpSuffix)

// createTemp creates the temporary file for base in dir and locks it,
// retrying the rare name collision.
func createTemp(dir, base string) (*os.File, error) {
	if len(base) > maxBase {
		base = base[:maxBase]
	}
	var buf [randHex / 2]byte
	for range tmpTries {
		rand.Read(buf[:]) // never returns an error (crypto/rand)
		name := filepath.Join(dir, tmpPrefix+base+"."+hex.EncodeToString(buf[:])+tmpSuffix)
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_CLOEXEC, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, stepErr("create temp", name, err)
		}
		mine, err := lockTemp(f)
		if err != nil {
			os.Remove(name)
			f.Close()
			return nil, stepErr("flock", name, err)
		}
		if mine {
			return f, nil
		}
		f.Close() // Leftovers removed it before the lock was ours: take another name
	}
	return nil, stepErr("create temp", filepath.Join(dir, tmpPrefix+base+".*"+tmpSuffix), fs.ErrExist)
}

// lockTemp takes the writer's lock on the temporary file f has just
// created, and reports whether the file is still at its name. Between
// open(2) and flock(2) a Leftovers scan may have found it unlocked and
// empty, and removed it.
func lockTemp(f *os.File) (bool, error) {
	if err := flock(f, unix.LOCK_EX); err != nil {
		return false, err
	}
	return stillNamed(f)
}

// stillNamed reports whether f is the file its name now points to.
func stillNamed(f *os.File) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	cur, err := os.Lstat(f.Name())
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(fi, cur), nil
}

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			return err
		}
	}
}

// stepErr returns a *fs.PathError naming the step, keeping the errno of err
// and dropping the Op and Path of an *fs.PathError it may already be, so the
// message reads "fsync dir /x: input/output error", not "fsync dir /x: sync
// /x: input/output error".
func stepErr(op, path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &fs.PathError{Op: op, Path: path, Err: err}
}
