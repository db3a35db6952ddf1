// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package connlimit bounds how many connections a listener holds open, in
// total and per peer, so that nobody who can connect — an agent, another
// local user — can take from hermeskilld the descriptors its kill path
// and its records need. A connection over a bound is accepted, answered
// with a refusal the client understands, and closed at once: it costs one
// descriptor for a moment, never one that stays.
//
// The bounds are a fraction of the process's descriptor limit
// (RLIMIT_NOFILE), so what stays free for everything else grows with it:
// see Bounds.
package connlimit

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A refusal waits for the start of the client's request before it
// answers (an answer before the request is one an HTTP client drops as
// unsolicited), and lingers to drain the rest so that the close does not
// reset the answer away; refuseWait bounds the whole. At most refusing
// connections wait at once; those beyond are closed unanswered, so a
// flood of silent connections holds no more than that many descriptors.
const (
	refuseWait = 250 * time.Millisecond
	refusing   = 32
	refuseRead = 16 << 10
)

// Options configures Wrap.
type Options struct {
	// Total bounds the connections open at once; PerPeer bounds those of
	// one peer. Zero takes Bounds().
	Total, PerPeer int
	// Peer names the peer of a new connection (a uid, say). Connections
	// whose peer cannot be told share the name it returns for them; nil
	// puts every connection in one peer.
	Peer func(net.Conn) string
	// Refusal is written to a connection over a bound before it is
	// closed; what is written is the caller's protocol (an HTTP response).
	Refusal func(perPeer bool) []byte
	// OnRefuse, when set, learns of refused connections, at most once a
	// second (a flood must not flood the log too): the latest one's peer
	// and bound, and how many were refused so far.
	OnRefuse func(peer string, perPeer bool, refused uint64)
	// Exempt, when set, names peers the total does not bound (root on
	// the control socket: an operator is never locked out by others'
	// connections); their own PerPeer still does.
	Exempt func(peer string) bool
}

// Listener is a net.Listener whose Accept returns only connections within
// the bounds.
type Listener struct {
	net.Listener
	o Options

	mu     sync.Mutex
	open   int
	byPeer map[string]int

	refused  atomic.Uint64
	reported atomic.Int64 // when OnRefuse was last called, Unix nanoseconds
	// answering holds a token for each refusal being answered.
	answering chan struct{}
	answers   sync.WaitGroup
}

// Wrap bounds ln.
func Wrap(ln net.Listener, o Options) *Listener {
	total, perPeer := Bounds()
	if o.Total <= 0 {
		o.Total = total
	}
	if o.PerPeer <= 0 {
		o.PerPeer = min(perPeer, o.Total)
	}
	return &Listener{Listener: ln, o: o, byPeer: map[string]int{}, answering: make(chan struct{}, refusing)}
}

// Bounds are the default bounds: a quarter of the descriptor limit in
// total (between 8 and 4096), a quarter of that per peer (at least 2). At
// the packaged unit's LimitNOFILE=1048576 that is 4096 and 1024; at a
// shell's usual 1024, 256 and 64. Three quarters of the limit stay for
// the agents' pipes and sockets, the kill path and the certificates.
func Bounds() (total, perPeer int) {
	var rl unix.Rlimit
	limit := uint64(1024)
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Cur > 0 {
		limit = rl.Cur
	}
	total = int(min(max(limit/4, 8), 4096))
	return total, max(total/4, 2)
}

// Limits reports the bounds in force.
func (l *Listener) Limits() (total, perPeer int) { return l.o.Total, l.o.PerPeer }

// Refused is how many connections were refused.
func (l *Listener) Refused() uint64 { return l.refused.Load() }

// Open is how many accepted connections are still open.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Accept returns the next connection within the bounds; those over a
// bound are refused and closed here.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		peer := ""
		if l.o.Peer != nil {
			peer = l.o.Peer(c)
		}
		l.mu.Lock()
		over, perPeer := l.open >= l.o.Total, l.byPeer[peer] >= l.o.PerPeer
		if over && l.o.Exempt != nil && l.o.Exempt(peer) {
			over = false
		}
		if !over && !perPeer {
			l.open++
			l.byPeer[peer]++
			l.mu.Unlock()
			return &conn{Conn: c, l: l, peer: peer}, nil
		}
		l.mu.Unlock()
		l.refuse(c, peer, perPeer && !over)
	}
}

func (l *Listener) refuse(c net.Conn, peer string, perPeer bool) {
	n := l.refused.Add(1)
	if l.o.OnRefuse != nil {
		now, last := time.Now().UnixNano(), l.reported.Load()
		if now-last >= int64(time.Second) && l.reported.CompareAndSwap(last, now) {
			l.o.OnRefuse(peer, perPeer, n)
		}
	}
	if l.o.Refusal == nil {
		_ = c.Close()
		return
	}
	select {
	case l.answering <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	l.answers.Add(1)
	go func() {
		defer l.answers.Done()
		defer func() { <-l.answering }()
		answer(c, l.o.Refusal(perPeer))
	}()
}

// Close closes the listener and waits for the refusals being answered
// (each ends within refuseWait and a write).
func (l *Listener) Close() error {
	err := l.Listener.Close()
	l.answers.Wait()
	return err
}

// answer writes msg to c once the client has said something (or the wait
// is over), then closes c without resetting what it wrote.
func answer(c net.Conn, msg []byte) {
	defer c.Close()
	buf := make([]byte, 4096)
	_ = c.SetReadDeadline(time.Now().Add(refuseWait))
	if _, err := c.Read(buf); err != nil && !isTimeout(err) {
		return
	}
	_ = c.SetDeadline(time.Now().Add(refuseWait))
	if _, err := c.Write(msg); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		for n := 0; n < refuseRead; {
			k, err := c.Read(buf)
			if n += k; err != nil {
				break
			}
		}
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func (l *Listener) release(peer string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.byPeer[peer]--; l.byPeer[peer] <= 0 {
		delete(l.byPeer, peer)
	}
}

// conn gives its slot back once, when closed.
type conn struct {
	net.Conn
	l    *Listener
	peer string
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.peer) })
	return err
}

// Unwrap is the accepted connection (for SO_PEERCRED, say).
func (c *conn) Unwrap() net.Conn { return c.Conn }

// HTTPRefusal is a whole HTTP/1.1 response of status with a JSON body,
// closing the connection: what an HTTP client reads as an ordinary error
// (503: try again later).
func HTTPRefusal(status int, body []byte) []byte {
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"+
		"Retry-After: 1\r\nConnection: close\r\n\r\n%s", status, http.StatusText(status), len(body), body)
}
