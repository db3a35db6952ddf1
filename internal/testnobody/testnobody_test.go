// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package testnobody

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestDir(t *testing.T) {
	dir := Dir(t)
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o755 {
		t.Errorf("mode %04o, want 0755", fi.Mode().Perm())
	}
	if err := reachable(dir); err != nil {
		t.Errorf("Dir gave %s: %v", dir, err)
	}

	// A private $TMPDIR (mktemp -d) is passed over for the next candidate.
	private := filepath.Join(dir, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	if got, err := firstReachable([]string{private, dir}, false); got != dir {
		t.Errorf("firstReachable(private, reachable) = %q, %v; want %q", got, err, dir)
	}
	// With none, the skip message says what is missing and why.
	_, err = firstReachable([]string{filepath.Join(private, "."), filepath.Join(dir, "missing")}, false)
	want := "no directory uid 65534 can reach to make a directory in: " + private + " is mode 0700, owner "
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "missing: no such file or directory") {
		t.Errorf("firstReachable(none) = %v, want an error starting %q and naming the missing one", err, want)
	}
}

// TestExecutable runs the copy as uid 65534, for real (root only).
func TestExecutable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs the copy as uid 65534")
	}
	cmd := exec.Command(Executable(t), "-test.run=^$")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: Credential()}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the copy as uid %d: %v\n%s", UID, err, out)
	}
}
