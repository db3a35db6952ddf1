package heartbeat

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ErrUnsafeDir: a socket directory exists but is not private to its owner.
var ErrUnsafeDir = errors.New("socket directory is not a private directory")

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
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR):
		// Refused already; lstat only words the error.
		if fi, lerr := os.Lstat(dir); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symbolic link: %w", dir, ErrUnsafeDir)
		}
		return fmt.Errorf("%s is not a directory: %w", dir, ErrUnsafeDir)
	case err != nil:
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: dir, Err: err}
	}
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
