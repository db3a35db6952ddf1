// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package client_test

import (
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/pkg/client"
)

// fakeSupervisor is hermeskilld's side of the socket, for tests.
type fakeSupervisor struct {
	tb     testing.TB
	conn   *net.UnixConn
	addr   string
	client *net.UnixAddr // where the last datagram came from
}

// shortTempDir returns a temporary directory with a short path: sun_path only
// holds 108 bytes, and t.TempDir() can be longer.
func shortTempDir(tb testing.TB) string {
	dir, err := os.MkdirTemp("", "hk")
	require.NoError(tb, err)
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// newSupervisor listens on a fresh path.
func newSupervisor(tb testing.TB) *fakeSupervisor {
	return listenSupervisor(tb, filepath.Join(shortTempDir(tb), "s.sock"))
}

func listenSupervisor(tb testing.TB, addr string) *fakeSupervisor {
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
	require.NoError(tb, err)
	tb.Cleanup(func() { conn.Close() })
	return &fakeSupervisor{tb: tb, conn: conn, addr: addr}
}

// recv returns the next datagram, failing the test after 5s.
func (s *fakeSupervisor) recv() string {
	s.tb.Helper()
	require.NoError(s.tb, s.conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, 16<<10)
	n, from, err := s.conn.ReadFromUnix(buf)
	require.NoError(s.tb, err)
	s.client = from
	return string(buf[:n])
}

// send sends a directive to the client it last heard from.
func (s *fakeSupervisor) send(directive string) {
	s.tb.Helper()
	require.NotNil(s.tb, s.client, "the client has not spoken yet")
	_, err := s.conn.WriteToUnix([]byte(directive), s.client)
	require.NoError(s.tb, err)
}

// drain reads every datagram in the background until the test ends, and
// returns their count so far.
func (s *fakeSupervisor) drain() (received func() uint64) {
	var n atomic.Uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 16<<10)
		for {
			if _, err := s.conn.Read(buf); err != nil {
				return
			}
			n.Add(1)
		}
	}()
	s.tb.Cleanup(func() {
		s.conn.Close()
		<-done
	})
	return n.Load
}

// dial returns a client of s, closed when the test ends.
func (s *fakeSupervisor) dial() *client.Client {
	s.tb.Helper()
	c, err := client.New(s.addr)
	require.NoError(s.tb, err)
	s.tb.Cleanup(func() { require.NoError(s.tb, c.Close()) })
	return c
}

// recvWarning returns the next warning, failing the test after 5s.
func recvWarning(tb testing.TB, c *client.Client) string {
	tb.Helper()
	select {
	case w, ok := <-c.Warnings():
		require.True(tb, ok, "warnings channel closed")
		return w
	case <-time.After(5 * time.Second):
		tb.Fatal("no warning")
		return ""
	}
}
