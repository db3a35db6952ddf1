// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/heartbeat"
)

// suitePoller, when set, reads every socket the tests' listen opens.
var suitePoller *heartbeat.Poller

func newPoller(tb testing.TB, interval time.Duration) *heartbeat.Poller {
	tb.Helper()
	p, err := heartbeat.NewPoller(interval)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, p.Close()) })
	return p
}

// Read by a poller, a socket keeps every promise of its own reader's.
func TestPollerKeepsTheSocketPromises(t *testing.T) {
	suitePoller = newPoller(t, 20*time.Millisecond)
	defer func() { suitePoller = nil }()
	for name, test := range map[string]func(*testing.T){
		"delivers":               TestDeliversAuthenticatedMessage,
		"oversize":               TestDropsOversize,
		"malformed":              TestDropsMalformed,
		"forged":                 TestDropsForgedSender,
		"forged flood":           TestForgedFloodSparesRateBudget,
		"gone":                   TestGoneSenderIsUnverifiable,
		"passed fds":             TestClosesPassedFDs,
		"fds of dropped":         TestClosesFDsOfDroppedDatagrams,
		"rate":                   TestRateLimit,
		"overflow":               TestOverflowKeepsDraining,
		"auth before fds closed": TestAuthenticatesBeforeClosingFDs,
		"broadcast":              TestBroadcastToBoundClient,
		"broadcast unbound":      TestBroadcastSkipsUnboundAndForgotten,
		"broadcast forged":       TestBroadcastSkipsForgedClient,
		"client end to end":      TestClientEndToEnd,
		"stream":                 TestStreamDelivers,
		"stream directive":       TestStreamDirective,
		"stream close":           TestStreamClose,
	} {
		t.Run(name, test)
	}
}

// A datagram read late carries its arrival time, not its reading time.
func TestPollerStampsArrival(t *testing.T) {
	// The poller's first look is one interval after its start: a
	// datagram sent now waits for it.
	p := newPoller(t, 400*time.Millisecond)
	s := listenConfig(t, heartbeat.Config{Path: sockIn(t), UID: -1, GID: -1, Auth: selfOnly, Poller: p})
	snd := newSender(t, s.Path())

	sent := time.Now()
	snd.send("STATUS=late")
	r := recv(t, s)
	read := time.Now()
	require.Equal(t, "late", r.Msg.Status)
	assert.Greater(t, read.Sub(sent), 200*time.Millisecond, "the second datagram waited for the next batch")
	assert.False(t, r.At.Before(sent.Add(-time.Millisecond)), "At %v is before the send at %v", r.At, sent)
	assert.Less(t, r.At.Sub(sent), 100*time.Millisecond, "At is the reading time, not the arrival")
}

// Sync reads what has arrived without waiting for the next batch.
func TestPollerSync(t *testing.T) {
	p := newPoller(t, 5*time.Second)
	s := listenConfig(t, heartbeat.Config{Path: sockIn(t), UID: -1, GID: -1, Auth: selfOnly, Poller: p})
	snd := newSender(t, s.Path())
	snd.send("WATCHDOG=1")
	recv(t, s)
	snd.send("STATUS=now")
	s.Sync()
	select {
	case r := <-s.C():
		require.Equal(t, "now", r.Msg.Status)
	case <-time.After(time.Second):
		t.Fatal("Sync did not read the datagram that had arrived")
	}
}

// Many sockets beating at once are read in a few batches, not one wake-up
// per datagram.
func TestPollerBatches(t *testing.T) {
	const socks, rounds = 50, 10
	interval := 50 * time.Millisecond
	p := newPoller(t, interval)
	var senders []*sender
	var ss []*heartbeat.Socket
	for range socks {
		s := listenConfig(t, heartbeat.Config{Path: sockIn(t), UID: -1, GID: -1, Auth: selfOnly, Poller: p})
		ss = append(ss, s)
		senders = append(senders, newSender(t, s.Path()))
	}
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				recv(t, s)
			}
		}()
	}
	began := time.Now()
	before := p.Batches()
	beat := time.NewTicker(2 * interval) // each socket beats once every two intervals
	defer beat.Stop()
	for range rounds {
		for _, snd := range senders {
			snd.send("WATCHDOG=1")
		}
		<-beat.C
	}
	wg.Wait()
	took := time.Since(began)
	batches := p.Batches() - before
	limit := uint64(took/interval) + 3
	assert.LessOrEqual(t, batches, limit, "%d datagrams in %v took %d batches", socks*rounds, took, batches)
}

// A socket closed while datagrams keep coming is read no more; its
// channel is closed and the file removed.
func TestPollerClose(t *testing.T) {
	p := newPoller(t, time.Millisecond)
	for range 20 {
		path := sockIn(t)
		s, err := heartbeat.Listen(heartbeat.Config{Path: path, UID: -1, GID: -1, Auth: selfOnly, Poller: p})
		require.NoError(t, err)
		snd := newSender(t, path)
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
					_ = snd.trySend("WATCHDOG=1")
				}
			}
		}()
		first := make(chan struct{})
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			for r := range s.C() {
				select {
				case <-first:
				default:
					close(first)
				}
				heartbeat.Free(r)
			}
		}()
		<-first // closed while datagrams flow
		require.NoError(t, s.Close())
		close(stop)
		<-done
		select {
		case <-drained: // what was queued before Close, then the end
		case <-time.After(wait):
			t.Fatal("C() still open after Close")
		}
		_, err = os.Stat(path)
		require.ErrorIs(t, err, os.ErrNotExist)
	}
}

func sockIn(tb testing.TB) string {
	dir := filepath.Join(shortTempDir(tb), "d")
	require.NoError(tb, heartbeat.PrepareDir(dir, -1, -1))
	return filepath.Join(dir, "n.sock")
}

// An agent sending faster than a heartbeat loses nothing to the kernel's
// small datagram queue: the poller looks again soon while a socket is busy.
func TestPollerKeepsUpWithABusySocket(t *testing.T) {
	p := newPoller(t, time.Second)
	s := listenConfig(t, heartbeat.Config{Path: sockIn(t), UID: -1, GID: -1, Auth: selfOnly, Poller: p})
	snd := newSender(t, s.Path())
	const n = 2000
	go func() {
		for i := range n {
			for snd.trySend("PROGRESS="+strconv.Itoa(i+1)) != nil {
				runtime.Gosched() // the queue is full: the client would drop; this sender waits
			}
		}
	}()
	began := time.Now()
	for i := range n {
		r := recv(t, s)
		require.Equal(t, uint64(i+1), r.Msg.Progress)
	}
	// Blocked senders are drained at the busy pace, not once a second.
	assert.Less(t, time.Since(began), 10*time.Second)
}

// A socket whose run is not ready yet is not read, and holds back no
// other socket: what reached it waits in the kernel's queue and is read,
// with its arrival time, once the run is ready.
func TestPollerNotHeldByUnreadySocket(t *testing.T) {
	interval := 20 * time.Millisecond
	p := newPoller(t, interval)
	ready := make(chan struct{})
	var early atomic.Bool
	auth := heartbeat.AuthFunc(func(pid int) heartbeat.Verdict {
		select {
		case <-ready:
		default:
			early.Store(true)
		}
		return selfOnly.Authenticate(pid)
	})
	a := listenConfig(t, heartbeat.Config{Path: sockIn(t), UID: -1, GID: -1, Auth: auth, Poller: p, Ready: ready})
	b := listenConfig(t, heartbeat.Config{Path: sockIn(t), UID: -1, GID: -1, Auth: selfOnly, Poller: p})
	sa, sb := newSender(t, a.Path()), newSender(t, b.Path())

	sentA := time.Now()
	sa.send("STATUS=early")
	for i := range 10 {
		sent := time.Now()
		sb.send("PROGRESS=" + strconv.Itoa(i+1))
		r := recv(t, b)
		require.Equal(t, uint64(i+1), r.Msg.Progress)
		assert.Less(t, time.Since(sent), 10*interval, "beat %d of the other socket was held back", i+1)
		time.Sleep(interval)
	}
	began := time.Now()
	a.Sync() // neither reads nor waits
	assert.Less(t, time.Since(began), 100*time.Millisecond)
	select {
	case r := <-a.C():
		t.Fatalf("read before the run was ready: %+v", r.Msg)
	default:
	}
	require.False(t, early.Load(), "the sender was judged before the run was ready")

	close(ready)
	r := recv(t, a)
	require.Equal(t, "early", r.Msg.Status)
	assert.Less(t, r.At.Sub(sentA), 50*time.Millisecond, "At is the arrival, not the reading")
	assert.GreaterOrEqual(t, a.Stats().MaxIntakeLag, 10*interval, "the wait is measured")
}

// A flooded socket holds back no other: a quiet socket's beat is read
// within a batch or two while another is flooded.
func TestPollerFloodSparesOthers(t *testing.T) {
	interval := 20 * time.Millisecond
	p := newPoller(t, interval)
	flooded := listenConfig(t, heartbeat.Config{Path: sockIn(t), UID: -1, GID: -1, Auth: selfOnly, Poller: p})
	quiet := listenConfig(t, heartbeat.Config{Path: sockIn(t), UID: -1, GID: -1, Auth: selfOnly, Poller: p})
	sf, sq := newSender(t, flooded.Path()), newSender(t, quiet.Path())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				_ = sf.trySend("WATCHDOG=1")
			}
		}
	}()
	go func() { // the flooded socket's consumer keeps up
		defer wg.Done()
		for r := range flooded.C() {
			heartbeat.Free(r)
		}
	}()
	var worst time.Duration
	for i := range 20 {
		sent := time.Now()
		sq.send("PROGRESS=" + strconv.Itoa(i+1))
		r := recv(t, quiet)
		require.Equal(t, uint64(i+1), r.Msg.Progress)
		worst = max(worst, time.Since(sent))
		time.Sleep(interval / 2)
	}
	close(stop)
	require.NoError(t, flooded.Close())
	wg.Wait()
	t.Logf("worst intake of the quiet socket under the flood: %v", worst)
	assert.Less(t, worst, 10*interval)
	assert.Less(t, quiet.Stats().MaxIntakeLag, 10*interval)
}
