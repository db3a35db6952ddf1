// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package client_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/pkg/client"
)

// setEnv sets the variables FromEnv reads; empty means unset.
func setEnv(t *testing.T, hermeskill, notify, watchdog string) {
	t.Setenv("HERMESKILL_SOCKET", hermeskill)
	t.Setenv("NOTIFY_SOCKET", notify)
	t.Setenv("WATCHDOG_USEC", watchdog)
	t.Setenv("WATCHDOG_PID", "")
}

func fromEnv(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.FromEnv()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

func TestFromEnvUnsupervised(t *testing.T) {
	setEnv(t, "", "", "")
	c, err := client.FromEnv()
	require.NoError(t, err)
	require.False(t, c.Supervised())

	parent := context.Background()
	require.True(t, c.Context(parent) == parent, "the no-op client returns parent itself")
	c.Ready()
	c.Beat()
	c.Heartbeat(context.Background(), 0) // returns at once
	end := c.Extend(time.Minute)
	end()
	c.Progress(1)
	c.Usage(1, 1)
	require.NoError(t, c.ToolCall("x", func() {}), "no hashing when unsupervised")
	c.Error(syscall.EIO)
	c.Status("s")
	c.Stopping()
	c.Trigger("t")
	c.DumpSignal(syscall.SIGQUIT)
	require.Zero(t, c.Dropped())

	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	_, ok := <-c.Warnings()
	require.False(t, ok)
}

func TestFromEnvPrecedence(t *testing.T) {
	ours, systemd := newSupervisor(t), newSupervisor(t)

	setEnv(t, ours.addr, systemd.addr, "")
	fromEnv(t).Ready()
	require.Equal(t, "READY=1", ours.recv(), "HERMESKILL_SOCKET wins")

	setEnv(t, "", systemd.addr, "")
	fromEnv(t).Status("systemd")
	require.Equal(t, "STATUS=systemd", systemd.recv())
}

func TestFromEnvBadAddress(t *testing.T) {
	for _, addr := range []string{"relative.sock", "@", "/", "unix:/run/x.sock", "/" + strings.Repeat("x", 107)} {
		setEnv(t, addr, "", "")
		_, err := client.FromEnv()
		require.ErrorIs(t, err, client.ErrBadAddress, addr)

		setEnv(t, "", addr, "")
		_, err = client.FromEnv()
		require.ErrorIs(t, err, client.ErrBadAddress, addr)
	}

	setEnv(t, filepath.Join(shortTempDir(t), "absent.sock"), "", "")
	_, err := client.FromEnv()
	require.ErrorIs(t, err, syscall.ENOENT)
}

func TestWatchdogFromEnv(t *testing.T) {
	for _, tc := range []struct {
		usec, pid string
		want      time.Duration
	}{
		{"", "", 0},
		{"30000000", "", 30 * time.Second},
		{"30000000", strconv.Itoa(syscall.Getpid()), 30 * time.Second},
		{"30000000", strconv.Itoa(syscall.Getpid() + 1), 0}, // another process's
	} {
		t.Setenv("WATCHDOG_USEC", tc.usec)
		t.Setenv("WATCHDOG_PID", tc.pid)
		got, err := client.WatchdogFromEnv()
		require.NoError(t, err, tc.usec)
		require.Equal(t, tc.want, got, "%q %q", tc.usec, tc.pid)
	}
	t.Setenv("WATCHDOG_PID", "")
	for _, bad := range []string{"abc", "0", "-5", "1.5", "9223372036854775807"} {
		t.Setenv("WATCHDOG_USEC", bad)
		_, err := client.WatchdogFromEnv()
		require.ErrorIs(t, err, client.ErrBadWatchdog, bad)
	}
}

func TestFromEnvWatchdog(t *testing.T) {
	sup := newSupervisor(t)

	setEnv(t, sup.addr, "", "")
	require.Equal(t, time.Second, client.BeatInterval(fromEnv(t)), "default")

	setEnv(t, sup.addr, "", "600000")
	require.Equal(t, 200*time.Millisecond, client.BeatInterval(fromEnv(t)), "a third of WATCHDOG_USEC")

	setEnv(t, sup.addr, "", "600000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(syscall.Getpid()+1))
	require.Equal(t, time.Second, client.BeatInterval(fromEnv(t)), "WATCHDOG_USEC of another process")

	for _, bad := range []string{"abc", "0", "-5", "1.5"} {
		setEnv(t, sup.addr, "", bad)
		_, err := client.FromEnv()
		require.ErrorIs(t, err, client.ErrBadWatchdog, bad)
	}
}
