// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package control

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/sockpath"
)

// SocketMode is the control socket's mode: every local user may connect,
// and every request is then authorised by the caller's kernel-verified
// credentials (SO_PEERCRED): root and the operators group may change
// things, the read group may read, everyone else gets 403.
// File permissions cannot express "read group or operators group", and a
// refusal at connect time would not say which group to join.
const SocketMode os.FileMode = 0o666

// staleDialTimeout bounds the connect used to tell a live socket from a
// stale one.
const staleDialTimeout = time.Second

// socketFile is the listening control socket and the lock that makes this
// process its only owner.
type socketFile struct {
	path     string
	ln       *net.UnixListener
	lock     *os.File // path+".lock", flock(2)ed while we own path
	dev, ino uint64   // of the socket we bound: removed only if still ours
}

// listenSocket creates the control socket at path, mode SocketMode, group
// gid (-1: leave the group alone).
//
// Two daemons must never share a path, and a crashed one must not block the
// next: an exclusive flock(2) on path+".lock" is taken first (it dies with
// its holder, so it is never stale), then a socket left at path is
// connected to: ECONNREFUSED means nobody listens (stale: removed), a
// connection means a live daemon (ErrSocketInUse). Anything at path that
// is not a socket is never removed.
//
// The mode is umask-safe without touching the process-wide umask: the
// socket inode is fchmod(2)ed before bind(2), which creates the file with
// that mode less the umask (unix(7): "the socket file's mode is taken from
// the socket inode"), so it is never wider than SocketMode; chown and chmod
// then set the group and the exact mode before listen(2) accepts anybody.
func listenSocket(path string, gid int) (_ *socketFile, err error) {
	if path == "" {
		return nil, errors.New("control socket: no path")
	}
	if len(path) > sockpath.Max {
		return nil, fmt.Errorf("control socket %s: path is %d bytes, a Unix socket path is at most %d", path, len(path), sockpath.Max)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	sf := &socketFile{path: path}
	defer func() {
		if err != nil {
			sf.close()
		}
	}()
	if sf.lock, err = lockFile(path + ".lock"); err != nil {
		return nil, err
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}

	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", os.NewSyscallError("socket", err))
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close() // net.FileListener dups it
	if err := unix.Fchmod(fd, uint32(SocketMode)); err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, os.NewSyscallError("fchmod", err))
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, os.NewSyscallError("bind", err))
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, os.NewSyscallError("lstat", err))
	}
	sf.dev, sf.ino = st.Dev, st.Ino
	if gid >= 0 {
		if err := os.Lchown(path, -1, gid); err != nil {
			return nil, fmt.Errorf("control socket: %w", err)
		}
	}
	// Restores the group bits a umask may have taken away (never widens
	// beyond SocketMode). The path is ours: the lock is held and the
	// runtime directory is root's.
	if err := os.Chmod(path, SocketMode); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, os.NewSyscallError("listen", err))
	}
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	sf.ln = ln.(*net.UnixListener)
	return sf, nil
}

// lockFile takes an exclusive, non-blocking flock on path (created 0600).
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("control socket lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is locked by another process", ErrSocketInUse, path)
		}
		return nil, fmt.Errorf("control socket lock %s: %w", path, os.NewSyscallError("flock", err))
	}
	return f, nil
}

// removeStale removes a socket at path that nobody listens on.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("control socket %s: exists and is not a socket (%s); not removing it", path, fi.Mode().Type())
	}
	c, err := net.DialTimeout("unix", path, staleDialTimeout)
	if err == nil {
		c.Close()
		return fmt.Errorf("%w: %s accepts connections", ErrSocketInUse, path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("control socket: checking the existing socket: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("control socket: removing the stale socket: %w", err)
	}
	return nil
}

// close closes the listener, removes the socket if it is still the one we
// bound, and releases the lock (the lock file stays: removing it would let
// two daemons lock two different files).
func (sf *socketFile) close() {
	if sf.ln != nil {
		sf.ln.Close()
	}
	if sf.ino != 0 {
		var st unix.Stat_t
		if unix.Lstat(sf.path, &st) == nil && st.Dev == sf.dev && st.Ino == sf.ino {
			os.Remove(sf.path)
		}
		sf.ino = 0
	}
	if sf.lock != nil {
		sf.lock.Close() // releases the flock
		sf.lock = nil
	}
}
