// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// scripted answers each pid from a table and counts the calls.
type scripted struct {
	verdicts map[int]Verdict
	calls    map[int]int
}

func (s *scripted) Authenticate(pid int) Verdict {
	s.calls[pid]++
	return s.verdicts[pid]
}

func TestAuthCache(t *testing.T) {
	auth := &scripted{verdicts: map[int]Verdict{1: Member, 2: NotMember, 3: Gone}, calls: map[int]int{}}
	c := newAuthCache(auth)
	t0 := time.Unix(1_700_000_000, 0)

	// Each verdict is asked once, then served from the cache within its TTL.
	for _, now := range []time.Time{t0, t0.Add(memberTTL / 2), t0.Add(memberTTL - 1)} {
		require.Equal(t, Member, c.verdict(1, now))
	}
	require.Equal(t, 1, auth.calls[1])
	require.Equal(t, NotMember, c.verdict(2, t0))
	require.Equal(t, NotMember, c.verdict(2, t0.Add(notMemberTTL-1)))
	require.Equal(t, 1, auth.calls[2])

	// Gone is never cached: it cannot shadow a later answer.
	require.Equal(t, Gone, c.verdict(3, t0))
	require.Equal(t, Gone, c.verdict(3, t0))
	require.Equal(t, 2, auth.calls[3])
	auth.verdicts[3] = Member
	require.Equal(t, Member, c.verdict(3, t0))

	// A member that exited is still accepted while its verdict is fresh
	// (a short-lived sender verified moments ago), and no longer after.
	auth.verdicts[1] = Gone
	require.Equal(t, Member, c.verdict(1, t0.Add(memberTTL-1)))
	require.Equal(t, Gone, c.verdict(1, t0.Add(memberTTL)))

	// An expired NotMember is asked again.
	auth.verdicts[2] = Member
	require.Equal(t, Member, c.verdict(2, t0.Add(notMemberTTL)))
	require.Equal(t, 2, auth.calls[2])
}

func TestAuthCacheBounded(t *testing.T) {
	auth := &scripted{verdicts: map[int]Verdict{}, calls: map[int]int{}}
	c := newAuthCache(auth)
	now := time.Unix(1_700_000_000, 0)
	for pid := 1; pid <= 3*maxCached; pid++ {
		require.Equal(t, Member, c.verdict(pid, now))
		require.LessOrEqual(t, len(c.entries), maxCached)
	}
}

func TestAuthCacheNil(t *testing.T) {
	require.Equal(t, Member, newAuthCache(nil).verdict(42, time.Now()))
}

func TestRateLimiter(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	r := newRateLimiter(10)
	for i := range 10 { // a burst of one second's worth
		require.True(t, r.allow(t0), "datagram %d", i)
	}
	require.False(t, r.allow(t0))
	require.False(t, r.allow(t0.Add(50*time.Millisecond)))
	require.True(t, r.allow(t0.Add(150*time.Millisecond)), "refilled at 10/s")
	require.False(t, r.allow(t0.Add(150*time.Millisecond)))

	// The bucket never holds more than one second's worth.
	later := t0.Add(time.Hour)
	n := 0
	for r.allow(later) {
		n++
	}
	require.Equal(t, 10, n)

	unlimited := newRateLimiter(0)
	for range 10_000 {
		require.True(t, unlimited.allow(t0))
	}
}

// TestSecureSocketFileRefusesSymlink plays the race Listen defends against:
// the agent's user, who owns the socket directory, swaps the freshly bound
// socket for a symlink to another file before its mode is set.
func TestSecureSocketFileRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	require.NoError(t, os.WriteFile(victim, []byte("x"), 0o644))
	link := filepath.Join(dir, "n.sock")
	require.NoError(t, os.Symlink(victim, link))

	require.ErrorIs(t, secureSocketFile(link, -1, -1), ErrNotSocket)
	fi, err := os.Stat(victim)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), fi.Mode().Perm(), "the symlink's target was changed")

	require.ErrorIs(t, secureSocketFile(victim, -1, -1), ErrNotSocket)
	require.ErrorIs(t, secureSocketFile(filepath.Join(dir, "missing"), -1, -1), os.ErrNotExist)

	sock := filepath.Join(dir, "real.sock")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, unix.Bind(fd, &unix.SockaddrUnix{Name: sock}))
	require.NoError(t, os.Chmod(sock, 0o777))
	require.NoError(t, secureSocketFile(sock, -1, -1))
	fi, err = os.Lstat(sock)
	require.NoError(t, err)
	require.Equal(t, os.ModeSocket|0o600, fi.Mode())
}
