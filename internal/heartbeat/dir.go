// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/sockpath"
)

// ErrUnsafeDir: a socket directory exists but is not private to its owner.
var ErrUnsafeDir = errors.New("socket directory is not a private directory")

// SocketName is the heartbeat socket's name inside an agent's socket
// directory.
const SocketName = "notify.sock"

// PrepareDir makes dir a private directory (0700) owned by uid/gid (-1 keeps
// ours), creating it if needed. An existing dir must be a real directory
// (not a symlink) already owned by that uid or by us, so a directory planted
// in a shared place such as /tmp cannot capture the agent's socket.
//
// The checks and changes go through one descriptor opened with O_NOFOLLOW,
// so the directory cannot be swapped for a symlink between check and chmod.
//
// Errors: ErrUnsafeDir (wrapped, naming the reason: a symlink, not a
// directory, or owned by another uid), or the *os.PathError of mkdir, open,
// chmod or chown.
func PrepareDir(dir string, uid, gid int) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	fd, st, err := openDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	euid := os.Geteuid()
	want := uid
	if want < 0 {
		want = euid
	}
	owner := int(st.Uid)
	if owner != want && owner != euid {
		return fmt.Errorf("%s is owned by uid %d, not %d: %w", dir, owner, want, ErrUnsafeDir)
	}
	// chmod before chown: the directory is never the agent's while it is
	// still open to others.
	if err := unix.Fchmod(fd, 0o700); err != nil {
		return &os.PathError{Op: "chmod", Path: dir, Err: err}
	}
	if owner != want || gid >= 0 && int(st.Gid) != gid {
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return &os.PathError{Op: "chown", Path: dir, Err: err}
		}
	}
	return nil
}

// SupervisorDir returns the directory for the socket of one foreground
// run of agent id: "ID.PID" (PID is ours) in supervise's own directory,
// "supervise", inside a runtime directory: $XDG_RUNTIME_DIR/hermeskill,
// else /run/hermeskill for root, else hermeskill-UID in the temporary
// directory.
//
// The runtime directory may be shared: /run/hermeskill is also the
// daemon's, where its control socket lives for the hermeskill groups. It
// is created (0755) when missing, never changed: it must be a real
// directory owned by us or root and not writable by others unless sticky
// (a directory planted by someone else is refused, not used). Only
// supervise's own subdirectory is made private with PrepareDir, and the
// run directories that runs killed by SIGKILL left in it are removed. The
// run directory itself is not created: PrepareDir does that for the
// socket's owner.
//
// Errors: the *os.PathError of creating the runtime directory, ErrUnsafeDir
// (wrapped) for an unsafe one, PrepareDir's errors, or sockpath.ErrTooLong
// (wrapped) when the socket's path would not fit in sun_path.
func SupervisorDir(id string) (string, error) {
	runtime := supervisorBase(os.Getenv("XDG_RUNTIME_DIR"), os.Geteuid(), os.TempDir())
	if err := os.MkdirAll(runtime, 0o755); err != nil {
		return "", err
	}
	if err := checkSharedDir(runtime); err != nil {
		return "", err
	}
	base := filepath.Join(runtime, supervisorSubdir)
	if err := PrepareDir(base, -1, -1); err != nil {
		return "", err
	}
	removeStaleRunDirs(base, os.Getpid(), processExists)
	dir := filepath.Join(base, id+"."+strconv.Itoa(os.Getpid()))
	if err := checkSocketPaths(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// SupervisorControlSocket is the control socket of the foreground run
// (supervise) of agent id, for this user: "ID.control.sock" in
// supervise's own directory (see SupervisorDir), which only this user can
// enter.
func SupervisorControlSocket(id string) string {
	return filepath.Join(supervisorBase(os.Getenv("XDG_RUNTIME_DIR"), os.Geteuid(), os.TempDir()), supervisorSubdir,
		id+controlSocketSuffix)
}

// controlSocketSuffix ends the name of a supervise run's control socket.
const controlSocketSuffix = ".control.sock"

// supervisorSubdir is supervise's own directory inside the runtime
// directory.
const supervisorSubdir = "supervise"

// userSubdir is the directory, beside supervise's own in the runtime
// directory, of the socket directories of agents that run as another
// user: ours, mode 0711, so that each agent reaches its own directory
// (0700, its user's, made by PrepareDir) by name and lists none.
const userSubdir = "supervise-as-user"

// UserSupervisorDir is the socket directory, instead of SupervisorDir's
// dir, of a run whose agent is another user: the same name ("ID.PID") in
// the runtime directory's "supervise-as-user", which is created (0711)
// when missing and must be a real directory of ours. As in PrepareDir the
// check and the chmod go through one descriptor opened with O_NOFOLLOW. The
// run directories that SIGKILLed runs left in it are removed. Whether the
// agent's user may reach it through every directory above is the caller's
// to check (config.CheckEnter on the returned base).
//
// Errors: those of PrepareDir for the base, or sockpath.ErrTooLong
// (wrapped).
func UserSupervisorDir(dir string) (run, base string, err error) {
	base = filepath.Join(filepath.Dir(filepath.Dir(dir)), userSubdir)
	if err := os.Mkdir(base, 0o711); err != nil && !errors.Is(err, os.ErrExist) {
		return "", "", err
	}
	fd, st, err := openDir(base)
	if err != nil {
		return "", "", err
	}
	defer unix.Close(fd)
	if owner := int(st.Uid); owner != os.Geteuid() {
		return "", "", fmt.Errorf("%s is owned by uid %d: %w", base, owner, ErrUnsafeDir)
	}
	if err := unix.Fchmod(fd, 0o711); err != nil {
		return "", "", &os.PathError{Op: "chmod", Path: base, Err: err}
	}
	removeStaleRunDirs(base, os.Getpid(), processExists)
	run = filepath.Join(base, filepath.Base(dir))
	if err := checkSocketPaths(run); err != nil {
		return "", "", err
	}
	return run, base, nil
}

// checkSocketPaths checks that both sockets of a run directory dir fit in
// sun_path.
func checkSocketPaths(dir string) error {
	for _, name := range []string{SocketName, StreamName} {
		if err := sockpath.Check(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// openDir opens dir itself, never a symbolic link in its place, and
// stats it through the descriptor.
func openDir(dir string) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR):
		// Refused already; lstat only words the error.
		if fi, lerr := os.Lstat(dir); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			return -1, st, fmt.Errorf("%s is a symbolic link: %w", dir, ErrUnsafeDir)
		}
		return -1, st, fmt.Errorf("%s is not a directory: %w", dir, ErrUnsafeDir)
	case err != nil:
		return -1, st, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, &os.PathError{Op: "fstat", Path: dir, Err: err}
	}
	return fd, st, nil
}

// checkSharedDir checks, without changing it, that dir may hold our
// private directory: a real directory (not a symlink), owned by us or
// root, that no one else can rename entries of (not writable by group or
// others, unless sticky).
func checkSharedDir(dir string) error {
	fd, st, err := openDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if owner := int(st.Uid); owner != os.Geteuid() && owner != 0 {
		return fmt.Errorf("%s is owned by uid %d, neither us nor root: %w", dir, owner, ErrUnsafeDir)
	}
	if st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
		return fmt.Errorf("%s is writable by others (mode %04o) and not sticky: %w", dir, st.Mode&0o7777, ErrUnsafeDir)
	}
	return nil
}

// supervisorBase picks the runtime directory of SupervisorDir.
func supervisorBase(xdgRuntime string, euid int, tmp string) string {
	switch {
	case xdgRuntime != "":
		return filepath.Join(xdgRuntime, "hermeskill")
	case euid == 0:
		return "/run/hermeskill"
	default:
		return filepath.Join(tmp, "hermeskill-"+strconv.Itoa(euid))
	}
}

// removeStaleRunDirs removes the run directories ("ID.PID") in base whose
// run is gone: the pid is not self and does not exist, and the directory
// holds nothing but its sockets (SocketName, StreamName). A pid that exists is left alone, even
// when it was reused by another process: the directory then waits for a
// later run.
func removeStaleRunDirs(base string, self int, exists func(pid int) bool) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		i := strings.LastIndexByte(name, '.')
		if !e.IsDir() || i < 0 {
			continue
		}
		pid, err := strconv.Atoi(name[i+1:])
		if err != nil || pid <= 0 || pid == self || exists(pid) {
			continue
		}
		dir := filepath.Join(base, name)
		if sockets, ok := onlySockets(dir); ok && !anyListening(dir, sockets) {
			for _, name := range sockets {
				os.Remove(filepath.Join(dir, name))
			}
			os.Remove(dir)
		}
	}
}

// socketTypes are the sockets a run directory may hold, by name.
var socketTypes = map[string]int{SocketName: unix.SOCK_DGRAM, StreamName: unix.SOCK_STREAM}

// onlySockets lists the entries of the run directory dir, and reports
// whether they are all of socketTypes' names.
func onlySockets(dir string) ([]string, bool) {
	inside, err := os.ReadDir(dir)
	if err != nil {
		return nil, false
	}
	names := make([]string, 0, len(inside))
	for _, e := range inside {
		if _, ok := socketTypes[e.Name()]; !ok {
			return nil, false
		}
		names = append(names, e.Name())
	}
	return names, true
}

// anyListening reports whether one of the sockets of dir is live. The pid
// says gone, but a hermeskilld in another PID namespace sharing this
// directory (a container's, an unshare'd one) has pids we cannot see: a
// socket someone still listens on is live.
func anyListening(dir string, sockets []string) bool {
	for _, name := range sockets {
		if listening(filepath.Join(dir, name), socketTypes[name]) {
			return true
		}
	}
	return false
}

// listening reports whether a socket of type sotype is bound at path: a
// connect succeeds (a file that is no socket, or a socket nobody holds,
// refuses).
func listening(path string, sotype int) bool {
	fd, err := unix.Socket(unix.AF_UNIX, sotype|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return true // cannot tell: keep it
	}
	defer unix.Close(fd)
	return unix.Connect(fd, &unix.SockaddrUnix{Name: path}) == nil
}

// processExists reports whether pid has an entry in /proc, zombies
// included.
func processExists(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}
