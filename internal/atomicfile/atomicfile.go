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
// See fsync(2) and rename(2): https://man7.org/linux/man-pages/man2/fsync.2.html
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
// 0600, so nobody else can open it while it is being written; on any error
// it is removed. Errors are *fs.PathError values whose Op names the step
// that failed ("create temp", "write", "chmod", "fsync", "close",
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
	tmp, err := writeTemp(dir, filepath.Base(path), data, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err // *os.LinkError: "rename OLD NEW: errno"
	}
	return SyncDir(dir)
}

// writeTemp creates the temporary file for base in dir, writes data, sets
// perm and fsyncs and closes it, returning its path. On error it removes it.
func writeTemp(dir, base string, data []byte, perm os.FileMode) (_ string, err error) {
	f, err := createTemp(dir, base)
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close() // a second Close only reports os.ErrClosed
			os.Remove(tmp)
		}
	}()

	n, err := f.Write(data)
	if err == nil && n < len(data) {
		err = io.ErrShortWrite // os.File.Write loops on short writes; defensive
	}
	if err != nil {
		return "", stepErr("write", tmp, err)
	}
	// fchmod on the descriptor, before fsync: the mode is set on the inode we
	// wrote (a path could have been swapped) and is made durable with it.
	if err := f.Chmod(perm); err != nil {
		return "", stepErr("chmod", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return "", stepErr("fsync", tmp, err)
	}
	if err := f.Close(); err != nil {
		return "", stepErr("close", tmp, err)
	}
	return tmp, nil
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

// createTemp creates the temporary file for base in dir, retrying the rare
// name collision.
func createTemp(dir, base string) (*os.File, error) {
	// Keep the temporary name within NAME_MAX even for a long base name.
	if max := nameMax - len(tmpPrefix) - 1 - randHex - len(tmpSuffix); len(base) > max {
		base = base[:max]
	}
	var buf [randHex / 2]byte
	for range tmpTries {
		rand.Read(buf[:]) // never returns an error (crypto/rand)
		name := filepath.Join(dir, tmpPrefix+base+"."+hex.EncodeToString(buf[:])+tmpSuffix)
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_CLOEXEC, 0o600)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, stepErr("create temp", name, err)
		}
	}
	return nil, stepErr("create temp", filepath.Join(dir, tmpPrefix+base+".*"+tmpSuffix), fs.ErrExist)
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
