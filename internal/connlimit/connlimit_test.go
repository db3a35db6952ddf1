// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package connlimit

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve accepts on l and keeps every connection open until the test ends.
func serve(t *testing.T, l *Listener) {
	var mu sync.Mutex
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
}

func listen(t *testing.T, o Options) (*Listener, string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	o.Refusal = func(perPeer bool) []byte {
		msg := "total"
		if perPeer {
			msg = "per-peer"
		}
		return HTTPRefusal(http.StatusServiceUnavailable, []byte(`{"error":"`+msg+`"}`))
	}
	l := Wrap(ln, o)
	return l, ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// ask dials and sends a request, as an HTTP client does before it reads.
func ask(t *testing.T, addr string) net.Conn {
	c := dial(t, addr)
	_, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	require.NoError(t, err)
	return c
}

// refusedWith reads what the server wrote before it closed c: a refusal,
// or nothing within wait (c was accepted and held).
func refusedWith(t *testing.T, c net.Conn, wait time.Duration) string {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.Status + " " + string(b)
}

// One peer gets PerPeer connections; the next is refused with the
// caller's response and closed; closing one gives its slot back.
func TestPerPeerBound(t *testing.T) {
	l, addr := listen(t, Options{Total: 10, PerPeer: 3})
	serve(t, l)
	for range 3 {
		dial(t, addr)
	}
	require.Eventually(t, func() bool { return l.Open() == 3 }, 5*time.Second, time.Millisecond)
	over := ask(t, addr)
	assert.Equal(t, `503 Service Unavailable {"error":"per-peer"}`, refusedWith(t, over, 5*time.Second))
	assert.Equal(t, uint64(1), l.Refused())
	require.Equal(t, 3, l.Open())
}

// The total bounds every peer together; an exempt peer passes it but not
// its own per-peer bound.
func TestTotalBoundAndExempt(t *testing.T) {
	var mu sync.Mutex
	n := 0
	peers := []string{"a", "b", "c", "root", "root", "root"}
	l, addr := listen(t, Options{Total: 2, PerPeer: 2,
		Peer: func(net.Conn) string {
			mu.Lock()
			defer mu.Unlock()
			p := peers[n]
			n++
			return p
		},
		Exempt: func(p string) bool { return p == "root" }})
	serve(t, l)
	got := make([]string, len(peers))
	for i := range peers {
		c := ask(t, addr)
		got[i] = refusedWith(t, c, time.Second)
	}
	assert.Equal(t, []string{"", "", `503 Service Unavailable {"error":"total"}`, "", "",
		`503 Service Unavailable {"error":"per-peer"}`}, got)
	assert.Equal(t, 4, l.Open())
}

// A released slot is reusable: the server closing an accepted connection
// gives it back, so a client that opens and closes connections in a loop
// is never refused.
func TestSlotsReleased(t *testing.T) {
	l, addr := listen(t, Options{Total: 2, PerPeer: 2})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
			c.Close() // a second Close releases nothing more
		}
	}()
	for range 50 {
		c := dial(t, addr)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		require.NoError(t, err)
		require.False(t, strings.HasPrefix(string(b), "HTTP/"), "refused: %s", b)
		c.Close()
	}
	require.Eventually(t, func() bool { return l.Open() == 0 }, 5*time.Second, time.Millisecond)
	assert.Zero(t, l.Refused())
	l.Close()
	<-done
}

func TestBounds(t *testing.T) {
	total, perPeer := Bounds()
	assert.GreaterOrEqual(t, total, 8)
	assert.LessOrEqual(t, total, 4096)
	assert.Equal(t, max(total/4, 2), perPeer)
}

// A silent connection over a bound is still answered (after the wait for
// its request) and closed; a flood of silent ones holds at most
// `refusing` descriptors, the rest closed unanswered at once.
func TestSilentRefusals(t *testing.T) {
	var reports atomic.Int32
	l, addr := listen(t, Options{Total: 1, PerPeer: 1,
		OnRefuse: func(string, bool, uint64) { reports.Add(1) }})
	serve(t, l)
	dial(t, addr)
	require.Eventually(t, func() bool { return l.Open() == 1 }, 5*time.Second, time.Millisecond)
	silent := dial(t, addr)
	assert.Equal(t, `503 Service Unavailable {"error":"total"}`, refusedWith(t, silent, 5*time.Second))

	var flood []net.Conn
	for range 4 * refusing {
		flood = append(flood, dial(t, addr))
	}
	require.Eventually(t, func() bool { return l.Refused() == uint64(1+4*refusing) }, 5*time.Second, time.Millisecond)
	assert.LessOrEqual(t, len(l.answering), refusing)
	answered := 0
	for _, c := range flood {
		if refusedWith(t, c, 5*time.Second) != "" {
			answered++
		}
	}
	assert.Positive(t, answered)
	assert.LessOrEqual(t, answered, 2*refusing, "more silent connections were held than the bound")
	assert.LessOrEqual(t, reports.Load(), int32(2), "the refusals were reported more than once a second")
}

// With the process's descriptor table full, a listener with a reserve
// still accepts: accept(2) fails with EMFILE, one reserved descriptor goes
// back to the kernel, the accept is tried again and the connection is
// served; its close takes the descriptor back into the reserve. Without a
// reserve the accept fails as the kernel says.
func TestReserveAcceptsWhenOutOfDescriptors(t *testing.T) {
	var failures atomic.Uint64
	var served atomic.Bool
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := Wrap(ln, Options{Total: 8, PerPeer: 8, Reserve: 1, OnExhausted: func(err error, ok bool, n uint64) {
		served.Store(ok)
		failures.Store(n)
	}})
	defer l.Close()
	require.Equal(t, 1, l.Reserved())
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer plain.Close()
	// Both clients connect first: their sockets are descriptors too.
	client, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer client.Close()
	other, err := net.Dial("tcp", plain.Addr().String())
	require.NoError(t, err)
	defer other.Close()

	unfill := fillDescriptors(t)
	c, err := l.Accept()
	_, perr := plain.Accept()
	unfill()
	require.NoError(t, err, "the reserve let the accept go on")
	require.ErrorIs(t, perr, unix.EMFILE, "without a reserve")
	assert.Equal(t, uint64(1), l.Exhausted())
	assert.Equal(t, uint64(1), failures.Load())
	assert.True(t, served.Load())
	assert.Zero(t, l.Reserved(), "the reserved descriptor is the connection's")
	_, err = client.Write([]byte("x"))
	require.NoError(t, err)
	buf := make([]byte, 1)
	_, err = c.Read(buf)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	assert.Equal(t, 1, l.Reserved(), "the close took the descriptor back")
}

// fillDescriptors opens /dev/null until the process has no descriptor
// left under a soft limit lowered to a few above what is open (so that
// the fill is quick), and returns what undoes both.
func fillDescriptors(t *testing.T) func() {
	t.Helper()
	var old unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &old))
	open, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	low := old
	low.Cur = uint64(len(open) + 64)
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &low))
	var fds []int
	for {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			require.ErrorIs(t, err, unix.EMFILE)
			break
		}
		fds = append(fds, fd)
	}
	return func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
		fds = nil
		require.NoError(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &old))
	}
}
