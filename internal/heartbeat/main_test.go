// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/heartbeat"
)

// The test binary doubles as a sender process, as os/exec's tests do: with
// helperEnv set, TestMain runs the named helper instead of the tests. A
// helper is a real process with its own pid (and, re-executed under
// SysProcAttr.Credential, its own uid), which is what authentication looks
// at and what one process cannot fake for itself.
const helperEnv = "HK_HEARTBEAT_HELPER"

var helpers = map[string]func() error{
	// send: send HK_COUNT (default 1) datagrams HK_MSG to HK_SOCKET from an
	// unbound socket, print "sent", then stay alive until a line (or EOF)
	// arrives on stdin, so the sender still exists when its datagrams are
	// read and authenticated.
	"send": func() error {
		count := 1
		if s := os.Getenv("HK_COUNT"); s != "" {
			var err error
			if count, err = strconv.Atoi(s); err != nil {
				return err
			}
		}
		fd, err := dialUnbound(os.Getenv("HK_SOCKET"))
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		for range count {
			if err := unix.Send(fd, []byte(os.Getenv("HK_MSG")), 0); err != nil {
				return os.NewSyscallError("send", err)
			}
		}
		fmt.Println("sent")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		return nil
	},
	// stream: connect to the stream socket HK_STREAM, write the message
	// HK_MSG in the stream framing, print "sent", then stay alive until
	// a line (or EOF) arrives on stdin, so the peer still exists when
	// its connection is accepted and screened.
	"stream": func() error {
		c, err := net.Dial("unix", os.Getenv("HK_STREAM"))
		if err != nil {
			return err
		}
		defer c.Close()
		// Refused, the connection may be closed before the write: the
		// write's error is no failure of the helper.
		_, _ = c.Write([]byte(os.Getenv("HK_MSG") + "\n\n"))
		fmt.Println("sent")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		return nil
	},
}

func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		h, ok := helpers[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown helper %q\n", name)
			os.Exit(2)
		}
		if err := h(); err != nil {
			fmt.Printf("error: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// wait bounds every wait for the kernel or another process: generous, since
// the test machine may be loaded.
const wait = 15 * time.Second

// shortTempDir returns a fresh directory with a short path (sun_path holds
// 108 bytes; t.TempDir's paths can be longer), removed when the test ends.
func shortTempDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "hk")
	require.NoError(tb, err)
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// listen opens a heartbeat socket owned by us, with auth and rate, at
// n.sock in a fresh private directory; it is closed when the test ends.
func listen(tb testing.TB, auth heartbeat.Authenticator, rate int) *heartbeat.Socket {
	tb.Helper()
	dir := filepath.Join(shortTempDir(tb), "d")
	require.NoError(tb, heartbeat.PrepareDir(dir, -1, -1))
	return listenConfig(tb, heartbeat.Config{
		Path: filepath.Join(dir, "n.sock"), UID: -1, GID: -1, Auth: auth, Rate: rate,
	})
}

// listenConfig opens a heartbeat socket with cfg, closed when the test ends.
func listenConfig(tb testing.TB, cfg heartbeat.Config) *heartbeat.Socket {
	tb.Helper()
	if cfg.Poller == nil {
		cfg.Poller = suitePoller
	}
	s, err := heartbeat.Listen(cfg)
	require.NoError(tb, err)
	tb.Cleanup(func() { s.Close() })
	return s
}

// selfOnly authenticates this test process only.
var selfOnly = heartbeat.AuthFunc(func(pid int) heartbeat.Verdict {
	if pid == os.Getpid() {
		return heartbeat.Member
	}
	return heartbeat.NotMember
})

// dialUnbound returns a blocking datagram socket connected to path and not
// bound, as sd_notify(3) and systemd-notify send.
func dialUnbound(path string) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return -1, os.NewSyscallError("connect", err)
	}
	return fd, nil
}

// sender is an unbound socket connected to a heartbeat socket.
type sender struct {
	tb testing.TB
	fd int
}

func newSender(tb testing.TB, path string) *sender {
	tb.Helper()
	fd, err := dialUnbound(path)
	require.NoError(tb, err)
	tb.Cleanup(func() { unix.Close(fd) })
	return &sender{tb: tb, fd: fd}
}

// send sends one datagram, blocking while the receiver's queue is full.
func (s *sender) send(msg string) {
	s.tb.Helper()
	require.NoError(s.tb, unix.Send(s.fd, []byte(msg), 0))
}

// trySend sends one datagram without blocking, returning the error.
func (s *sender) trySend(msg string) error {
	return unix.Send(s.fd, []byte(msg), unix.MSG_DONTWAIT)
}

// recv returns the next delivered message, failing the test after wait.
func recv(tb testing.TB, s *heartbeat.Socket) heartbeat.Received {
	tb.Helper()
	select {
	case r, ok := <-s.C():
		require.True(tb, ok, "C() closed")
		return *r
	case <-time.After(wait):
		tb.Fatalf("no message delivered within %v; stats %+v", wait, s.Stats())
		return heartbeat.Received{}
	}
}

// eventuallyStats waits until cond holds for the socket's counters.
func eventuallyStats(tb testing.TB, s *heartbeat.Socket, cond func(heartbeat.StatsSnapshot) bool, msg string) {
	tb.Helper()
	require.Eventually(tb, func() bool { return cond(s.Stats()) }, wait, 5*time.Millisecond,
		"%s; stats %+v", msg, s.Stats())
}

// settle waits until the socket has read n datagrams and counted the fate
// of each: a message can reach C() a moment before it is counted Accepted.
func settle(tb testing.TB, s *heartbeat.Socket, n uint64) heartbeat.StatsSnapshot {
	tb.Helper()
	eventuallyStats(tb, s, func(st heartbeat.StatsSnapshot) bool {
		return st.Received == n && st.Accepted+st.Dropped() == n
	}, "datagrams not all read and counted")
	return s.Stats()
}

// requireNextIs sends a sentinel from this process and requires it to be
// the next delivered message: whatever was read before it was not delivered.
func requireNextIs(tb testing.TB, s *heartbeat.Socket, snd *sender) {
	tb.Helper()
	snd.send("STATUS=sentinel")
	r := recv(tb, s)
	require.Equal(tb, "sentinel", r.Msg.Status, "a dropped datagram was delivered: %+v", r)
}

// has is Received.Msg.Has for a value that is not addressable.
func has[R heartbeat.Received | *heartbeat.Received](r R, f heartbeat.Field) bool {
	switch v := any(r).(type) {
	case *heartbeat.Received:
		return v.Msg.Has(f)
	case heartbeat.Received:
		return v.Msg.Has(f)
	}
	return false
}

// helperProc is a running helper process.
type helperProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	pid   int
}

// startHelper runs the test binary bin (os.Args[0] when empty) as helper
// name with the extra environment, as cred when not nil, and waits for its
// "sent" line. The helper is released and reaped when the test ends.
func startHelper(tb testing.TB, bin, name string, env []string, cred *syscall.Credential) *helperProc {
	tb.Helper()
	if bin == "" {
		bin = os.Args[0]
	}
	cmd := exec.Command(bin)
	cmd.Env = append(append(os.Environ(), helperEnv+"="+name), env...)
	cmd.Stderr = os.Stderr
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	stdin, err := cmd.StdinPipe()
	require.NoError(tb, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(tb, err)
	require.NoError(tb, cmd.Start())
	h := &helperProc{cmd: cmd, stdin: stdin, pid: cmd.Process.Pid}
	tb.Cleanup(func() { h.release(tb) })

	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(tb, err, "helper %s: no readiness line", name)
	require.Equal(tb, "sent", strings.TrimSpace(line), "helper %s", name)
	return h
}

// release lets the helper exit and reaps it; idempotent.
func (h *helperProc) release(tb testing.TB) {
	if h.stdin == nil {
		return
	}
	h.stdin.Close() // EOF: the helper exits
	h.stdin = nil
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(tb, err, "helper exit")
	case <-time.After(wait):
		_ = h.cmd.Process.Kill()
		<-done
		tb.Errorf("helper %d did not exit", h.pid)
	}
}
