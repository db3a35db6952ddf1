// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/testnobody"
)

// These tests read the real /proc about real child processes.

var host = Default()

func TestRealStatOfChild(t *testing.T) {
	c := startChild(t, nil, nil, "open-files", "0")

	st, err := host.Stat(c.pid)
	require.NoError(t, err)
	self, err := host.Stat(os.Getpid())
	require.NoError(t, err)

	assert.Equal(t, c.pid, st.PID)
	assert.Equal(t, os.Getpid(), st.PPID)
	assert.Equal(t, syscall.Getpgrp(), st.PGID, "inherits our process group")
	assert.Equal(t, self.SID, st.SID)
	assert.Equal(t, self.Comm, st.Comm, "the same binary")
	assert.Contains(t, "RS", string(st.State))
	assert.Positive(t, st.NumThreads)
	assert.Positive(t, st.RSSPages)
	assert.GreaterOrEqual(t, st.StartTimeTicks, self.StartTimeTicks)
}

func TestRealSetpgid(t *testing.T) {
	c := startChild(t, &syscall.SysProcAttr{Setpgid: true}, nil, "open-files", "0")
	st, err := host.Stat(c.pid)
	require.NoError(t, err)
	assert.Equal(t, c.pid, st.PGID, "a child started with Setpgid leads its own group")
	assert.NotEqual(t, syscall.Getpgrp(), st.PGID)
}

func TestRealDescendantsFindsEscapedGrandchild(t *testing.T) {
	c := startChild(t, nil, nil, "fork-grandchild")
	grandchild, err := strconv.Atoi(c.said)
	require.NoError(t, err)

	snap, err := host.Scan()
	require.NoError(t, err)
	require.Contains(t, snap, grandchild)
	assert.Equal(t, grandchild, snap[grandchild].SID, "the grandchild called setsid()")
	assert.Equal(t, grandchild, snap[grandchild].PGID)

	assert.Equal(t, []int{c.pid, grandchild}, snap.Descendants(c.pid))
	assert.Subset(t, snap.Descendants(os.Getpid()), []int{os.Getpid(), c.pid, grandchild})
	assert.Equal(t, []int{grandchild}, snap.Children(c.pid))

	c.stop()
	require.NoError(t, c.wait(), "the child reaps the grandchild and exits 0")
}

func TestRealNumFDs(t *testing.T) {
	const extra = 7
	base := startChild(t, nil, nil, "open-files", "0")
	more := startChild(t, nil, nil, "open-files", strconv.Itoa(extra))

	nBase, err := host.NumFDs(base.pid)
	require.NoError(t, err)
	nMore, err := host.NumFDs(more.pid)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, nBase, 3, "stdin, stdout (closed: may be reused), stderr")
	assert.Equal(t, extra, nMore-nBase)

	// The stat(2) fast path and the listing agree.
	listed, err := countDirents(host.path(more.pid, "fd"))
	require.NoError(t, err)
	assert.Equal(t, listed, nMore)

	u, err := host.Usage([]int{base.pid, more.pid}, true)
	require.NoError(t, err)
	assert.Equal(t, nBase+nMore, u.FDs)
	assert.Equal(t, 2, u.Procs)
}

func TestRealZombieThenReaped(t *testing.T) {
	c := startChild(t, nil, nil, "open-files", "3")
	before, err := host.Stat(c.pid)
	require.NoError(t, err)

	// Let it exit, and wait for that without reaping it (WNOWAIT): the
	// zombie window in which a certificate's autopsy is taken.
	c.stop()
	var info unix.Siginfo
	require.NoError(t, unix.Waitid(unix.P_PID, c.pid, &info, unix.WEXITED|unix.WNOWAIT, nil))

	z, err := host.Stat(c.pid)
	require.NoError(t, err)
	assert.Equal(t, byte('Z'), z.State)
	assert.Equal(t, before.StartTimeTicks, z.StartTimeTicks)
	assert.Zero(t, z.RSSPages)

	p, err := host.Proc(c.pid, 64)
	require.NoError(t, err)
	assert.Equal(t, "Z", p.State)
	assert.Equal(t, "["+before.Comm+"]", p.Cmdline, "a zombie has no cmdline")
	assert.Zero(t, p.FDs)
	_, ok, err := host.EnvironValue(c.pid, "PATH")
	require.NoError(t, err)
	assert.False(t, ok, "a zombie has no environment")

	require.NoError(t, c.wait())
	st, err := host.Stat(c.pid)
	if err == nil {
		// The pid was recycled between the reap and the read.
		assert.NotEqual(t, before.StartTimeTicks, st.StartTimeTicks)
		return
	}
	require.ErrorIs(t, err, ErrNoProcess)
	_, err = host.Status(c.pid)
	require.ErrorIs(t, err, ErrNoProcess)
	_, err = host.NumFDs(c.pid)
	require.ErrorIs(t, err, ErrNoProcess)
	_, err = host.Proc(c.pid, 64)
	require.ErrorIs(t, err, ErrNoProcess)
	u, err := host.Usage([]int{c.pid}, true)
	require.NoError(t, err)
	assert.Equal(t, Usage{}, u)
}

func TestRealCmdlineAndEnviron(t *testing.T) {
	c := startChild(t, nil, []string{"HERMESKILL_AGENT_ID=bot with spaces=and equals"}, "open-files", "0")

	got, err := host.Cmdline(c.pid, 0)
	require.NoError(t, err)
	assert.Equal(t, os.Args[0]+" open-files 0", got)

	got, err = host.Cmdline(c.pid, 10)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(got), 10)
	assert.Contains(t, got, "…")

	v, ok, err := host.EnvironValue(c.pid, "HERMESKILL_AGENT_ID")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "bot with spaces=and equals", v)

	_, ok, err = host.EnvironValue(c.pid, "HERMESKILL_NOT_SET")
	require.NoError(t, err)
	assert.False(t, ok)
}

func TestRealSelf(t *testing.T) {
	st, err := host.Status(os.Getpid())
	require.NoError(t, err)
	assert.Equal(t, os.Getuid(), st.UID)
	assert.Equal(t, os.Geteuid(), st.EUID)
	assert.Equal(t, os.Getgid(), st.GID)
	assert.Positive(t, st.Threads)
	assert.Positive(t, st.VmRSS)
	assert.GreaterOrEqual(t, st.VmHWM, st.VmRSS)

	want, err := os.ReadFile("/proc/self/cgroup")
	require.NoError(t, err)
	path, err := host.Cgroup2(os.Getpid())
	require.NoError(t, err)
	wantPath, _ := ParseCgroup2(want)
	assert.Equal(t, wantPath, path)

	pids, err := host.PIDs()
	require.NoError(t, err)
	assert.Contains(t, pids, os.Getpid())
	assert.Contains(t, pids, 1)

	p, err := host.Proc(1, 256)
	require.NoError(t, err)
	assert.Equal(t, 1, p.PID)
	assert.NotEmpty(t, p.Cmdline)
}

func TestRealKernelThread(t *testing.T) {
	// kthreadd is pid 2 when this pid namespace is the host's.
	st, err := host.Stat(2)
	if err != nil || st.Comm != "kthreadd" {
		t.Skip("no kthreadd in this pid namespace")
	}
	got, err := host.Cmdline(2, 0)
	require.NoError(t, err)
	assert.Equal(t, "[kthreadd]", got)
	_, ok, err := host.EnvironValue(2, "PATH")
	require.NoError(t, err)
	assert.False(t, ok)
	status, err := host.Status(2)
	require.NoError(t, err)
	assert.Zero(t, status.VmRSS)
}

func TestRealNoProcess(t *testing.T) {
	const pid = 1 << 30 // above pid_max (at most 2^22)
	_, err := host.Stat(pid)
	require.ErrorIs(t, err, ErrNoProcess)
	require.ErrorIs(t, err, unix.ENOENT)
	assert.Equal(t, "stat 1073741824: no such process (open: no such file or directory)", err.Error())
}

func TestClockTicksIsUserHZ(t *testing.T) {
	const atClkTck = 17 // AT_CLKTCK in <linux/auxvec.h>
	auxv, err := unix.Auxv()
	require.NoError(t, err)
	for _, kv := range auxv {
		if kv[0] == atClkTck {
			assert.EqualValues(t, ClockTicks, kv[1], "USER_HZ the kernel passed us")
			return
		}
	}
	t.Fatal("no AT_CLKTCK in the auxiliary vector")
}

func TestPageSize(t *testing.T) {
	const atPageSz = 6 // AT_PAGESZ
	auxv, err := unix.Auxv()
	require.NoError(t, err)
	for _, kv := range auxv {
		if kv[0] == atPageSz {
			assert.EqualValues(t, kv[1], PageSize())
		}
	}
}

// asNobodyEnv marks the test binary re-executed as uid 65534 by a test
// that runs as root.
const asNobodyEnv = "HERMESKILL_PROCFS_TEST_AS_NOBODY"

// asNobody runs the calling test itself in the test binary re-executed as
// uid 65534, and reports whether the caller runs as root and so must
// return: root reads every fd directory (it owns a non-dumpable process's
// /proc/PID and has CAP_SYS_PTRACE), so only another user is refused.
func asNobody(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return false
	}
	cmd := exec.Command(testnobody.Executable(t), "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Dir = testnobody.Dir(t)
	cmd.Env = append(os.Environ(), asNobodyEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: testnobody.Credential()}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "--- PASS: "+t.Name(), "%s", out)
	t.Logf("as uid %d:\n%s", testnobody.UID, out)
	return true
}

// An fd directory the sampler may not read (a non-dumpable process, read
// by another user) makes only the descriptor count short, with the reason
// in FDsErr; the figures of its stat (which anyone may read) stay whole,
// and no error blinds them. Two ways to a listing, the read that is
// refused: a process with no descriptors (its fd directory's size says 0,
// which tells nothing), and any process on a kernel before 6.2, whose fd
// directories have no size (forced here by the Sampler's procfs flag).
func TestRealUsageFDsUnreadable(t *testing.T) {
	if asNobody(t) {
		return
	}
	none := startChild(t, nil, []string{"GODEBUG=containermaxprocs=0"}, "undumpable", "no-fds")
	t.Cleanup(func() { none.cmd.Process.Kill() }) // before startChild's wait
	some := startChild(t, nil, nil, "undumpable", "keep-fds")
	mine := startChild(t, nil, nil, "open-files", "2")

	_, err := host.NumFDs(none.pid)
	require.ErrorIs(t, err, fs.ErrPermission, "the premise: /proc/%d/fd is not ours to list", none.pid)
	_, err = countDirents(host.path(some.pid, "fd"))
	require.ErrorIs(t, err, fs.ErrPermission, "the premise: /proc/%d/fd is not ours to list", some.pid)

	check := func(name string, u Usage, err error, unreadable ...*child) {
		t.Helper()
		require.NoError(t, err, "%s: an unreadable fd directory blinded the stat figures", name)
		assert.Equal(t, 3, u.Procs, name)
		assert.GreaterOrEqual(t, u.Threads, 3, name)
		assert.Positive(t, u.RSSBytes, name)
		require.Error(t, u.FDsErr, name)
		assert.ErrorIs(t, u.FDsErr, fs.ErrPermission, name)
		for _, c := range unreadable {
			assert.Contains(t, u.FDsErr.Error(), fmt.Sprintf("fd %d:", c.pid), name)
		}
	}
	pids := []int{none.pid, some.pid, mine.pid}
	u, err := host.Usage(pids, true)
	check("FS.Usage", u, err, none)
	s := host.NewSampler(0)
	defer s.Close()
	u, err = s.Usage(pids, true)
	check("Sampler", u, err, none)
	s.procfs = false // a kernel before 6.2: every count is a listing
	u, err = s.Usage(pids, true)
	check("Sampler, listing", u, err, none, some)
	mineFDs, err := host.NumFDs(mine.pid)
	require.NoError(t, err)
	assert.Equal(t, mineFDs, u.FDs, "the directories that could be read are counted")

	u, err = s.Usage(pids, false)
	require.NoError(t, err)
	assert.NoError(t, u.FDsErr, "descriptors not asked for")
}
