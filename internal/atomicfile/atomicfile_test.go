// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package atomicfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/testnobody"
)

// names lists the entries of dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestWriteFileContentAndMode(t *testing.T) {
	// Not parallel: the umask is process-wide.
	for _, umask := range []int{0o022, 0o077, 0o000} {
		for _, perm := range []os.FileMode{0o600, 0o640, 0o644, 0o400, 0o755, 0o666, 0} {
			t.Run(fmt.Sprintf("umask%04o/perm%04o", umask, perm), func(t *testing.T) {
				old := syscall.Umask(umask)
				defer syscall.Umask(old)
				dir := t.TempDir()
				path := filepath.Join(dir, "f.json")
				data := []byte(`{"pid": 4242}` + "\n")

				require.NoError(t, WriteFile(path, data, perm))

				fi, err := os.Stat(path)
				require.NoError(t, err)
				assert.Equal(t, perm, fi.Mode(), "mode must be exactly perm, whatever the umask")
				require.NoError(t, os.Chmod(path, 0o600)) // readable when not root
				got, err := os.ReadFile(path)
				require.NoError(t, err)
				assert.Equal(t, data, got)
				assert.Equal(t, []string{"f.json"}, names(t, dir), "no temporary file left")
			})
		}
	}
}

func TestWriteFileEmptyAndRelative(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	require.NoError(t, WriteFile("empty", nil, 0o640))
	got, err := os.ReadFile(filepath.Join(dir, "empty"))
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.Equal(t, []string{"empty"}, names(t, dir))
}

func TestWriteFileReplacesExisting(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cert.json")
	require.NoError(t, os.WriteFile(path, []byte("old content, longer than the new one"), 0o600))
	old, err := os.Open(path)
	require.NoError(t, err)
	defer old.Close()

	require.NoError(t, WriteFile(path, []byte("new"), 0o640))

	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "new", string(got))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), fi.Mode(), "the old file's mode is not carried over")
	// Replaced, not rewritten in place: a reader holding the old file still
	// reads the complete old content.
	oldData, err := io.ReadAll(old)
	require.NoError(t, err)
	assert.Equal(t, "old content, longer than the new one", string(oldData))
	assert.Equal(t, []string{"cert.json"}, names(t, dir))
}

func TestWriteFileReplacesSymlinkNotTarget(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	require.NoError(t, os.WriteFile(target, []byte("target"), 0o600))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(target, link))

	require.NoError(t, WriteFile(link, []byte("new"), 0o640))

	got, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "target", string(got), "the symlink's target is untouched")
	fi, err := os.Lstat(link)
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular(), "the symlink itself was replaced")
}

// TestWriteFileReadersSeeOldOrNew: a reader racing with replacements sees a
// complete old or complete new content, never a missing, empty or mixed file.
func TestWriteFileReadersSeeOldOrNew(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	a := bytes.Repeat([]byte{'a'}, 64<<10)
	b := bytes.Repeat([]byte{'b'}, 32<<10)
	require.NoError(t, WriteFile(path, a, 0o640))

	stop := make(chan struct{})
	done := make(chan error)
	var reads int
	go func() {
		for {
			select {
			case <-stop:
				close(done)
				return
			default:
			}
			got, err := os.ReadFile(path)
			if err != nil {
				done <- err
				return
			}
			if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
				done <- fmt.Errorf("torn read: %d bytes", len(got))
				return
			}
			reads++
		}
	}()
	for i := range 100 {
		data := a
		if i%2 == 0 {
			data = b
		}
		if err := WriteFile(path, data, 0o640); err != nil {
			close(stop)
			<-done
			require.NoError(t, err)
		}
	}
	close(stop)
	require.NoError(t, <-done)
	t.Logf("%d concurrent reads, all complete", reads)
	assert.Equal(t, []string{"f"}, names(t, dir))
}

func TestWriteFileConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	const n = 16
	want := map[string]bool{}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		data := strings.Repeat(strconv.Itoa(i), 1000)
		want[data] = true
		wg.Go(func() { errs[i] = WriteFile(path, []byte(data), 0o640) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, want[string(got)], "the last rename wins whole")
	assert.Equal(t, []string{"f"}, names(t, dir))
}

func TestWriteFileLongName(t *testing.T) {
	dir := t.TempDir()
	base := strings.Repeat("n", 255) // NAME_MAX: the temporary name must be shortened
	require.NoError(t, WriteFile(filepath.Join(dir, base), []byte("x"), 0o640))
	assert.Equal(t, []string{base}, names(t, dir))
}

// TestWriteFileRenameFails: everything up to rename succeeds, rename fails
// (the destination is a non-empty directory): the temporary file is removed.
func TestWriteFileRenameFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "d")
	require.NoError(t, os.MkdirAll(filepath.Join(path, "child"), 0o755))

	err := WriteFile(path, []byte("data"), 0o640)

	var le *os.LinkError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "rename", le.Op)
	assert.Equal(t, []string{"d"}, names(t, dir), "no temporary file left")
}

// TestWriteFileWriteFails makes write(2) itself fail, for real: a helper
// process writes 1 MiB under RLIMIT_FSIZE = 4 KiB and gets EFBIG after a
// partial write. The partial temporary file must be gone.
func TestWriteFileWriteFails(t *testing.T) {
	dir := t.TempDir()
	r := runHelper(t, os.Args[0], nil,
		"HK_DIR="+dir, "HK_PATH="+filepath.Join(dir, "big"), "HK_SIZE=1048576", "HK_FSIZE=4096")

	assert.True(t, r.EFBIG, "want EFBIG, got %q", r.Err)
	assert.Equal(t, "write", r.Op, r.Err)
	assert.Empty(t, names(t, dir), "no temporary file left after a failing write")
}

func TestWriteFileParentIsAFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))

	err := WriteFile(filepath.Join(file, "cert.json"), []byte("x"), 0o640)

	require.ErrorIs(t, err, syscall.ENOTDIR)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "create temp", pe.Op)
	assert.True(t, strings.HasPrefix(err.Error(), "create temp "+file+"/."), err.Error())
	assert.Equal(t, []string{"file"}, names(t, dir))
}

func TestWriteFileMissingDir(t *testing.T) {
	err := WriteFile(filepath.Join(t.TempDir(), "no", "such", "f"), []byte("x"), 0o640)
	require.ErrorIs(t, err, fs.ErrNotExist)
}

// TestWriteFileUnwritableDir: a directory the caller may search but not
// write to gives an error matching fs.ErrPermission (EACCES). Root ignores
// permission bits, so as root the write is done for real by the test binary
// re-executed as uid/gid 65534 (nobody) against a root-owned 0755 directory.
func TestWriteFileUnwritableDir(t *testing.T) {
	if os.Geteuid() != 0 {
		dir := t.TempDir()
		require.NoError(t, os.Chmod(dir, 0o555))
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		err := WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o640)
		require.ErrorIs(t, err, fs.ErrPermission)
		return
	}

	// The test binary lives in go test's private work directory, and
	// $TMPDIR may be private too: nobody gets a copy of the binary, and a
	// root-owned 0755 directory, where it can reach them.
	bin := testnobody.Executable(t)
	dir := testnobody.Dir(t)
	r := runHelper(t, bin, testnobody.Credential(), "HK_DIR="+dir, "HK_PATH="+filepath.Join(dir, "cert.json"), "HK_SIZE=10")

	assert.Equal(t, testnobody.UID, r.Euid)
	assert.Empty(t, r.StatErr, "the directory must be searchable, so that EACCES is about writing")
	assert.True(t, r.Permission, "want an error matching fs.ErrPermission, got %q", r.Err)
	assert.Equal(t, "create temp", r.Op, r.Err)
	assert.Empty(t, names(t, dir))
}

// runHelper runs the "write" helper of helper_test.go from binary bin,
// optionally as another user, and returns what it reported.
func runHelper(t *testing.T, bin string, cred *syscall.Credential, env ...string) helperResult {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{helperEnv + "=write"}, env...)...)
	cmd.Stderr = os.Stderr
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	out, err := cmd.Output()
	if cred != nil && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL)) {
		t.Skipf("cannot run a process as uid %d here: %v", cred.Uid, err)
	}
	require.NoError(t, err)
	var r helperResult
	require.NoError(t, json.Unmarshal(out, &r), "helper output %q", out)
	return r
}

func TestSyncDir(t *testing.T) {
	require.NoError(t, SyncDir(t.TempDir()))

	missing := filepath.Join(t.TempDir(), "missing")
	err := SyncDir(missing)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.Equal(t, "open dir "+missing+": no such file or directory", err.Error())
}

func BenchmarkWriteFile(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "f.json")
	data := bytes.Repeat([]byte("x"), 8<<10)
	for b.Loop() {
		if err := WriteFile(path, data, 0o640); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/op")
}
