// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat_test

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/heartbeat"
)

func TestDeliversAuthenticatedMessage(t *testing.T) {
	s := listen(t, selfOnly, 0)
	snd := newSender(t, s.Path())

	before := time.Now()
	snd.send("READY=1\nSTATUS=warming up")
	r := recv(t, s)
	after := time.Now()

	require.True(t, r.Msg.Has(heartbeat.FieldReady))
	require.Equal(t, "warming up", r.Msg.Status)
	require.Equal(t, os.Getpid(), r.PID)
	require.Equal(t, os.Geteuid(), r.UID)
	require.False(t, r.At.Before(before), "At %v before the send at %v", r.At, before)
	require.False(t, r.At.After(after), "At %v after the receive at %v", r.At, after)
	require.Empty(t, r.Client, "an unbound sender has no address")

	// systemd's clients may end a datagram with one NUL.
	snd.send("WATCHDOG=1\x00")
	require.True(t, has(recv(t, s), heartbeat.FieldWatchdog))

	// A bad field is counted; the rest of the message is delivered.
	snd.send("PROGRESS=7\nMAINPID=0\nCOST_USD=-1")
	r = recv(t, s)
	require.Equal(t, uint64(7), r.Msg.Progress)
	require.Equal(t, 2, r.Msg.BadFields)

	st := settle(t, s, 3)
	require.Equal(t, uint64(3), st.Accepted)
	require.Equal(t, uint64(2), st.BadFields)
	require.Zero(t, st.Dropped())
}

func TestSocketFileModes(t *testing.T) {
	dir := filepath.Join(shortTempDir(t), "d")
	require.NoError(t, heartbeat.PrepareDir(dir, -1, -1))
	s := listenConfig(t, heartbeat.Config{Path: filepath.Join(dir, "n.sock"), UID: -1, GID: -1})
	require.Equal(t, filepath.Join(dir, "n.sock"), s.Path())

	fi, err := os.Lstat(dir)
	require.NoError(t, err)
	require.Equal(t, os.ModeDir|0o700, fi.Mode())
	fi, err = os.Lstat(s.Path())
	require.NoError(t, err)
	require.Equal(t, os.ModeSocket|0o600, fi.Mode())
	require.Equal(t, uint32(os.Geteuid()), fi.Sys().(*syscall.Stat_t).Uid)
}

func TestListenPathTooLong(t *testing.T) {
	dir := shortTempDir(t)
	fill := func(total int) string {
		return filepath.Join(dir, strings.Repeat("x", total-len(dir)-1))
	}
	_, err := heartbeat.Listen(heartbeat.Config{Path: fill(108), UID: -1, GID: -1})
	require.ErrorIs(t, err, heartbeat.ErrPathTooLong)
	_, err = os.Lstat(fill(108))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing is created")

	// 107 bytes plus the terminating NUL fill sun_path exactly.
	s := listenConfig(t, heartbeat.Config{Path: fill(107), UID: -1, GID: -1, Auth: selfOnly})
	newSender(t, s.Path()).send("READY=1")
	require.True(t, has(recv(t, s), heartbeat.FieldReady))
}

func TestListenReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(shortTempDir(t), "n.sock")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	require.NoError(t, unix.Bind(fd, &unix.SockaddrUnix{Name: path}))
	require.NoError(t, unix.Close(fd)) // a crashed supervisor leaves its file behind
	_, err = os.Lstat(path)
	require.NoError(t, err)

	s := listenConfig(t, heartbeat.Config{Path: path, UID: -1, GID: -1, Auth: selfOnly})
	newSender(t, path).send("WATCHDOG=1")
	require.True(t, has(recv(t, s), heartbeat.FieldWatchdog))
}

func TestListenRefusesLiveListener(t *testing.T) {
	path := filepath.Join(shortTempDir(t), "n.sock")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, unix.Bind(fd, &unix.SockaddrUnix{Name: path}))

	_, err = heartbeat.Listen(heartbeat.Config{Path: path, UID: -1, GID: -1})
	require.ErrorIs(t, err, heartbeat.ErrInUse)
	// The live listener keeps its path and still receives.
	newSender(t, path).send("x")
	var buf [8]byte
	require.NoError(t, unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: int64(wait / time.Second)}))
	n, err := unix.Read(fd, buf[:])
	require.NoError(t, err)
	require.Equal(t, "x", string(buf[:n]))

	// Same for a live heartbeat socket: a second supervisor of the same
	// agent must not steal it.
	s := listen(t, selfOnly, 0)
	_, err = heartbeat.Listen(heartbeat.Config{Path: s.Path(), UID: -1, GID: -1})
	require.ErrorIs(t, err, heartbeat.ErrInUse)
	newSender(t, s.Path()).send("READY=1")
	require.True(t, has(recv(t, s), heartbeat.FieldReady))
}

func TestListenRefusesNonSocket(t *testing.T) {
	dir := shortTempDir(t)
	file := filepath.Join(dir, "n.sock")
	require.NoError(t, os.WriteFile(file, []byte("keep me"), 0o644))
	_, err := heartbeat.Listen(heartbeat.Config{Path: file, UID: -1, GID: -1})
	require.ErrorIs(t, err, heartbeat.ErrNotSocket)
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "keep me", string(data))

	// A symlink is not followed, even to a socket.
	link := filepath.Join(dir, "link.sock")
	require.NoError(t, os.Symlink(file, link))
	_, err = heartbeat.Listen(heartbeat.Config{Path: link, UID: -1, GID: -1})
	require.ErrorIs(t, err, heartbeat.ErrNotSocket)
	fi, err := os.Stat(file)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())

	require.ErrorIs(t, heartbeat.PrepareDir(filepath.Join(dir, "no", "such"), -1, -1), os.ErrNotExist)
	_, err = heartbeat.Listen(heartbeat.Config{Path: filepath.Join(dir, "no", "n.sock"), UID: -1, GID: -1})
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestDropsOversize(t *testing.T) {
	s := listen(t, selfOnly, 0)
	snd := newSender(t, s.Path())

	snd.send("READY=1\n" + strings.Repeat("x", heartbeat.MaxDatagram)) // 8 KiB + 8
	eventuallyStats(t, s, func(st heartbeat.StatsSnapshot) bool { return st.Oversize == 1 }, "oversize not counted")
	requireNextIs(t, s, snd)

	// Exactly 8 KiB is accepted.
	max := "WATCHDOG=1\nSTATUS=" + strings.Repeat("é", (heartbeat.MaxDatagram-18)/2)
	require.Len(t, max, heartbeat.MaxDatagram)
	snd.send(max)
	r := recv(t, s)
	require.True(t, r.Msg.Has(heartbeat.FieldWatchdog))
	require.Len(t, r.Msg.Status, heartbeat.MaxText)
	require.Equal(t, uint64(1), s.Stats().Oversize)
}

func TestDropsMalformed(t *testing.T) {
	s := listen(t, selfOnly, 0)
	snd := newSender(t, s.Path())
	for _, bad := range []string{"READY=1\nSTATUS=\xff\xfe", "READY=1\x00STATUS=x", ""} {
		snd.send(bad)
	}
	eventuallyStats(t, s, func(st heartbeat.StatsSnapshot) bool { return st.Malformed == 3 }, "malformed not counted")
	requireNextIs(t, s, snd)
	st := settle(t, s, 4)
	require.Equal(t, uint64(1), st.Accepted)
	require.Equal(t, uint64(3), st.Dropped())
}

// TestDropsForgedSender: a live process of the agent's uid that is not in
// the agent's tree is dropped, counted as forged, and never delivered.
func TestDropsForgedSender(t *testing.T) {
	s := listen(t, selfOnly, 0)
	snd := newSender(t, s.Path())

	h := startHelper(t, "", "send", []string{"HK_SOCKET=" + s.Path(), "HK_MSG=WATCHDOG=1\nPROGRESS=99"}, nil)
	eventuallyStats(t, s, func(st heartbeat.StatsSnapshot) bool { return st.Forged == 1 }, "forged sender not counted")
	requireNextIs(t, s, snd)
	h.release(t)

	st := settle(t, s, 2)
	require.Equal(t, uint64(1), st.Forged)
	require.Equal(t, uint64(1), st.Accepted)
	require.Zero(t, st.Unverifiable)
}

// TestForgedFloodSparesRateBudget: datagrams from outside the tree do not
// spend the agent's rate budget, so a forger cannot starve its heartbeats.
func TestForgedFloodSparesRateBudget(t *testing.T) {
	const rate = 10
	s := listen(t, selfOnly, rate)
	snd := newSender(t, s.Path())

	h := startHelper(t, "", "send", []string{"HK_SOCKET=" + s.Path(), "HK_MSG=WATCHDOG=1", "HK_COUNT=100"}, nil)
	eventuallyStats(t, s, func(st heartbeat.StatsSnapshot) bool { return st.Forged == 100 }, "forged flood not counted")
	h.release(t)
	require.Zero(t, s.Stats().RateLimited)

	for i := range rate { // the agent's full budget is intact
		snd.send("PROGRESS=" + strconv.Itoa(i))
		require.Equal(t, uint64(i), recv(t, s).Msg.Progress)
	}
	st := settle(t, s, 100+rate)
	require.Equal(t, uint64(rate), st.Accepted)
	require.Zero(t, st.RateLimited)
}

func TestGoneSenderIsUnverifiable(t *testing.T) {
	s := listen(t, heartbeat.AuthFunc(func(int) heartbeat.Verdict { return heartbeat.Gone }), 0)
	snd := newSender(t, s.Path())
	snd.send("WATCHDOG=1")
	snd.send("WATCHDOG=1") // Gone is never cached: asked again, dropped again
	eventuallyStats(t, s, func(st heartbeat.StatsSnapshot) bool { return st.Unverifiable == 2 }, "unverifiable not counted")
	st := s.Stats()
	require.Zero(t, st.Accepted)
	require.Zero(t, st.Forged)
	require.Empty(t, s.C())
}

// TestClosesPassedFDs: descriptors passed with SCM_RIGHTS are closed at
// once. That is what completes BARRIER=1: sd_notify_barrier(3) sends the
// write end of a pipe and waits for its read end to see EOF.
func TestClosesPassedFDs(t *testing.T) {
	s := listen(t, selfOnly, 0)
	snd := newSender(t, s.Path())

	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, unix.Sendmsg(snd.fd, []byte("BARRIER=1"), unix.UnixRights(int(w.Fd())), nil, 0))
	require.NoError(t, w.Close()) // ours; the receiver holds the only other copy
	requireEOF(t, r)
	require.True(t, has(recv(t, s), heartbeat.FieldBarrier))
	require.Equal(t, uint64(1), s.Stats().FDsClosed)
}

// TestClosesFDsOfDroppedDatagrams: a datagram that is dropped still has its
// descriptors closed, so neither a forger nor a truncated message can make
// the supervisor hold files open.
func TestClosesFDsOfDroppedDatagrams(t *testing.T) {
	s := listen(t, heartbeat.AuthFunc(func(int) heartbeat.Verdict { return heartbeat.NotMember }), 0)
	snd := newSender(t, s.Path())

	const n = 3
	var readers, writers []*os.File
	var fds []int
	for range n {
		r, w, err := os.Pipe()
		require.NoError(t, err)
		defer r.Close()
		readers, writers = append(readers, r), append(writers, w)
		fds = append(fds, int(w.Fd()))
	}
	require.NoError(t, unix.Sendmsg(snd.fd, []byte("BARRIER=1"), unix.UnixRights(fds...), nil, 0))
	oversize := []byte("BARRIER=1\n" + strings.Repeat("x", heartbeat.MaxDatagram))
	require.NoError(t, unix.Sendmsg(snd.fd, oversize, unix.UnixRights(fds...), nil, 0))
	for _, w := range writers {
		require.NoError(t, w.Close())
	}
	for _, r := range readers {
		requireEOF(t, r)
	}
	st := s.Stats()
	require.Equal(t, uint64(2*n), st.FDsClosed)
	require.Equal(t, uint64(1), st.Forged)
	require.Equal(t, uint64(1), st.Oversize)
	require.Zero(t, st.Accepted)
}

// requireEOF waits for r, a pipe's read end, to see EOF: every copy of the
// write end is closed.
func requireEOF(tb testing.TB, r *os.File) {
	tb.Helper()
	require.NoError(tb, r.SetReadDeadline(time.Now().Add(wait)))
	var buf [1]byte
	_, err := r.Read(buf[:])
	require.ErrorIs(tb, err, io.EOF, "the passed write end is still open")
}

func TestRateLimit(t *testing.T) {
	const rate, burst = 100, 1000
	s := listen(t, selfOnly, rate)
	snd := newSender(t, s.Path())

	start := time.Now()
	for i := range burst {
		snd.send("WATCHDOG=1\nPROGRESS=" + strconv.Itoa(i))
	}
	st := settle(t, s, burst)
	elapsed := time.Since(start)
	// Nobody reads C() during the burst: what passed the limiter either
	// waits in the queue or overflows it.
	passed := st.Accepted + st.Overflow
	require.Equal(t, uint64(burst), passed+st.RateLimited)
	// A burst of one second's worth, plus what refilled while it lasted
	// (the machine may be slow: the bound comes from the measured time).
	refill := uint64(elapsed.Seconds()*rate) + 1
	require.GreaterOrEqual(t, passed, uint64(rate))
	require.LessOrEqual(t, passed, uint64(rate)+refill, "elapsed %v", elapsed)
	t.Logf("burst of %d in %v: %d passed, %d rate-limited", burst, elapsed, passed, st.RateLimited)

	// The first ones are those queued, in order.
	for i := range min(rate, heartbeat.QueueLen) {
		require.Equal(t, uint64(i), recv(t, s).Msg.Progress)
	}
}

// TestOverflowKeepsDraining: a consumer that does not read C() costs
// messages (counted), never the reader's progress, so senders never stall.
func TestOverflowKeepsDraining(t *testing.T) {
	const total = 5000
	s := listen(t, selfOnly, 0)
	snd := newSender(t, s.Path())
	for i := range total {
		snd.send("WATCHDOG=1\nPROGRESS=" + strconv.Itoa(i))
	}
	st := settle(t, s, total)
	require.Equal(t, uint64(heartbeat.QueueLen), st.Accepted)
	require.Equal(t, uint64(total-heartbeat.QueueLen), st.Overflow)
	require.Equal(t, uint64(total-heartbeat.QueueLen), st.Dropped())

	for i := range heartbeat.QueueLen {
		require.Equal(t, uint64(i), recv(t, s).Msg.Progress)
	}
	// Room again: new messages flow.
	snd.send("READY=1")
	require.True(t, has(recv(t, s), heartbeat.FieldReady))
}

func TestClose(t *testing.T) {
	s := listen(t, selfOnly, 0)
	snd := newSender(t, s.Path())
	snd.send("READY=1")
	snd.send("WATCHDOG=1")
	eventuallyStats(t, s, func(st heartbeat.StatsSnapshot) bool { return st.Accepted == 2 }, "not delivered")

	require.NoError(t, s.Close())
	goleak.VerifyNone(t) // the reader is gone
	_, err := os.Lstat(s.Path())
	require.ErrorIs(t, err, os.ErrNotExist, "socket file left behind")

	// What was delivered before Close can still be read, then C() is closed.
	require.True(t, has(<-s.C(), heartbeat.FieldReady))
	require.True(t, has(<-s.C(), heartbeat.FieldWatchdog))
	_, ok := <-s.C()
	require.False(t, ok, "C() not closed")

	require.Zero(t, s.Broadcast(heartbeat.WarningDirective("x", "y")))
	require.ErrorIs(t, unix.Send(snd.fd, []byte("WATCHDOG=1"), 0), unix.ECONNREFUSED)

	// Closing again does nothing: in particular it does not remove the
	// socket of a new supervisor that took the path over since.
	s2 := listenConfig(t, heartbeat.Config{Path: s.Path(), UID: -1, GID: -1, Auth: selfOnly})
	require.NoError(t, s.Close())
	_, err = os.Lstat(s2.Path())
	require.NoError(t, err, "a second Close removed another socket's file")
	newSender(t, s2.Path()).send("READY=1")
	require.True(t, has(recv(t, s2), heartbeat.FieldReady))
}

// TestAuthenticatesBeforeClosingFDs: the sender is authenticated while its
// descriptors are still held. systemd-notify exits as soon as the pipe of
// its BARRIER=1 is closed; closed before authentication, its pid would
// often be gone, and the barrier dropped as unverifiable.
func TestAuthenticatesBeforeClosingFDs(t *testing.T) {
	var p [2]int
	require.NoError(t, unix.Pipe2(p[:], unix.O_CLOEXEC))
	rfd, wfd := p[0], p[1]
	defer unix.Close(rfd)

	ourCopyClosed := make(chan struct{})
	var asked, closedBeforeAuth atomic.Bool
	auth := heartbeat.AuthFunc(func(int) heartbeat.Verdict {
		<-ourCopyClosed // from now on the receiver holds the only write end
		if hungUp(t, rfd, 0) {
			closedBeforeAuth.Store(true)
		}
		asked.Store(true)
		return heartbeat.Member
	})
	s := listen(t, auth, 0)
	snd := newSender(t, s.Path())
	require.NoError(t, unix.Sendmsg(snd.fd, []byte("BARRIER=1"), unix.UnixRights(wfd), nil, 0))
	require.NoError(t, unix.Close(wfd))
	close(ourCopyClosed)

	require.True(t, has(recv(t, s), heartbeat.FieldBarrier))
	require.True(t, asked.Load())
	require.False(t, closedBeforeAuth.Load(), "the barrier's pipe was closed before its sender was authenticated")
	// And it is closed after: the read end sees EOF.
	require.True(t, hungUp(t, rfd, wait), "the barrier's pipe was never closed")
}

// hungUp polls the read end of a pipe for up to timeout and reports
// whether every write end is closed.
func hungUp(tb testing.TB, fd int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, int(max(time.Until(deadline), 0)/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			tb.Errorf("poll: %v", err)
			return false
		}
		return n > 0 && pfd[0].Revents&unix.POLLHUP != 0
	}
}

// The main process has a rate budget of its own: a busy child's
// datagrams, past the shared budget, never drop the main process's beats.
func TestBusyChildSparesMainBudget(t *testing.T) {
	const rate = 10
	s := listen(t, heartbeat.AuthFunc(func(int) heartbeat.Verdict { return heartbeat.Member }), rate)
	s.SetMainPID(os.Getpid())
	snd := newSender(t, s.Path())

	h := startHelper(t, "", "send", []string{"HK_SOCKET=" + s.Path(), "HK_MSG=WATCHDOG=1", "HK_COUNT=100"}, nil)
	eventuallyStats(t, s, func(st heartbeat.StatsSnapshot) bool { return st.Accepted+st.RateLimited == 100 }, "child's flood not read")
	h.release(t)
	require.NotZero(t, s.Stats().RateLimited, "the child went past the shared budget")
	for len(s.C()) > 0 {
		heartbeat.Free(<-s.C())
	}
	for i := range rate { // the main process's full budget is intact
		snd.send("PROGRESS=" + strconv.Itoa(i))
		require.Equal(t, uint64(i), recv(t, s).Msg.Progress)
	}
}
