// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixture is the fake proc tree in testdata/proc:
//
//	1     systemd
//	├─ 100   hermeskilld
//	│  └─ 4242  python3 agent.py          (pgid 4242, sid 4242)
//	│     └─ 4243  "a) b" node tool.js    (pgid 4242)
//	│        ├─ 4250  worker, a zombie     (pgid 4242)
//	│        └─ 4300  sh, after setsid()   (pgid 4300, sid 4300)
//	└─ 5000  sshd                         (cgroup v1 only)
//	2     kthreadd                        (ppid 0, no cmdline, no Vm lines)
//	9999  listed, but its files are gone (exited during a scan)
//
// plus non-pid entries (self, uptime, sys/) that PIDs must skip.
var fixture = FS{Root: "testdata/proc"}

func TestFixtureStat(t *testing.T) {
	st, err := fixture.Stat(4243)
	require.NoError(t, err)
	assert.Equal(t, Stat{PID: 4243, PPID: 4242, PGID: 4242, SID: 4242, Comm: "a) b", State: 'R',
		UTimeTicks: 9000, STimeTicks: 12, NumThreads: 2, StartTimeTicks: 10050, RSSPages: 51200}, st)

	zombie, err := fixture.Stat(4250)
	require.NoError(t, err)
	assert.Equal(t, byte('Z'), zombie.State)

	for _, pid := range []int{9999, 12345} {
		_, err = fixture.Stat(pid)
		require.ErrorIs(t, err, ErrNoProcess)
		assert.ErrorContains(t, err, "stat ")
	}
}

func TestFixtureStatus(t *testing.T) {
	st, err := fixture.Status(4300)
	require.NoError(t, err)
	assert.Equal(t, Status{UID: 1000, EUID: 0, GID: 1000, EGID: 1000, VmRSS: 1600 << 10, VmHWM: 1600 << 10, Threads: 1}, st)

	kthread, err := fixture.Status(2)
	require.NoError(t, err)
	assert.Equal(t, Status{Threads: 1}, kthread)

	_, err = fixture.Status(9999)
	require.ErrorIs(t, err, ErrNoProcess)
}

func TestFixtureCmdline(t *testing.T) {
	tests := []struct {
		pid, max int
		want     string
	}{
		{4242, 0, "python3 agent.py --name research bot"},
		{4242, 1000, "python3 agent.py --name research bot"},
		{4242, 16, "python3 agent…"}, // 13 bytes and a 3-byte ellipsis
		{4243, 0, "node /srv/ünïcødé tool.js"},
		{4243, 15, "node /srv/ü…"},
		{4243, 14, "node /srv/…"}, // not half of the ü
		{5000, 0, "sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups"},
		{4250, 0, "[worker]"}, // zombie
		{2, 0, "[kthreadd]"},  // kernel thread
		{2, 6, "[kt…"},
	}
	for _, tt := range tests {
		got, err := fixture.Cmdline(tt.pid, tt.max)
		require.NoError(t, err)
		assert.Equal(t, tt.want, got, "pid %d max %d", tt.pid, tt.max)
	}
	_, err := fixture.Cmdline(9999, 0)
	require.ErrorIs(t, err, ErrNoProcess)
}

func TestFixtureNumFDs(t *testing.T) {
	for pid, want := range map[int]int{1: 4, 100: 3, 4242: 6, 4243: 3, 5000: 4} {
		n, err := fixture.NumFDs(pid)
		require.NoError(t, err)
		assert.Equal(t, want, n, "pid %d", pid)
	}
	_, err := fixture.NumFDs(9999)
	require.ErrorIs(t, err, ErrNoProcess)
}

func TestFixturePIDs(t *testing.T) {
	pids, err := fixture.PIDs()
	require.NoError(t, err)
	assert.ElementsMatch(t, []int{1, 2, 100, 4242, 4243, 4250, 4300, 5000, 9999}, pids)

	_, err = FS{Root: "testdata/nonexistent"}.PIDs()
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func TestFixtureScan(t *testing.T) {
	snap, err := fixture.Scan()
	require.NoError(t, err)
	assert.Len(t, snap, 8, "9999 vanished and is skipped")
	assert.Equal(t, "a) b", snap[4243].Comm)

	assert.Equal(t, []int{4242, 4243, 4250, 4300}, snap.Descendants(4242))
	assert.Equal(t, []int{100, 4242, 4243, 4250, 4300}, snap.Descendants(100))
	assert.Equal(t, []int{4243, 4250, 4300, 5000}, snap.Descendants(4243, 5000, 4243))
	assert.Equal(t, []int{1, 2, 100, 4242, 4243, 4250, 4300, 5000}, snap.Descendants(0))
	assert.Empty(t, snap.Descendants(31337))
	assert.Empty(t, snap.Descendants())

	assert.Equal(t, []int{4250, 4300}, snap.Children(4243))
	assert.Equal(t, []int{100, 5000}, snap.Children(1))
	assert.Empty(t, snap.Children(4300))
}

func TestFixtureScanMalformed(t *testing.T) {
	_, err := FS{Root: "testdata/badproc"}.Scan()
	require.ErrorIs(t, err, ErrMalformed)
	assert.ErrorContains(t, err, "stat 7")
}

func TestFixtureCgroup2(t *testing.T) {
	tests := map[int]string{
		4242: "/hermeskill/research-bot", // hybrid: v1 lines first
		4250: "/hermeskill/research-bot (deleted)",
		2:    "/",
		5000: "", // v1 only
	}
	for pid, want := range tests {
		got, err := fixture.Cgroup2(pid)
		require.NoError(t, err)
		assert.Equal(t, want, got, "pid %d", pid)
	}
	_, err := fixture.Cgroup2(9999)
	require.ErrorIs(t, err, ErrNoProcess)
}

func TestFixtureEnvironValue(t *testing.T) {
	v, ok, err := fixture.EnvironValue(4300, "HERMESKILL_AGENT_ID")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "research-bot", v, "the first of two wins")

	v, ok, err = fixture.EnvironValue(4242, "EMPTY")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Empty(t, v)

	_, ok, err = fixture.EnvironValue(4250, "HERMESKILL_AGENT_ID")
	require.NoError(t, err)
	assert.False(t, ok, "a zombie has no environment")

	_, _, err = fixture.EnvironValue(9999, "X")
	require.ErrorIs(t, err, ErrNoProcess)
}

func TestFixtureUsage(t *testing.T) {
	page := int64(PageSize())
	u, err := fixture.Usage([]int{4242, 4243, 4250, 4300, 9999, 12345}, true)
	require.NoError(t, err, "gone processes are skipped, a zombie has no fd dir in the fixture")
	assert.Equal(t, Usage{
		Procs:    4,
		Threads:  4 + 2 + 1 + 1,
		RSSBytes: (25600 + 51200 + 0 + 400) * page,
		CPUTicks: 1500 + 250 + 9000 + 12 + 7 + 3 + 1 + 1,
		FDs:      6 + 3 + 0 + 3,
	}, u)

	u, err = fixture.Usage([]int{4242}, false)
	require.NoError(t, err)
	assert.Zero(t, u.FDs)

	u, err = fixture.Usage(nil, true)
	require.NoError(t, err)
	assert.Equal(t, Usage{}, u)
}

func TestFixtureProc(t *testing.T) {
	p, err := fixture.Proc(4243, 0)
	require.NoError(t, err)
	assert.Equal(t, Proc{PID: 4243, PPID: 4242, Cmdline: "node /srv/ünïcødé tool.js", State: "R",
		RSSBytes: 51200 * int64(PageSize()), CPUSeconds: 90.12, Threads: 2, FDs: 3, StartTimeTicks: 10050}, p)

	// The fixture's zombie has no fd directory, as if it were reaped after
	// its stat was read: the record stands, from the stat.
	p, err = fixture.Proc(4250, 64)
	require.NoError(t, err)
	assert.Equal(t, "[worker]", p.Cmdline)
	assert.Equal(t, "Z", p.State)
	assert.Zero(t, p.FDs)

	_, err = fixture.Proc(9999, 64)
	require.ErrorIs(t, err, ErrNoProcess)
	assert.False(t, errors.Is(err, ErrPartial))
}

func TestSnapshotCycle(t *testing.T) {
	// A snapshot cannot really hold a cycle, but it is read while processes
	// are reparented, so Descendants must not trust it.
	snap := Snapshot{
		10: {PID: 10, PPID: 12},
		11: {PID: 11, PPID: 10},
		12: {PID: 12, PPID: 11},
		13: {PID: 13, PPID: 13}, // its own parent
		14: {PID: 14, PPID: 13},
	}
	assert.Equal(t, []int{10, 11, 12}, snap.Descendants(10))
	assert.Equal(t, []int{10, 11, 12}, snap.Descendants(11, 12))
	assert.Equal(t, []int{13, 14}, snap.Descendants(13))
	assert.Equal(t, []int{14}, snap.Children(13))
}
