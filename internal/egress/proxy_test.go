// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("net/http.(*conn).closeWriteAndWait"))
}

// observed records what a proxy told its observer.
type observed struct {
	mu      sync.Mutex
	refused []Refusal
	out, in int64
}

func (o *observed) Refused(r Refusal) { o.mu.Lock(); o.refused = append(o.refused, r); o.mu.Unlock() }
func (o *observed) Moved(out, in int64, _ time.Time) {
	o.mu.Lock()
	o.out += out
	o.in += in
	o.mu.Unlock()
}

func (o *observed) figures() (refused int, out, in int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.refused), o.out, o.in
}

// startProxy serves a proxy for allow on loopback; it is closed at the
// test's end.
func startProxy(t *testing.T, cfg Config, allow ...string) (*Proxy, string, *observed) {
	t.Helper()
	a, err := Parse(allow)
	require.NoError(t, err)
	obs := &observed{}
	cfg.Allow, cfg.Observer = a, obs
	p := New(cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.Serve(ln)
	t.Cleanup(func() { _ = p.Close() })
	return p, ln.Addr().String(), obs
}

// echoServer echoes each connection back until it ends, then closes.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// connect sends CONNECT dst on a new connection to the proxy and returns
// the connection, its reader and the response.
func connect(t *testing.T, proxy, dst string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", dst, dst)
	require.NoError(t, err)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	require.NoError(t, err)
	return c, br, resp
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	return string(b)
}

// A listed literal address is reached through CONNECT, and the bytes are
// counted both ways, per destination.
func TestConnectListedAddress(t *testing.T) {
	echo := echoServer(t)
	p, addr, obs := startProxy(t, Config{}, echo)
	c, br, resp := connect(t, addr, echo)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, err := io.WriteString(c, "hello, upstream")
	require.NoError(t, err)
	got := make([]byte, len("hello, upstream"))
	_, err = io.ReadFull(br, got)
	require.NoError(t, err)
	require.Equal(t, "hello, upstream", string(got))
	// Half-close: the upstream sees EOF, echoes nothing more and closes;
	// the client reads EOF.
	require.NoError(t, c.(*net.TCPConn).CloseWrite())
	rest, err := io.ReadAll(br)
	require.NoError(t, err)
	require.Empty(t, rest)
	require.Eventually(t, func() bool { _, out, in := obs.figures(); return out == 15 && in == 15 }, 5*time.Second, time.Millisecond)
	s := p.Stats()
	require.Len(t, s.Destinations, 1)
	assert.Equal(t, Destination{Destination: echo, Passed: 1, BytesOut: 15, BytesIn: 15}, s.Destinations[0])
	assert.Equal(t, int64(1), s.Passed)
}

// A name the allowlist lists but that resolves into a special range
// (localhost: loopback) is refused unless the address is listed too.
func TestListedNameResolvingToLoopback(t *testing.T) {
	echo := echoServer(t)
	_, port, _ := net.SplitHostPort(echo)
	_, addr, obs := startProxy(t, Config{}, "localhost:"+port)
	_, _, resp := connect(t, addr, "localhost:"+port)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, body(t, resp), "egress to localhost:"+port+" is refused: localhost resolves to 127.0.0.1, a loopback address (127.0.0.0/8), which the allowlist does not list")
	n, _, _ := obs.figures()
	require.Equal(t, 1, n)

	_, addr, _ = startProxy(t, Config{}, "localhost:"+port, "127.0.0.0/8:"+port, "[::1]:"+port)
	c, br, resp := connect(t, addr, "localhost:"+port)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, err := io.WriteString(c, "x")
	require.NoError(t, err)
	b, err := br.ReadByte()
	require.NoError(t, err)
	require.Equal(t, byte('x'), b)
}

// What is not listed is refused 403 with the reason, and counted: another
// name, another port of a listed name, a literal of a listed name's
// address, an unlisted literal.
func TestRefusals(t *testing.T) {
	echo := echoServer(t)
	_, port, _ := net.SplitHostPort(echo)
	p, addr, obs := startProxy(t, Config{}, echo, "api.example.com:443")
	for _, dst := range []string{"evil.example:443", "api.example.com:80", "127.0.0.2:" + port, "[::1]:" + port, "169.254.169.254:80"} {
		_, _, resp := connect(t, addr, dst)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, dst)
		require.Equal(t, "egress to "+strings.ToLower(dst)+" is not in this agent's allowlist\n", body(t, resp))
	}
	n, _, _ := obs.figures()
	require.Equal(t, 5, n)
	s := p.Stats()
	require.Equal(t, int64(5), s.Refused)
	require.Equal(t, int64(0), s.Passed)
	for _, d := range s.Destinations {
		assert.Equal(t, "is not in this agent's allowlist", d.Reason, d.Destination)
	}
	// A plain request to an unlisted host is refused the same way.
	pu, _ := url.Parse("http://" + addr)
	cl := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	defer cl.CloseIdleConnections()
	resp, err := cl.Get("http://evil.example/")
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, "egress to evil.example:80 is not in this agent's allowlist\n", body(t, resp))
	resp.Body.Close()
	// A request that is no proxy request is a 400.
	resp, err = http.Get("http://" + addr + "/")
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp.Body.Close()
}

// A request in absolute form is forwarded without its hop-by-hop and
// Proxy-* headers, and its bytes are counted.
func TestPlainHTTPForwarded(t *testing.T) {
	var seen http.Header
	var seenURI string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, seenURI = r.Header.Clone(), r.RequestURI
		w.Header().Set("Keep-Alive", "timeout=5")
		_, _ = io.WriteString(w, "plain answer")
	}))
	defer up.Close()
	p, addr, obs := startProxy(t, Config{}, up.Listener.Addr().String())
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = fmt.Fprintf(c, "GET %s/path?q=1 HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic eDp5\r\nProxy-Foo: bar\r\n"+
		"Connection: X-Hop\r\nX-Hop: 1\r\nX-Kept: yes\r\n\r\n", up.URL, up.Listener.Addr())
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "plain answer", body(t, resp))
	require.Empty(t, resp.Header.Get("Keep-Alive"), "a hop-by-hop header of the answer is not passed on")
	require.Equal(t, "/path?q=1", seenURI)
	assert.Equal(t, "yes", seen.Get("X-Kept"))
	for _, h := range []string{"Proxy-Authorization", "Proxy-Foo", "X-Hop"} {
		assert.Empty(t, seen.Get(h), h)
	}
	// The upstream hop's own: one request per connection.
	assert.Equal(t, "close", seen.Get("Connection"))
	// The request's bytes are counted once its write returned, which may
	// be after the answer came.
	require.Eventually(t, func() bool { _, out, _ := obs.figures(); return out > 0 }, 5*time.Second, time.Millisecond)
	s := p.Stats()
	require.Len(t, s.Destinations, 1)
	d := s.Destinations[0]
	assert.Equal(t, int64(1), d.Passed)
	assert.Greater(t, d.BytesIn, int64(len("plain answer")), "the answer's head and body")
	_, out, in := obs.figures()
	assert.Equal(t, d.BytesOut, out)
	assert.Equal(t, d.BytesIn, in)
}

// streamServer writes to each connection until it fails; started tells
// of each.
func streamServer(t *testing.T) (string, chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	started := make(chan struct{}, 16)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			started <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				chunk := []byte(strings.Repeat("z", 1024))
				for {
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), started
}

// Revoke cuts a tunnel mid-transfer at once — the client's next read
// fails or ends, promptly — and refuses every request after it.
func TestRevokeCutsTunnels(t *testing.T) {
	stream, started := streamServer(t)
	p, addr, obs := startProxy(t, Config{}, stream)
	c, br, resp := connect(t, addr, stream)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	<-started
	_, err := io.ReadFull(br, make([]byte, 64<<10))
	require.NoError(t, err, "the stream flows")
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, br)
		ended <- err
	}()
	at := time.Now()
	require.Equal(t, 1, p.Revoke())
	select {
	case <-ended:
		t.Logf("the tunnel ended %s after the revocation", time.Since(at))
	case <-time.After(time.Second):
		t.Fatal("the tunnel still flows 1s after the revocation")
	}
	_ = c.Close()
	_, _, resp = connect(t, addr, stream)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, body(t, resp), "refused: this agent's network was revoked at the kill decision")
	s := p.Stats()
	assert.True(t, s.Revoked)
	assert.Equal(t, 1, s.Cut)
	n, _, _ := obs.figures()
	assert.Equal(t, 1, n)
	// What the client read was counted, once each write's count is in.
	require.Eventually(t, func() bool { _, _, in := obs.figures(); return in >= 64<<10 }, 5*time.Second, time.Millisecond)
}

// Beyond MaxTunnels a CONNECT is refused 503; a tunnel's end frees its
// slot.
func TestTunnelCap(t *testing.T) {
	echo := echoServer(t)
	p, addr, _ := startProxy(t, Config{MaxTunnels: 2}, echo)
	c1, _, r1 := connect(t, addr, echo)
	_, _, r2 := connect(t, addr, echo)
	require.Equal(t, http.StatusOK, r1.StatusCode)
	require.Equal(t, http.StatusOK, r2.StatusCode)
	_, _, r3 := connect(t, addr, echo)
	require.Equal(t, http.StatusServiceUnavailable, r3.StatusCode)
	require.Contains(t, body(t, r3), "2 tunnels are open, the most this agent may hold")
	require.NoError(t, c1.Close())
	over := int64(1)
	require.Eventually(t, func() bool {
		c, _, r := connect(t, addr, echo)
		defer c.Close()
		if r.StatusCode == http.StatusServiceUnavailable {
			over++
		}
		return r.StatusCode == http.StatusOK
	}, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, over, p.Stats().OverCap)
}

// A tunnel with no byte either way for IdleTimeout is closed.
func TestIdleTunnelClosed(t *testing.T) {
	echo := echoServer(t)
	_, addr, _ := startProxy(t, Config{IdleTimeout: 100 * time.Millisecond}, echo)
	_, br, resp := connect(t, addr, echo)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	began := time.Now()
	_, err := br.ReadByte()
	require.Error(t, err)
	require.Less(t, time.Since(began), 5*time.Second)
}

// One address of a listed name's answer in a special range refuses the
// name, though another is listed: the check is of every address.
func TestEveryResolvedAddressChecked(t *testing.T) {
	echo := echoServer(t)
	_, port, _ := net.SplitHostPort(echo)
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::ffff:10.0.0.1")}, nil
	}
	_, addr, _ := startProxy(t, Config{Resolve: resolve}, "twice.example:"+port, echo)
	_, _, resp := connect(t, addr, "twice.example:"+port)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, "egress to twice.example:"+port+" is refused: twice.example resolves to 10.0.0.1, a private address (10.0.0.0/8), which the allowlist does not list\n", body(t, resp))
}

// A listed destination that does not answer is a 502, counted as failed,
// not passed.
func TestUnreachableDestination(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())
	p, addr, obs := startProxy(t, Config{}, dead)
	_, _, resp := connect(t, addr, dead)
	require.Equal(t, http.StatusBadGateway, resp.StatusCode)
	require.Contains(t, body(t, resp), "egress to "+dead+" failed: dial tcp "+dead+": connect: connection refused")
	s := p.Stats()
	require.Equal(t, []Destination{{Destination: dead, Failed: 1}}, s.Destinations)
	n, _, _ := obs.figures()
	require.Zero(t, n, "a failure is no refusal")
}

// Revoke cuts a plain request whose answer is streaming, and refuses the
// next one 403.
func TestRevokeCutsPlainRequests(t *testing.T) {
	flowing := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		close(flowing)
		chunk := []byte(strings.Repeat("p", 1024))
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	defer up.Close()
	p, addr, _ := startProxy(t, Config{}, up.Listener.Addr().String())
	pu, _ := url.Parse("http://" + addr)
	cl := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	defer cl.CloseIdleConnections()
	resp, err := cl.Get(up.URL + "/stream")
	require.NoError(t, err)
	<-flowing
	_, err = io.ReadFull(resp.Body, make([]byte, 16<<10))
	require.NoError(t, err)
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		ended <- err
	}()
	require.Equal(t, 1, p.Revoke())
	select {
	case err := <-ended:
		require.Error(t, err, "the answer was cut, not ended")
	case <-time.After(time.Second):
		t.Fatal("the answer still flows 1s after the revocation")
	}
	resp.Body.Close()
	resp, err = cl.Get(up.URL + "/again")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

// A plain request goes where its URI says, and carries that as its Host,
// whatever its Host header claimed.
func TestPlainHostIsTheURIs(t *testing.T) {
	var host string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { host = r.Host }))
	defer up.Close()
	_, addr, _ := startProxy(t, Config{}, up.Listener.Addr().String())
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = fmt.Fprintf(c, "GET %s/ HTTP/1.1\r\nHost: evil.example\r\n\r\n", up.URL)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, up.Listener.Addr().String(), host)
}
