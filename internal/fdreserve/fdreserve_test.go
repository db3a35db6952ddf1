// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package fdreserve_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/fdreserve"
)

const childEnv = "HK_FDRESERVE_CHILD"

// TestMain runs the exhaustion in a child process: lowering the
// descriptor limit and filling the table would break the test binary's
// other tests.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(exhaust())
	}
	os.Exit(m.Run())
}

// exhaust fills the descriptor table, then shows that a file can be
// opened on the reserve, and that the reserve is taken back afterwards.
// Exit codes name what failed.
func exhaust() int {
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 64, Max: 64}); err != nil {
		return 10
	}
	if err := fdreserve.Hold(); err != nil || fdreserve.Held() != fdreserve.Size {
		return 11
	}
	for {
		if _, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			if !fdreserve.Exhausted(err) {
				return 12
			}
			break
		}
	}
	open := func() error {
		f, err := os.Create(os.Args[1])
		if err != nil {
			return err
		}
		return f.Close()
	}
	if err := open(); !fdreserve.Exhausted(err) {
		return 13 // the table is not full: the test proves nothing
	}
	if err := fdreserve.Do(open); err != nil {
		return 14
	}
	// The reserve is taken back as far as the full table lets it: at
	// least the descriptor the retry closed.
	if fdreserve.Used() != 1 || fdreserve.Held() == 0 {
		return 15
	}
	return 0
}

func TestReserveServesWhenExhausted(t *testing.T) {
	path := t.TempDir() + "/written"
	cmd := exec.Command(os.Args[0], path)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.FileExists(t, path)
}

func TestDoPassesOtherErrors(t *testing.T) {
	calls := 0
	err := fdreserve.Do(func() error { calls++; return os.ErrNotExist })
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.Equal(t, 1, calls, "only exhaustion is retried")
}
