// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/heartbeat"
)

// childrenOfUs authenticates this process and its children, from /proc:
// the tree of a test that spawns its senders.
var childrenOfUs = heartbeat.AuthFunc(func(pid int) heartbeat.Verdict {
	if pid == os.Getpid() {
		return heartbeat.Member
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return heartbeat.Gone
	}
	// "pid (comm) state ppid ...": comm may hold anything but the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if err != nil || i < 0 {
		return heartbeat.NotMember
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
		return heartbeat.NotMember
	}
	return heartbeat.Member
})

// TestSystemdNotify runs the real systemd-notify(1): its messages arrive,
// and it exits 0, which it only does once its BARRIER=1 is answered by the
// receiver closing the pipe sent along (sd_notify_barrier(3)).
func TestSystemdNotify(t *testing.T) {
	bin, err := exec.LookPath("systemd-notify")
	if err != nil {
		t.Skip("systemd-notify not installed")
	}
	t.Run("as us", func(t *testing.T) {
		s := listen(t, childrenOfUs, 0)
		runSystemdNotify(t, s, bin, nil)
	})
	t.Run("as the agent's user", func(t *testing.T) {
		requireRoot(t)
		base := shortTempDir(t)
		require.NoError(t, os.Chmod(base, 0o711))
		dir := filepath.Join(base, "d")
		require.NoError(t, heartbeat.PrepareDir(dir, agentUID, agentUID))
		s := listenConfig(t, heartbeat.Config{
			Path: filepath.Join(dir, "n.sock"), UID: agentUID, GID: agentUID, Auth: childrenOfUs,
		})
		runSystemdNotify(t, s, bin, &syscall.Credential{Uid: agentUID, Gid: agentUID})
	})
}

func runSystemdNotify(t *testing.T, s *heartbeat.Socket, bin string, cred *syscall.Credential) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--ready", "--status=hi")
	cmd.Env = append(withoutEnv(os.Environ(), "NOTIFY_SOCKET"), "NOTIFY_SOCKET="+s.Path())
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "systemd-notify: %s", out)

	// READY and STATUS, then the BARRIER, possibly split over datagrams.
	var got heartbeat.Message
	for !got.Has(heartbeat.FieldBarrier) {
		r := recv(t, s)
		t.Logf("uid %d pid %d (systemd-notify %d, us %d): %q, barrier %v",
			r.UID, r.PID, cmd.Process.Pid, os.Getpid(), r.Msg.Status, r.Msg.Has(heartbeat.FieldBarrier))
		// systemd-notify sends on behalf of its parent (--pid defaults to
		// it): with the privilege to, its credentials carry our pid;
		// without, and for the barrier, its own.
		require.Contains(t, []int{cmd.Process.Pid, os.Getpid()}, r.PID)
		require.Empty(t, r.Client, "systemd-notify does not bind")
		for _, f := range allFields {
			if r.Msg.Has(f) {
				got.Set(f)
			}
		}
		if r.Msg.Has(heartbeat.FieldStatus) {
			got.Status = r.Msg.Status
		}
	}
	require.True(t, got.Has(heartbeat.FieldReady))
	require.Equal(t, "hi", got.Status)
	st := s.Stats()
	require.GreaterOrEqual(t, st.FDsClosed, uint64(1))
	require.Zero(t, st.Dropped())
}

func withoutEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
