// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package client_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
	"github.com/hermeskill/hermeskilld/pkg/client"
)

// pinnedHash is the sha256 of {"n":1,"q":"a<b"}, computed by Python:
// json.dumps({"q":"a<b","n":1}, sort_keys=True, separators=(",",":"), ensure_ascii=False).
const pinnedHash = "6802a7c2b17e87b4a48247e8a05a547826899abba22624e4123454068da8f6eb"

func TestMessages(t *testing.T) {
	sup := newSupervisor(t)
	c := sup.dial()
	require.True(t, c.Supervised())

	for _, tc := range []struct {
		name string
		call func()
		want string
	}{
		{"Ready", c.Ready, "READY=1"},
		{"Beat", c.Beat, "WATCHDOG=1"},
		{"Stopping", c.Stopping, "STOPPING=1"},
		{"Status", func() { c.Status("indexing 3/10") }, "STATUS=indexing 3/10"},
		{"Status multi-line", func() { c.Status("a\nb\r\nc") }, "STATUS=a b  c"},
		{"Status too long", func() { c.Status(strings.Repeat("x", 5000)) }, "STATUS=" + strings.Repeat("x", 1024)},
		{"Status cut on a rune", func() { c.Status(strings.Repeat("x", 1023) + "é") }, "STATUS=" + strings.Repeat("x", 1023)},
		{"Trigger", func() { c.Trigger("I am\nlooping") }, "WATCHDOG=trigger\nSTATUS=I am looping"},
		{"Progress", func() { c.Progress(42) }, "PROGRESS=42"},
		{"Progress max", func() { c.Progress(math.MaxUint64) }, "PROGRESS=18446744073709551615"},
		{"Usage", func() { c.Usage(1200, 0.25) }, "TOKENS=1200\nCOST_USD=0.25"},
		{"Usage tiny cost", func() { c.Usage(7, 0.000125) }, "TOKENS=7\nCOST_USD=0.000125"},
		{"Usage bad cost", func() { c.Usage(7, math.NaN()) }, "TOKENS=7"},
		{"ToolCall", func() {
			require.NoError(t, c.ToolCall("web_search", map[string]any{"q": "a<b", "n": 1}))
		}, "TOOL=web_search\nTOOL_ARGS_SHA256=" + pinnedHash},
		{"Error", func() { c.Error(errors.New("timeout\nafter 30s")) }, "ERROR=timeout after 30s"},
		{"DumpSignal", func() { c.DumpSignal(syscall.SIGQUIT) }, "DUMP_SIGNAL=SIGQUIT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.call()
			require.Equal(t, tc.want, sup.recv())
		})
	}

	c.Error(nil) // ignored: the next datagram is the beat
	c.Beat()
	require.Equal(t, "WATCHDOG=1", sup.recv())
	require.Error(t, c.ToolCall("bad", func() {}))
	require.Zero(t, c.Dropped())
}

// The STOP hermeskilld sends (heartbeat.StopDirective, through a real
// socket) carries the kill's event id: the id of the certificate.
func TestStopDirectiveKillEventID(t *testing.T) {
	sup := newSupervisor(t)
	c := sup.dial()
	ctx := c.Context(context.Background())
	c.Ready()
	sup.recv()

	id := certs.NewID()
	sup.send(string(heartbeat.StopDirective("cost", "cost $5.02 over kill threshold $5.00", 2*time.Second, id)))
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("context not cancelled by STOP")
	}
	var stop *client.StopError
	require.ErrorAs(t, context.Cause(ctx), &stop)
	require.Equal(t, client.StopError{Check: "cost", Reason: "cost $5.02 over kill threshold $5.00", Grace: 2 * time.Second,
		KillEventID: id}, *stop)
}

func TestStopDirective(t *testing.T) {
	sup := newSupervisor(t)
	c := sup.dial()
	ctx := c.Context(context.Background())
	c.Ready()
	sup.recv()

	sup.send("STOP=1\nCHECK=tool_loop\nREASON=same call 5 times\nGRACE_USEC=10000000")
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("context not cancelled by STOP")
	}
	var stop *client.StopError
	require.ErrorAs(t, context.Cause(ctx), &stop)
	require.Equal(t, client.StopError{Check: "tool_loop", Reason: "same call 5 times", Grace: 10 * time.Second}, *stop)
	require.EqualError(t, stop, "hermeskilld stop: tool_loop: same call 5 times")

	later := c.Context(context.Background())
	require.ErrorIs(t, later.Err(), context.Canceled, "a context made after STOP starts cancelled")
	require.Same(t, stop, context.Cause(later))

	sup.send("STOP=1\nCHECK=manual") // the first STOP stays the cause
	sup.send("WARNING=after")
	require.Equal(t, "after", recvWarning(t, c))
	require.Same(t, stop, context.Cause(c.Context(context.Background())))
}

func TestContextFollowsParent(t *testing.T) {
	c := newSupervisor(t).dial()
	parent, cancel := context.WithCancel(context.Background())
	ctx := c.Context(parent)
	require.NoError(t, ctx.Err())
	cancel()
	<-ctx.Done()
	require.ErrorIs(t, context.Cause(ctx), context.Canceled)
}

func TestWarningDirective(t *testing.T) {
	sup := newSupervisor(t)
	c := sup.dial()
	c.Ready()
	sup.recv()
	sup.send("WARNING=memory: tree RSS 1.1GiB over 1GiB")
	require.Equal(t, "memory: tree RSS 1.1GiB over 1GiB", recvWarning(t, c))
}

// The client's socket is connected to the supervisor, so the kernel refuses
// datagrams from any other socket, even though its abstract address is
// reachable by every local process.
func TestDirectivesOnlyFromSupervisor(t *testing.T) {
	sup := newSupervisor(t)
	c := sup.dial()
	c.Ready()
	sup.recv()

	stranger := newSupervisor(t)
	_, err := stranger.conn.WriteToUnix([]byte("STOP=1\nCHECK=forged"), sup.client)
	require.ErrorIs(t, err, syscall.EPERM)
	_, err = stranger.conn.WriteToUnix([]byte("WARNING=forged"), sup.client)
	require.ErrorIs(t, err, syscall.EPERM)

	sup.send("WARNING=genuine")
	require.Equal(t, "genuine", recvWarning(t, c), "the first warning received is the supervisor's")
	require.NoError(t, c.Context(context.Background()).Err())
}

// A supervisor that never reads fills its queue; the client must then drop
// and count, not block.
func TestFullQueueDrops(t *testing.T) {
	sup := newSupervisor(t)
	c := sup.dial()
	for i := 0; i < 1000 && c.Dropped() == 0; i++ {
		c.Beat()
	}
	require.NotZero(t, c.Dropped(), "the queue never filled")

	before := c.Dropped()
	start := time.Now()
	for range 100 {
		c.Beat()
		c.Progress(1)
	}
	require.Less(t, time.Since(start), time.Second, "sends blocked on a full queue")
	require.Equal(t, before+200, c.Dropped())
}

func TestAbstractAddress(t *testing.T) {
	sup := listenSupervisor(t, fmt.Sprintf("@hk-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	c := sup.dial()
	c.Beat()
	require.Equal(t, "WATCHDOG=1", sup.recv())
	sup.send("WARNING=abstract works")
	require.Equal(t, "abstract works", recvWarning(t, c))
}

type fakeClock struct{ now time.Time }

func (f *fakeClock) Now() time.Time { return f.now }

func TestReconnect(t *testing.T) {
	path := filepath.Join(shortTempDir(t), "s.sock")
	sup := listenSupervisor(t, path)
	c := sup.dial()
	clock := &fakeClock{now: time.Unix(1000, 0)}
	client.SetClock(c, clock.Now)
	c.Ready()
	sup.recv()
	clientAddr := sup.client

	require.NoError(t, sup.conn.Close())
	require.NoError(t, os.Remove(path))
	c.Beat() // ECONNREFUSED, and nobody to reconnect to
	require.EqualValues(t, 1, c.Dropped())

	stranger := newSupervisor(t)
	_, err := stranger.conn.WriteToUnix([]byte("STOP=1"), clientAddr)
	require.ErrorIs(t, err, syscall.EPERM, "a disconnected client must still refuse strangers")

	back := listenSupervisor(t, path)
	c.Beat() // less than a second after the last attempt: not retried
	require.EqualValues(t, 2, c.Dropped())

	clock.now = clock.now.Add(time.Second)
	c.Beat()
	require.Equal(t, "WATCHDOG=1", back.recv())
	require.EqualValues(t, 2, c.Dropped())
	back.send("WARNING=reconnected")
	require.Equal(t, "reconnected", recvWarning(t, c))
}

// A supervisor restarted between two sends gets the second one: the send that
// finds the old socket dead reconnects and retries at once.
func TestReconnectRetriesTheMessage(t *testing.T) {
	path := filepath.Join(shortTempDir(t), "s.sock")
	sup := listenSupervisor(t, path)
	c := sup.dial()
	require.NoError(t, sup.conn.Close())
	require.NoError(t, os.Remove(path))

	back := listenSupervisor(t, path)
	c.Progress(3)
	require.Equal(t, "PROGRESS=3", back.recv())
	require.Zero(t, c.Dropped())
}

func TestHeartbeatUntilContextEnds(t *testing.T) {
	sup := newSupervisor(t)
	c := sup.dial()
	client.SetWatchdog(c, time.Hour) // the creation vouches for an hour
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Heartbeat(ctx, time.Millisecond)
	}()
	for range 3 {
		require.Equal(t, "WATCHDOG=1", sup.recv())
	}
	cancel()
	waitClosed(t, done, "Heartbeat did not return when its context ended")
}

func TestHeartbeatUntilClose(t *testing.T) {
	sup := newSupervisor(t)
	c := sup.dial()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Heartbeat(context.Background(), time.Hour)
	}()
	require.Equal(t, "WATCHDOG=1", sup.recv(), "the first beat is immediate")
	require.NoError(t, c.Close())
	waitClosed(t, done, "Heartbeat did not return on Close")
}

func waitClosed(t *testing.T, ch <-chan struct{}, msg string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal(msg)
	}
}

func TestClose(t *testing.T) {
	sup := newSupervisor(t)
	c := sup.dial()
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	_, ok := <-c.Warnings()
	require.False(t, ok, "Close closes the warnings channel")

	c.Beat() // after Close: nothing, no panic
	c.Progress(1)
	require.Zero(t, c.Dropped())
	require.NoError(t, sup.conn.SetReadDeadline(time.Now()))
	_, err := sup.conn.Read(make([]byte, 64))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "nothing was sent after Close")
}

// Every message is either delivered or counted as dropped, whatever the
// concurrency, including a Close in the middle.
func TestConcurrentUse(t *testing.T) {
	sup := newSupervisor(t)
	received := sup.drain()
	c := sup.dial()

	const workers, rounds = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ctx := c.Context(context.Background())
			for i := range rounds {
				c.Beat()
				c.Progress(uint64(i))
				c.Usage(uint64(i), float64(i)/100)
				assert.NoError(t, c.ToolCall("search", map[string]int{"w": w}))
				c.Status("working")
			}
			assert.NoError(t, ctx.Err())
		})
	}
	wg.Wait()
	const sent = workers * rounds * 5
	require.Eventually(t, func() bool { return received()+c.Dropped() == sent },
		5*time.Second, time.Millisecond, "received %d + dropped %d != %d", received(), c.Dropped(), sent)

	for range 4 {
		wg.Go(func() {
			for range rounds {
				c.Beat()
			}
		})
	}
	require.NoError(t, c.Close())
	wg.Wait()
}

func TestNewWithoutSupervisor(t *testing.T) {
	absent := filepath.Join(shortTempDir(t), "absent.sock")
	countFDs := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		require.NoError(t, err)
		return len(entries)
	}
	before := countFDs()
	for range 10 {
		_, err := client.New(absent)
		require.ErrorIs(t, err, syscall.ENOENT)
		require.EqualError(t, err, "dial "+absent+": connect: no such file or directory")
	}
	require.Equal(t, before, countFDs(), "a failed New leaks no descriptor")
}
