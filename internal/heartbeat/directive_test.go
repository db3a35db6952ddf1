// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/heartbeat"
	"github.com/hermeskill/hermeskilld/pkg/client"
)

func TestDirectivePayloads(t *testing.T) {
	require.Equal(t, "STOP=1\nCHECK=tool_loop\nREASON=same call 5 times\nGRACE_USEC=10000000\n"+
		"KILL_EVENT_ID=0193d5d8-7c4b-7a3e-9f21-0c5b1e2d3f40",
		string(heartbeat.StopDirective("tool_loop", "same call 5 times", 10*time.Second, "0193d5d8-7c4b-7a3e-9f21-0c5b1e2d3f40")))
	require.Equal(t, "STOP=1\nCHECK=manual\nREASON=a b  c\nGRACE_USEC=0\nKILL_EVENT_ID=k 1",
		string(heartbeat.StopDirective("manual", "a\nb\r\nc", 0, "k\n1")), "a reason cannot inject lines")
	require.Equal(t, "STOP=1\nCHECK=x y\nREASON=\nGRACE_USEC=1500",
		string(heartbeat.StopDirective("x\ny", "", 1500*time.Microsecond, "")), "no id, no KILL_EVENT_ID")
	require.Equal(t, "WARNING=memory: tree RSS 1.1GiB over 1GiB",
		string(heartbeat.WarningDirective("memory", "tree RSS 1.1GiB over 1GiB")))
	require.Equal(t, "WARNING=cost: a STOP=1",
		string(heartbeat.WarningDirective("cost", "a\nSTOP=1")))
}

// dialBound returns a client socket bound to an autobound abstract address
// and connected to path, as pkg/client and the Python client do.
func dialBound(tb testing.TB, path string) *net.UnixConn {
	tb.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	require.NoError(tb, err)
	f := os.NewFile(uintptr(fd), "client")
	defer f.Close()
	require.NoError(tb, unix.Bind(fd, &unix.SockaddrUnix{})) // autobind (unix(7))
	require.NoError(tb, unix.Connect(fd, &unix.SockaddrUnix{Name: path}))
	c, err := net.FileConn(f)
	require.NoError(tb, err)
	tb.Cleanup(func() { c.Close() })
	return c.(*net.UnixConn)
}

// read returns the next datagram on c, failing after wait.
func read(tb testing.TB, c *net.UnixConn) string {
	tb.Helper()
	require.NoError(tb, c.SetReadDeadline(time.Now().Add(wait)))
	buf := make([]byte, 16<<10)
	n, err := c.Read(buf)
	require.NoError(tb, err)
	return string(buf[:n])
}

func TestBroadcastToBoundClient(t *testing.T) {
	s := listen(t, selfOnly, 0)
	c := dialBound(t, s.Path())
	_, err := c.Write([]byte("READY=1"))
	require.NoError(t, err)
	r := recv(t, s)
	self := c.LocalAddr().(*net.UnixAddr).Name
	require.True(t, strings.HasPrefix(self, "@"), "autobind gives an abstract name, got %q", self)
	require.Equal(t, self, r.Client)
	require.Equal(t, 1, s.Clients())

	// More messages from the same client do not add it twice.
	_, err = c.Write([]byte("WATCHDOG=1"))
	require.NoError(t, err)
	recv(t, s)
	require.Equal(t, 1, s.Clients())

	stop := heartbeat.StopDirective("tool_loop", "same call 5 times", 10*time.Second, "kill-1")
	require.Equal(t, 1, s.Broadcast(stop))
	require.Equal(t, string(stop), read(t, c))
	warn := heartbeat.WarningDirective("memory", "tree RSS 1.1GiB over 1GiB")
	require.Equal(t, 1, s.Broadcast(warn))
	require.Equal(t, string(warn), read(t, c))
	st := s.Stats()
	require.Equal(t, uint64(2), st.Directives)
	require.Zero(t, st.DirDropped)
}

func TestBroadcastSkipsUnboundAndForgotten(t *testing.T) {
	s := listen(t, selfOnly, 0)

	// An unbound sender (systemd-notify, sd_notify(3)) has no address.
	newSender(t, s.Path()).send("READY=1")
	require.Empty(t, recv(t, s).Client)
	require.Zero(t, s.Clients())
	require.Zero(t, s.Broadcast(heartbeat.WarningDirective("a", "b")))

	// A client that went away is forgotten at the first failed send.
	c := dialBound(t, s.Path())
	_, err := c.Write([]byte("WATCHDOG=1"))
	require.NoError(t, err)
	require.NotEmpty(t, recv(t, s).Client)
	require.Equal(t, 1, s.Clients())
	require.NoError(t, c.Close())
	require.Zero(t, s.Broadcast(heartbeat.WarningDirective("a", "b")))
	require.Zero(t, s.Clients())
	st := s.Stats()
	require.Equal(t, uint64(1), st.DirDropped)
	require.Zero(t, st.Directives)
}

// TestBroadcastSkipsForgedClient: a bound sender that fails
// authentication is never registered, so it learns nothing.
func TestBroadcastSkipsForgedClient(t *testing.T) {
	s := listen(t, heartbeat.AuthFunc(func(int) heartbeat.Verdict { return heartbeat.NotMember }), 0)
	c := dialBound(t, s.Path())
	_, err := c.Write([]byte("READY=1"))
	require.NoError(t, err)
	eventuallyStats(t, s, func(st heartbeat.StatsSnapshot) bool { return st.Forged == 1 }, "forged client not counted")
	require.Zero(t, s.Clients())
	require.Zero(t, s.Broadcast(heartbeat.StopDirective("manual", "x", time.Second, "")))
}

// TestClientEndToEnd: the real Go client turns the STOP directive into the
// cancellation of its context, with a *client.StopError as the cause.
func TestClientEndToEnd(t *testing.T) {
	s := listen(t, selfOnly, 0)
	c, err := client.New(s.Path())
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	ctx := c.Context(context.Background())

	c.Ready()
	c.Progress(3)
	c.Status("indexing 3/10")
	r := recv(t, s)
	require.True(t, has(r, heartbeat.FieldReady))
	require.NotEmpty(t, r.Client)
	require.Equal(t, uint64(3), recv(t, s).Msg.Progress)
	require.Equal(t, "indexing 3/10", recv(t, s).Msg.Status)
	require.NoError(t, c.ToolCall("web_search", map[string]any{"q": "a<b", "n": 1}))
	r = recv(t, s)
	require.Equal(t, "web_search", r.Msg.Tool)
	require.Equal(t, hash64, r.Msg.ToolArgsSHA256)

	require.Equal(t, 1, s.Broadcast(heartbeat.WarningDirective("memory", "high")))
	select {
	case w := <-c.Warnings():
		require.Equal(t, "memory: high", w)
	case <-time.After(wait):
		t.Fatal("no warning")
	}

	require.Equal(t, 1, s.Broadcast(heartbeat.StopDirective("tool_loop", "x", time.Second, "0193d5d8-7c4b-7a3e-9f21-0c5b1e2d3f40")))
	select {
	case <-ctx.Done():
	case <-time.After(wait):
		t.Fatal("context not cancelled by STOP")
	}
	var stop *client.StopError
	require.True(t, errors.As(context.Cause(ctx), &stop), "cause %v", context.Cause(ctx))
	require.Equal(t, client.StopError{Check: "tool_loop", Reason: "x", Grace: time.Second,
		KillEventID: "0193d5d8-7c4b-7a3e-9f21-0c5b1e2d3f40"}, *stop)
	require.Zero(t, c.Dropped())
}

// TestBroadcastSkipsRelativeClient: a client bound to a relative path named
// a file relative to its own directory; resolved from the supervisor's, it
// would reach another socket or none, so it is not a directive target.
func TestBroadcastSkipsRelativeClient(t *testing.T) {
	s := listen(t, selfOnly, 0)
	cwd, err := os.Getwd()
	require.NoError(t, err)
	rel, err := filepath.Rel(cwd, filepath.Join(shortTempDir(t), "c.sock"))
	require.NoError(t, err)
	require.False(t, filepath.IsAbs(rel))

	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, unix.Bind(fd, &unix.SockaddrUnix{Name: rel}))
	require.NoError(t, unix.Sendto(fd, []byte("READY=1"), 0, &unix.SockaddrUnix{Name: s.Path()}))
	r := recv(t, s)
	require.Equal(t, rel, r.Client)
	require.Zero(t, s.Clients())
}
