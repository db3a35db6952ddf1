// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"net"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// connected opens n loopback connections on network/addr and returns the
// last client end; all are closed when the test ends.
func connected(tb testing.TB, network, addr string, n int) net.Conn {
	ln, err := net.Listen(network, addr)
	require.NoError(tb, err)
	done := make(chan struct{})
	var accepted []net.Conn
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted = append(accepted, c)
		}
	}()
	var last net.Conn
	var clients []net.Conn
	for range n {
		c, err := net.Dial(network, ln.Addr().String())
		require.NoError(tb, err)
		clients = append(clients, c)
		last = c
	}
	tb.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range append(clients, accepted...) {
			c.Close()
		}
	})
	return last
}

// sock_diag and /proc/net agree on a client socket's inode and owner, for
// IPv4 and IPv6 loopback; a socket that does not exist is an error, never
// another socket's entry.
func TestSocketEntryBySockDiag(t *testing.T) {
	for _, tc := range []struct{ network, addr string }{{"tcp4", "127.0.0.1:0"}, {"tcp6", "[::1]:0"}} {
		t.Run(tc.network, func(t *testing.T) {
			if tc.network == "tcp6" {
				if ln, err := net.Listen("tcp6", tc.addr); err != nil {
					t.Skipf("no IPv6 loopback here: %v", err)
				} else {
					ln.Close()
				}
			}
			c := connected(t, tc.network, tc.addr, 3)
			local, remote := c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr)
			before := diagUnsupported.Load()
			inode, uid, err := socketEntry(nil, local, remote)
			require.NoError(t, err)
			require.Equal(t, before, diagUnsupported.Load(), "sock_diag was not used")
			pinode, puid, err := procNetEntry(local, remote)
			require.NoError(t, err)
			assert.Equal(t, pinode, inode)
			assert.Equal(t, puid, uid)
			assert.Equal(t, strconv.Itoa(os.Geteuid()), uid)

			gone := *remote
			gone.Port = 1
			_, _, err = socketEntry(nil, local, &gone)
			require.Error(t, err)
		})
	}
}

// The lookup's cost with 2,000 sockets open (both ends of 1,000 loopback
// connections): sock_diag's exact lookup against the whole /proc/net/tcp.
func BenchmarkSocketEntry(b *testing.B) {
	c := connected(b, "tcp4", "127.0.0.1:0", 1000)
	local, remote := c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr)
	b.Run("sock_diag", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := socketEntry(nil, local, remote); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("proc_net_tcp", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := procNetEntry(local, remote); err != nil {
				b.Fatal(err)
			}
		}
	})
}
