// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat_test

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/heartbeat"
)

// Unprivileged uids for the helpers; they need no passwd entry.
const (
	agentUID = 12345
	otherUID = 65534 // nobody
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs helpers under other uids")
	}
}

// exportBinary copies the test binary where another uid can run it: go
// test's work directory is private to us. dir must be searchable by all.
func exportBinary(t *testing.T, dir string) string {
	t.Helper()
	src, err := os.Open(os.Args[0])
	require.NoError(t, err)
	defer src.Close()
	bin := filepath.Join(dir, "heartbeat.test")
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
	return bin
}

// TestSenderUID: the agent's uid and root are accepted; any other uid is
// forged, whatever the Authenticator says about its pid.
func TestSenderUID(t *testing.T) {
	requireRoot(t)
	base := shortTempDir(t)
	require.NoError(t, os.Chmod(base, 0o711))
	bin := exportBinary(t, base)

	// The agent's socket: a private dir and a 0600 socket, both its own.
	dir := filepath.Join(base, "d")
	require.NoError(t, heartbeat.PrepareDir(dir, agentUID, agentUID))
	s := listenConfig(t, heartbeat.Config{
		Path: filepath.Join(dir, "n.sock"), UID: agentUID, GID: agentUID,
		Auth: heartbeat.AuthFunc(func(int) heartbeat.Verdict { return heartbeat.Member }),
	})
	for path, mode := range map[string]os.FileMode{dir: os.ModeDir | 0o700, s.Path(): os.ModeSocket | 0o600} {
		fi, err := os.Lstat(path)
		require.NoError(t, err)
		require.Equal(t, mode, fi.Mode(), path)
		st := fi.Sys().(*syscall.Stat_t)
		require.Equal(t, [2]uint32{agentUID, agentUID}, [2]uint32{st.Uid, st.Gid}, path)
	}
	env := []string{"HK_SOCKET=" + s.Path(), "HK_MSG=WATCHDOG=1"}

	// The agent's uid reaches its socket through those permissions alone.
	h := startHelper(t, bin, "send", env, &syscall.Credential{Uid: agentUID, Gid: agentUID})
	r := recv(t, s)
	require.Equal(t, agentUID, r.UID)
	require.Equal(t, h.pid, r.PID)
	h.release(t)

	// Root is accepted too (hermeskilld's own tools, systemd-notify as root).
	snd := newSender(t, s.Path())
	snd.send("WATCHDOG=1")
	r = recv(t, s)
	require.Equal(t, 0, r.UID)

	// Another uid: open the path to it (as a misconfigured system might),
	// and the uid check alone still refuses it.
	require.NoError(t, os.Chmod(dir, 0o711))
	require.NoError(t, os.Chmod(s.Path(), 0o666))
	h = startHelper(t, bin, "send", env, &syscall.Credential{Uid: otherUID, Gid: otherUID})
	eventuallyStats(t, s, func(st heartbeat.StatsSnapshot) bool { return st.Forged == 1 }, "other uid not counted as forged")
	requireNextIs(t, s, snd)
	h.release(t)
	require.Equal(t, uint64(3), settle(t, s, 4).Accepted)
}
