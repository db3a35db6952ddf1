// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package client_test

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The supervisor drains in the background; whatever finds its queue full is
// dropped, and reported as dropped/op.

func BenchmarkBeat(b *testing.B) {
	sup := newSupervisor(b)
	sup.drain()
	c := sup.dial()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		c.Beat()
		n++
	}
	b.ReportMetric(float64(c.Dropped())/float64(n), "dropped/op")
}

func BenchmarkProgress(b *testing.B) {
	sup := newSupervisor(b)
	sup.drain()
	c := sup.dial()
	b.ReportAllocs()
	var n uint64
	for b.Loop() {
		n++
		c.Progress(n)
	}
	b.ReportMetric(float64(c.Dropped())/float64(n), "dropped/op")
}

func BenchmarkToolCall(b *testing.B) {
	sup := newSupervisor(b)
	sup.drain()
	c := sup.dial()
	args := map[string]any{"query": "hermeskill kill switch", "max_results": 10, "site": "<docs>"}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if err := c.ToolCall("web_search", args); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(c.Dropped())/float64(n), "dropped/op")
}

// BenchmarkWriteSyscall is the floor under BenchmarkBeat: the same datagram
// written to the same kind of socket, without the client.
func BenchmarkWriteSyscall(b *testing.B) {
	sup := newSupervisor(b)
	sup.drain()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: sup.addr}); err != nil {
		b.Fatal(err)
	}
	msg := []byte("WATCHDOG=1")
	b.ReportAllocs()
	for b.Loop() {
		_, _ = unix.Write(fd, msg)
	}
}
