// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package tty

import (
	"os"
	"runtime"
	"strconv"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Only our controlling terminal is handed over: a pipe, /dev/null or
// someone else's terminal gives nil, and a nil Terminal does nothing.
// (cmd/hermeskilld's tests hand a real one over, in a session of its own.)
func TestOpenOnlyOurControllingTerminal(t *testing.T) {
	require.Nil(t, Open(nil, nil))
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	require.Nil(t, Open(r, nil), "a pipe")
	null, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer null.Close()
	require.Nil(t, Open(null, nil), "/dev/null")

	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	defer master.Close()
	require.NoError(t, unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	defer slave.Close()
	require.Nil(t, Open(slave, nil), "a terminal that is not our controlling terminal")

	var none *Terminal
	require.Nil(t, none.ForAgent())
	none.Started(nil, nil)
	none.Killing()
	none.Continued()
	none.Restore()
}

// withTTOUBlocked blocks SIGTTOU for f only, on its thread.
func TestWithTTOUBlockedRestoresTheMask(t *testing.T) {
	runtime.LockOSThread() // nested: withTTOUBlocked runs on this thread too
	defer runtime.UnlockOSThread()
	var before, inside, after unix.Sigset_t
	require.NoError(t, unix.PthreadSigmask(unix.SIG_BLOCK, nil, &before))
	withTTOUBlocked(func() {
		require.NoError(t, unix.PthreadSigmask(unix.SIG_BLOCK, nil, &inside))
	})
	require.NoError(t, unix.PthreadSigmask(unix.SIG_BLOCK, nil, &after))
	n := uint(unix.SIGTTOU - 1)
	w := uint(unsafe.Sizeof(inside.Val[0]) * 8)
	require.NotZero(t, inside.Val[n/w]&(1<<(n%w)), "SIGTTOU blocked inside")
	require.Zero(t, after.Val[n/w]&(1<<(n%w)), "SIGTTOU not blocked after")
	require.Equal(t, before, after)
}
