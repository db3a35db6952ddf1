// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat_test

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/heartbeat"
	"github.com/hermeskill/hermeskilld/internal/sockpath"
)

func TestSupervisorBase(t *testing.T) {
	assert.Equal(t, "/run/user/1000/hermeskill", heartbeat.SupervisorBase("/run/user/1000", 1000, "/tmp"))
	assert.Equal(t, "/run/user/0/hermeskill", heartbeat.SupervisorBase("/run/user/0", 0, "/tmp"), "XDG_RUNTIME_DIR wins, even for root")
	assert.Equal(t, "/run/hermeskill", heartbeat.SupervisorBase("", 0, "/tmp"))
	assert.Equal(t, "/tmp/hermeskill-1000", heartbeat.SupervisorBase("", 1000, "/tmp"))
}

// A run directory is removed only when its run is gone and it holds
// nothing but its sockets.
func TestRemoveStaleRunDirs(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, files ...string) string {
		dir := filepath.Join(base, name)
		require.NoError(t, os.Mkdir(dir, 0o700))
		for _, f := range files {
			require.NoError(t, os.WriteFile(filepath.Join(dir, f), nil, 0o600))
		}
		return dir
	}
	const self, live = 100, 200 // and 300, 301 are gone
	gone := []string{mk("bot.300", heartbeat.SocketName), mk("my.bot.300"), mk("other.301", heartbeat.SocketName),
		mk("both.300", heartbeat.SocketName, heartbeat.StreamName), mk("stream.301", heartbeat.StreamName)}
	kept := []string{
		mk("bot.100", heartbeat.SocketName),          // ours
		mk("bot.200", heartbeat.SocketName),          // its run is alive
		mk("busy.300", heartbeat.SocketName, "core"), // holds more than its socket
		mk("odd.300", "notes"),                       // holds something else
		mk("noid"),                                   // no pid
		mk("bot.x"),                                  // no pid
		mk("bot.-3"),                                 // no pid
	}
	require.NoError(t, os.WriteFile(filepath.Join(base, "file.300"), nil, 0o600))
	kept = append(kept, filepath.Join(base, "file.300")) // not a directory
	// A run whose pid we cannot see (another PID namespace) but whose
	// socket is listening is alive.
	other := mk("elsewhere.302")
	bound, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(other, heartbeat.SocketName), Net: "unixgram"})
	require.NoError(t, err)
	defer bound.Close()
	kept = append(kept, other)
	// The same, listening on its stream socket only.
	streaming := mk("streaming.303", heartbeat.SocketName)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(streaming, heartbeat.StreamName), Net: "unix"})
	require.NoError(t, err)
	defer ln.Close()
	kept = append(kept, streaming)

	heartbeat.RemoveStaleRunDirsOf(base, self, func(pid int) bool { return pid == live })
	for _, p := range gone {
		assert.NoDirExists(t, p)
	}
	for _, p := range kept {
		_, err := os.Lstat(p)
		assert.NoError(t, err, "%s removed", p)
	}
}

func TestSupervisorDir(t *testing.T) {
	runtime := shortTempDir(t)
	t.Setenv("XDG_RUNTIME_DIR", runtime)
	base := filepath.Join(runtime, "hermeskill", "supervise")
	// A run killed by SIGKILL left its directory (pid_max is at most
	// 2^22, so this pid never exists).
	stale := filepath.Join(base, "bot.4194305")
	require.NoError(t, os.MkdirAll(stale, 0o777))
	require.NoError(t, os.WriteFile(filepath.Join(stale, heartbeat.SocketName), nil, 0o600))
	require.NoError(t, os.Chmod(filepath.Dir(base), 0o755))
	require.NoError(t, os.Chmod(base, 0o777))

	dir, err := heartbeat.SupervisorDir("bot")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(base, "bot."+strconv.Itoa(os.Getpid())), dir)
	fi, err := os.Lstat(base)
	require.NoError(t, err)
	assert.Equal(t, os.ModeDir|0o700, fi.Mode(), "supervise's own directory is made private")
	assert.NoDirExists(t, stale)
	assert.NoDirExists(t, dir, "the run directory is PrepareDir's to create")
}

// The runtime directory may be the daemon's (/run/hermeskill, 0755 for
// the hermeskill groups to reach control.sock): supervise, even as root,
// uses a subdirectory of its own and leaves the shared one as it found
// it.
func TestSupervisorDirKeepsSharedRuntimeDir(t *testing.T) {
	runtime := shortTempDir(t)
	t.Setenv("XDG_RUNTIME_DIR", runtime)
	shared := filepath.Join(runtime, "hermeskill")
	require.NoError(t, os.Mkdir(shared, 0o755))
	require.NoError(t, os.Chmod(shared, 0o755)) // whatever the umask
	control := filepath.Join(shared, "control.sock")
	require.NoError(t, os.WriteFile(control, nil, 0o660))

	dir, err := heartbeat.SupervisorDir("bot")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(shared, "supervise", "bot."+strconv.Itoa(os.Getpid())), dir)
	fi, err := os.Lstat(shared)
	require.NoError(t, err)
	assert.Equal(t, os.ModeDir|0o755, fi.Mode(), "the shared runtime directory keeps its mode")
	fi, err = os.Lstat(filepath.Dir(dir))
	require.NoError(t, err)
	assert.Equal(t, os.ModeDir|0o700, fi.Mode(), "supervise's sockets are in a private directory")
	assert.FileExists(t, control)

	// Twice (a second supervise): still nothing changed.
	_, err = heartbeat.SupervisorDir("bot")
	require.NoError(t, err)
	fi, err = os.Lstat(shared)
	require.NoError(t, err)
	assert.Equal(t, os.ModeDir|0o755, fi.Mode())
}

// A runtime directory others could rename entries of is refused, and left
// as it is; a sticky one (as /tmp) is fine.
func TestSupervisorDirRefusesWritableRuntimeDir(t *testing.T) {
	runtime := shortTempDir(t)
	t.Setenv("XDG_RUNTIME_DIR", runtime)
	shared := filepath.Join(runtime, "hermeskill")
	require.NoError(t, os.Mkdir(shared, 0o700))
	require.NoError(t, os.Chmod(shared, 0o777))
	_, err := heartbeat.SupervisorDir("bot")
	require.ErrorIs(t, err, heartbeat.ErrUnsafeDir)
	require.ErrorContains(t, err, "writable by others")
	fi, err := os.Lstat(shared)
	require.NoError(t, err)
	assert.Equal(t, os.ModeDir|0o777, fi.Mode(), "refused, not changed")
	assert.NoDirExists(t, filepath.Join(shared, "supervise"))

	require.NoError(t, os.Chmod(shared, 0o777|os.ModeSticky))
	_, err = heartbeat.SupervisorDir("bot")
	require.NoError(t, err)
}

func TestSupervisorDirRefusesPlantedBase(t *testing.T) {
	runtime := shortTempDir(t)
	t.Setenv("XDG_RUNTIME_DIR", runtime)
	require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(runtime, "hermeskill")))
	_, err := heartbeat.SupervisorDir("bot")
	require.ErrorIs(t, err, heartbeat.ErrUnsafeDir)
}

func TestSupervisorDirPathTooLong(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", shortTempDir(t))
	_, err := heartbeat.SupervisorDir(strings.Repeat("x", sockpath.Max))
	require.ErrorIs(t, err, sockpath.ErrTooLong)
	require.ErrorIs(t, err, heartbeat.ErrPathTooLong)
}
