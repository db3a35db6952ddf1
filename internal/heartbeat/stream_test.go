// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hermeskill/hermeskilld/internal/heartbeat"
)

// listenStream opens a heartbeat socket with its stream socket beside it,
// owned by us, in a fresh private directory; closed when the test ends.
func listenStream(tb testing.TB, auth heartbeat.Authenticator, rate int) *heartbeat.Socket {
	tb.Helper()
	dir := filepath.Join(shortTempDir(tb), "d")
	require.NoError(tb, heartbeat.PrepareDir(dir, -1, -1))
	return listenConfig(tb, heartbeat.Config{
		Path: filepath.Join(dir, heartbeat.SocketName), StreamPath: filepath.Join(dir, heartbeat.StreamName),
		UID: -1, GID: -1, Auth: auth, Rate: rate,
	})
}

// peer is a client connection to a stream socket.
type peer struct {
	tb testing.TB
	c  *net.UnixConn
	r  *bufio.Reader
}

func dialStream(tb testing.TB, path string) *peer {
	tb.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	require.NoError(tb, err)
	tb.Cleanup(func() { c.Close() })
	return &peer{tb: tb, c: c, r: bufio.NewReader(c)}
}

// write writes raw bytes to the connection.
func (p *peer) write(raw string) {
	p.tb.Helper()
	_, err := p.c.Write([]byte(raw))
	require.NoError(p.tb, err)
}

// send writes one message in the stream framing.
func (p *peer) send(msg string) { p.tb.Helper(); p.write(msg + "\n\n") }

// readMessage reads one message (its lines, up to an empty line) within
// wait.
func (p *peer) readMessage() ([]string, error) {
	p.tb.Helper()
	require.NoError(p.tb, p.c.SetReadDeadline(time.Now().Add(wait)))
	var lines []string
	for {
		line, err := p.r.ReadString('\n')
		if err != nil {
			return lines, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			return lines, nil
		}
		lines = append(lines, line)
	}
}

// requireHungUp requires the connection to be closed by the other end
// (whatever it had sent before is read and discarded).
func (p *peer) requireHungUp() {
	p.tb.Helper()
	require.NoError(p.tb, p.c.SetReadDeadline(time.Now().Add(wait)))
	_, err := io.Copy(io.Discard, p.r)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		require.NoError(p.tb, err, "the connection was not closed")
	}
}

// A stream connection carries the datagram socket's messages: lines up
// to an empty line, however the peer's writes cut them, several in one
// write, CRLF or LF; each is delivered with the peer's kernel credentials
// and its connection's identity.
func TestStreamDelivers(t *testing.T) {
	s := listenStream(t, selfOnly, 0)
	require.Equal(t, filepath.Join(filepath.Dir(s.Path()), heartbeat.StreamName), s.StreamPath())
	p := dialStream(t, s.StreamPath())

	before := time.Now()
	p.send("READY=1\nSTATUS=warming up")
	r := recv(t, s)
	require.True(t, r.Msg.Has(heartbeat.FieldReady))
	require.Equal(t, "warming up", r.Msg.Status)
	require.Equal(t, os.Getpid(), r.PID)
	require.Equal(t, os.Geteuid(), r.UID)
	require.Equal(t, "stream:1", r.Client)
	require.False(t, r.At.Before(before))

	// A message cut across writes is delivered once whole, not before.
	p.write("WATCHDOG=1\nPROG")
	require.Never(t, func() bool { return len(s.C()) > 0 }, 50*time.Millisecond, 5*time.Millisecond)
	p.write("RESS=5\n")
	require.Never(t, func() bool { return len(s.C()) > 0 }, 50*time.Millisecond, 5*time.Millisecond)
	p.write("\n")
	r = recv(t, s)
	require.True(t, r.Msg.Has(heartbeat.FieldWatchdog))
	require.Equal(t, uint64(5), r.Msg.Progress)

	// Several messages in one write, CRLF line ends, stray empty lines.
	p.write("\n\r\nPROGRESS=6\r\n\r\nPROGRESS=7\nTOKENS=3\n\n\nPROGRESS=8\n\n")
	for _, want := range []uint64{6, 7, 8} {
		r = recv(t, s)
		require.Equal(t, want, r.Msg.Progress)
		require.Equal(t, "stream:1", r.Client)
	}
	st := settle(t, s, 5)
	require.Equal(t, uint64(5), st.Accepted)
	require.Equal(t, uint64(1), st.StreamAccepted)
	require.Zero(t, st.Dropped())

	// A second connection is another identity; a message a peer did not
	// finish before hanging up is not delivered.
	p2 := dialStream(t, s.StreamPath())
	p2.send("WATCHDOG=1")
	require.Equal(t, "stream:2", recv(t, s).Client)
	p2.write("READY=1\n")
	require.NoError(t, p2.c.Close())
	require.Eventually(t, func() bool { return s.Clients() == 1 }, wait, 5*time.Millisecond)
	require.Empty(t, s.C())
}

// Messages the datagrams would drop are dropped the same way and
// counted, and the connection goes on: malformed, past the rate budget,
// which datagrams and stream messages of a pid share.
func TestStreamDropsLikeDatagrams(t *testing.T) {
	const rate = 5
	s := listenStream(t, selfOnly, rate)
	p := dialStream(t, s.StreamPath())
	began := time.Now()
	p.send("READY=1\nSTATUS=\xff\xfe")
	p.send("READY=1\x00STATUS=x")
	eventuallyStats(t, s, func(st heartbeat.StatsSnapshot) bool { return st.Malformed == 2 }, "malformed not counted")
	for i := range 2 * rate {
		p.send("PROGRESS=" + strconv.Itoa(i))
	}
	newSender(t, s.Path()).send("PROGRESS=99")
	st := settle(t, s, 2+2*rate+1)
	elapsed := time.Since(began)

	// One budget of a second's worth, and what refilled meanwhile: with a
	// budget each, the datagram would have passed beside the stream's.
	passed := st.Accepted + st.Malformed
	require.LessOrEqual(t, passed, uint64(rate)+uint64(elapsed.Seconds()*rate), "elapsed %v; stats %+v", elapsed, st)
	require.NotZero(t, st.RateLimited)
	require.Equal(t, uint64(1), st.StreamAccepted)
	require.Zero(t, st.StreamDropped, "dropped messages cost no connection")
	require.Equal(t, 1, s.Clients())
}

// A peer outside the agent's tree is refused at accept: its connection
// is closed, nothing it sent is read, and it is counted.
func TestStreamRefusesForgedPeer(t *testing.T) {
	s := listenStream(t, selfOnly, 0)
	h := startHelper(t, "", "stream", []string{"HK_STREAM=" + s.StreamPath(), "HK_MSG=WATCHDOG=1\nPROGRESS=99"}, nil)
	eventuallyStats(t, s, func(st heartbeat.StatsSnapshot) bool { return st.StreamRefused == 1 }, "forged peer not refused")
	h.release(t)

	p := dialStream(t, s.StreamPath())
	p.send("STATUS=sentinel")
	require.Equal(t, "sentinel", recv(t, s).Msg.Status, "the forged peer's message was delivered")
	st := s.Stats()
	require.Equal(t, uint64(1), st.StreamAccepted)
	require.Equal(t, uint64(1), st.Received, "nothing was read from the refused connection")
	require.Zero(t, st.StreamOverLimit)
}

// A peer of a uid neither the agent's nor root is refused, whatever the
// Authenticator says of its pid; the agent's uid is accepted.
func TestStreamPeerUID(t *testing.T) {
	requireRoot(t)
	base := shortTempDir(t)
	require.NoError(t, os.Chmod(base, 0o711))
	bin := exportBinary(t, base)
	dir := filepath.Join(base, "d")
	require.NoError(t, heartbeat.PrepareDir(dir, agentUID, agentUID))
	s := listenConfig(t, heartbeat.Config{
		Path: filepath.Join(dir, heartbeat.SocketName), StreamPath: filepath.Join(dir, heartbeat.StreamName),
		UID: agentUID, GID: agentUID,
		Auth: heartbeat.AuthFunc(func(int) heartbeat.Verdict { return heartbeat.Member }),
	})
	fi, err := os.Lstat(s.StreamPath())
	require.NoError(t, err)
	require.Equal(t, os.ModeSocket|0o600, fi.Mode())
	st := fi.Sys().(*syscall.Stat_t)
	require.Equal(t, [2]uint32{agentUID, agentUID}, [2]uint32{st.Uid, st.Gid})

	env := []string{"HK_STREAM=" + s.StreamPath(), "HK_MSG=WATCHDOG=1"}
	h := startHelper(t, bin, "stream", env, &syscall.Credential{Uid: agentUID, Gid: agentUID})
	r := recv(t, s)
	require.Equal(t, agentUID, r.UID)
	require.Equal(t, h.pid, r.PID)
	h.release(t)

	// Open the path to another uid, as a misconfigured system might: the
	// uid screen alone still refuses it.
	require.NoError(t, os.Chmod(dir, 0o711))
	require.NoError(t, os.Chmod(s.StreamPath(), 0o666))
	h = startHelper(t, bin, "stream", env, &syscall.Credential{Uid: otherUID, Gid: otherUID})
	eventuallyStats(t, s, func(st heartbeat.StatsSnapshot) bool { return st.StreamRefused == 1 }, "other uid not refused")
	h.release(t)
	require.Equal(t, uint64(1), s.Stats().Accepted)
}

// At most MaxStreamConns connections are served at once: the next is
// refused and counted, and a slot freed is taken again.
func TestStreamConnectionLimit(t *testing.T) {
	s := listenStream(t, selfOnly, 0)
	peers := make([]*peer, heartbeat.MaxStreamConns)
	for i := range peers {
		peers[i] = dialStream(t, s.StreamPath())
		peers[i].send("PROGRESS=" + strconv.Itoa(i))
	}
	settle(t, s, heartbeat.MaxStreamConns)
	require.Equal(t, heartbeat.MaxStreamConns, s.Clients())

	extra := dialStream(t, s.StreamPath())
	extra.requireHungUp()
	st := s.Stats()
	require.Equal(t, uint64(1), st.StreamOverLimit)
	require.Equal(t, uint64(heartbeat.MaxStreamConns), st.StreamAccepted)

	require.NoError(t, peers[0].c.Close())
	require.Eventually(t, func() bool { return s.Clients() == heartbeat.MaxStreamConns-1 }, wait, 5*time.Millisecond)
	again := dialStream(t, s.StreamPath())
	again.send("STATUS=again")
	require.Equal(t, "again", lastStatus(t, s))
}

// lastStatus drains C() up to the first message with a STATUS.
func lastStatus(tb testing.TB, s *heartbeat.Socket) string {
	tb.Helper()
	for {
		if r := recv(tb, s); r.Msg.Has(heartbeat.FieldStatus) {
			return r.Msg.Status
		}
	}
}

// A message over 8 KiB before its empty line drops the connection and
// is counted; 8 KiB exactly is a message.
func TestStreamOversize(t *testing.T) {
	s := listenStream(t, selfOnly, 0)
	max := "WATCHDOG=1\nSTATUS=" + strings.Repeat("é", (heartbeat.MaxDatagram-18)/2)
	require.Len(t, max, heartbeat.MaxDatagram)
	p := dialStream(t, s.StreamPath())
	p.send(max)
	r := recv(t, s)
	require.True(t, r.Msg.Has(heartbeat.FieldWatchdog))
	require.Len(t, r.Msg.Status, heartbeat.MaxText)

	p.send(max + "x")
	p.requireHungUp()
	st := s.Stats()
	require.Equal(t, uint64(1), st.Oversize)
	require.Equal(t, uint64(1), st.StreamDropped)

	// A line that never ends is cut off the same way.
	p = dialStream(t, s.StreamPath())
	p.write(strings.Repeat("x", heartbeat.MaxDatagram+2))
	p.requireHungUp()
	st = settle(t, s, 3)
	require.Equal(t, uint64(2), st.Oversize)
	require.Equal(t, uint64(2), st.StreamDropped)
}

// Directives come back on the connection in the stream framing, and the
// peer's answer carries the identity they were sent to.
func TestStreamDirective(t *testing.T) {
	s := listenStream(t, selfOnly, 0)
	p := dialStream(t, s.StreamPath())
	p.send("READY=1")
	require.Equal(t, "stream:1", recv(t, s).Client)

	stop := heartbeat.StopDirective("heartbeat_timeout", "no heartbeat for 2s", 10*time.Second, "ev1")
	require.Equal(t, []string{"stream:1"}, s.BroadcastTo(stop))
	lines, err := p.readMessage()
	require.NoError(t, err)
	require.Equal(t, []string{"STOP=1", "CHECK=heartbeat_timeout", "REASON=no heartbeat for 2s",
		"GRACE_USEC=10000000", "KILL_EVENT_ID=ev1"}, lines)
	require.Equal(t, 1, s.Broadcast(heartbeat.WarningDirective("cost", "80% of the budget")))
	lines, err = p.readMessage()
	require.NoError(t, err)
	require.Equal(t, []string{"WARNING=cost: 80% of the budget"}, lines)

	p.send("STOPPING=1")
	r := recv(t, s)
	require.True(t, r.Msg.Has(heartbeat.FieldStopping))
	require.Equal(t, "stream:1", r.Client)
	require.Equal(t, uint64(2), s.Stats().Directives)
}

// A peer that does not read loses the directive and its connection
// within DirectiveWriteTimeout, and holds up neither the broadcaster nor
// the peers that do read.
func TestStreamPeerThatNeverReads(t *testing.T) {
	s := listenStream(t, selfOnly, 0)
	deaf := dialStream(t, s.StreamPath())
	deaf.send("READY=1")
	reader := dialStream(t, s.StreamPath())
	reader.send("READY=1")
	settle(t, s, 2)

	var got []string
	var readErr error
	var wg sync.WaitGroup
	wg.Go(func() { got, readErr = reader.readMessage() })
	// More than a socket buffer holds (net.core.wmem_default, ~200 KiB):
	// the deaf peer cannot take it.
	huge := []byte("WARNING=" + strings.Repeat("x", 1<<20))
	began := time.Now()
	sent := s.BroadcastTo(huge)
	took := time.Since(began)
	wg.Wait()

	require.Equal(t, []string{"stream:2"}, sent)
	require.NoError(t, readErr)
	require.Len(t, got, 1)
	require.Len(t, got[0], len(huge))
	require.Less(t, took, heartbeat.DirectiveWriteTimeout+5*time.Second, "the broadcaster was held up")
	deaf.requireHungUp()
	st := s.Stats()
	require.Equal(t, uint64(1), st.StreamDropped)
	require.Equal(t, uint64(1), st.DirDropped)
	require.Eventually(t, func() bool { return s.Clients() == 1 }, wait, 5*time.Millisecond)

	// The peer that reads still gets the next one.
	require.Equal(t, []string{"stream:2"}, s.BroadcastTo(heartbeat.WarningDirective("a", "b")))
	lines, err := reader.readMessage()
	require.NoError(t, err)
	require.Equal(t, []string{"WARNING=a: b"}, lines)
}

// Until the run is ready (Config.Ready) connections wait in the kernel's
// backlog, unscreened; then they are served.
func TestStreamWaitsForReady(t *testing.T) {
	dir := filepath.Join(shortTempDir(t), "d")
	require.NoError(t, heartbeat.PrepareDir(dir, -1, -1))
	ready := make(chan struct{})
	s := listenConfig(t, heartbeat.Config{
		Path: filepath.Join(dir, heartbeat.SocketName), StreamPath: filepath.Join(dir, heartbeat.StreamName),
		UID: -1, GID: -1, Auth: selfOnly, Ready: ready,
	})
	p := dialStream(t, s.StreamPath())
	p.send("READY=1")
	require.Never(t, func() bool { return s.Stats().StreamAccepted > 0 }, 50*time.Millisecond, 5*time.Millisecond)
	close(ready)
	require.True(t, has(recv(t, s), heartbeat.FieldReady))
}

// Close closes the listener and every connection, removes the stream
// socket's file and leaves no goroutine behind, ready or not.
func TestStreamClose(t *testing.T) {
	s := listenStream(t, selfOnly, 0)
	p := dialStream(t, s.StreamPath())
	p.send("READY=1")
	recv(t, s)
	idle := dialStream(t, s.StreamPath())
	idle.write("WATCHDOG=1\n") // mid-message
	require.Eventually(t, func() bool { return s.Clients() == 2 }, wait, 5*time.Millisecond)

	require.NoError(t, s.Close())
	goleak.VerifyNone(t, pollerRuns)
	for _, path := range []string{s.Path(), s.StreamPath()} {
		_, err := os.Lstat(path)
		require.ErrorIs(t, err, os.ErrNotExist, "%s left behind", path)
	}
	p.requireHungUp()
	idle.requireHungUp()
	_, ok := <-s.C()
	require.False(t, ok, "C() not closed")
	require.Empty(t, s.BroadcastTo(heartbeat.WarningDirective("x", "y")))

	never := make(chan struct{})
	dir := filepath.Join(shortTempDir(t), "d")
	require.NoError(t, heartbeat.PrepareDir(dir, -1, -1))
	s2, err := heartbeat.Listen(heartbeat.Config{
		Path: filepath.Join(dir, heartbeat.SocketName), StreamPath: filepath.Join(dir, heartbeat.StreamName),
		UID: -1, GID: -1, Auth: selfOnly, Ready: never,
	})
	require.NoError(t, err)
	dialStream(t, s2.StreamPath()).send("READY=1") // waits in the backlog
	require.NoError(t, s2.Close())
	goleak.VerifyNone(t, pollerRuns)
}

// pollerRuns ignores the goroutine of the suite's poller, which outlives
// the sockets it reads.
var pollerRuns = goleak.IgnoreTopFunction("github.com/hermeskill/hermeskilld/internal/heartbeat.(*Poller).run")

// A stale stream socket is replaced; a live one is refused, and the
// datagram socket bound before it is not left behind.
func TestStreamListenStaleAndLive(t *testing.T) {
	dir := shortTempDir(t)
	stream := filepath.Join(dir, heartbeat.StreamName)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stream, Net: "unix"})
	require.NoError(t, err)
	ln.SetUnlinkOnClose(false)
	require.NoError(t, ln.Close()) // a crashed supervisor leaves its file behind

	s := listenConfig(t, heartbeat.Config{Path: filepath.Join(dir, heartbeat.SocketName), StreamPath: stream,
		UID: -1, GID: -1, Auth: selfOnly})
	dialStream(t, stream).send("READY=1")
	require.True(t, has(recv(t, s), heartbeat.FieldReady))

	other := filepath.Join(dir, "other.sock")
	_, err = heartbeat.Listen(heartbeat.Config{Path: other, StreamPath: stream, UID: -1, GID: -1})
	require.ErrorIs(t, err, heartbeat.ErrInUse)
	_, err = os.Lstat(other)
	require.ErrorIs(t, err, os.ErrNotExist, "the datagram socket of a failed Listen was left behind")
}
