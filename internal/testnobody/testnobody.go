// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package testnobody prepares what a test running as root needs to run a
// process as another user, uid and gid 65534 (nobody): a directory that
// user can reach, and a copy of the test binary it may execute. Root
// bypasses permission bits, so a refusal (EACCES, a 403 by SO_PEERCRED)
// is only seen by a real other user. It is imported only by tests.
//
// Reaching a path needs search permission on every directory above it
// (path_resolution(7)). go test builds the binary in a private work
// directory, and $TMPDIR may itself be private (`mktemp -d` makes a 0700
// directory), so the directory is made under the first of $TMPDIR, /tmp,
// /var/tmp and /dev/shm that uid 65534 can reach.
package testnobody

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// UID and GID are nobody's.
const (
	UID = 65534
	GID = 65534
)

// Credential runs a process as UID and GID, with no supplementary groups.
func Credential() *syscall.Credential {
	return &syscall.Credential{Uid: UID, Gid: GID, Groups: []uint32{}}
}

// Dir returns a new empty directory of mode 0755 that uid 65534 can
// reach, removed when the test ends. Its path is short when $TMPDIR's is:
// a Unix socket's path must fit in sun_path (108 bytes). Without any base
// uid 65534 can reach, the test is skipped with each base and why not.
func Dir(t testing.TB) string {
	t.Helper()
	return dirIn(t, base(t, false))
}

// Executable returns a copy of the running test binary, mode 0755, in a
// directory of its own that uid 65534 can reach, on a file system not
// mounted noexec.
func Executable(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("the test binary: %v", err)
	}
	bin := filepath.Join(dirIn(t, base(t, true)), filepath.Base(exe))
	if err := copyFile(bin, exe); err != nil {
		t.Fatalf("copy the test binary: %v", err)
	}
	return bin
}

// base is the first of $TMPDIR, /tmp, /var/tmp and /dev/shm that uid
// 65534 can reach (and, with exec, run programs from); without one the
// test is skipped.
func base(t testing.TB, exec bool) string {
	t.Helper()
	dir, err := firstReachable([]string{os.TempDir(), "/tmp", "/var/tmp", "/dev/shm"}, exec)
	if err != nil {
		t.Skip(err)
	}
	return dir
}

// firstReachable is the first of candidates uid 65534 can reach (and,
// with exec, run programs from); the error says why each is not.
func firstReachable(candidates []string, exec bool) (string, error) {
	var why []string
	seen := map[string]bool{}
	for _, dir := range candidates {
		if seen[dir] {
			continue
		}
		seen[dir] = true
		err := reachable(dir)
		if err == nil && exec {
			err = execAllowed(dir)
		}
		if err == nil {
			return dir, nil
		}
		why = append(why, err.Error())
	}
	what := "make a directory in"
	if exec {
		what = "copy the test binary to"
	}
	return "", fmt.Errorf("no directory uid %d can reach to %s: %s", UID, what, strings.Join(why, "; "))
}

// dirIn makes a new 0755 directory in base, removed at the end of the test.
func dirIn(t testing.TB, base string) string {
	t.Helper()
	dir, err := os.MkdirTemp(base, "hk65534-")
	if err != nil {
		t.Fatalf("directory for uid %d: %v", UID, err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// MkdirTemp makes it 0700, and the umask may narrow a Mkdir mode.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("directory for uid %d: %v", UID, err)
	}
	return dir
}

// reachable reports whether uid 65534 can search dir and every directory
// above it, by their owner, group and mode as the kernel checks them (the
// owner's bits for the owner, else the group's for the group, else the
// others'). ACLs are not read.
func reachable(dir string) error {
	path, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	path, err = filepath.Abs(path)
	if err != nil {
		return err
	}
	for d := path; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if !searchable(fi) {
			st := fi.Sys().(*syscall.Stat_t)
			return fmt.Errorf("%s is mode %04o, owner %d:%d: uid %d may not search it", d, fi.Mode().Perm(), st.Uid, st.Gid, UID)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

func searchable(fi fs.FileInfo) bool {
	st := fi.Sys().(*syscall.Stat_t)
	perm := fi.Mode().Perm()
	switch {
	case st.Uid == UID:
		return perm&0o100 != 0
	case st.Gid == GID:
		return perm&0o010 != 0
	}
	return perm&0o001 != 0
}

// execAllowed refuses a directory on a file system mounted noexec, where
// execve(2) fails with EACCES whatever the file's mode.
func execAllowed(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	if st.Flags&unix.ST_NOEXEC != 0 {
		return fmt.Errorf("%s: mounted noexec", dir)
	}
	return nil
}

// copyFile copies src to a new file dst of mode 0755.
func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, 0o755) // the umask may have narrowed it
}
