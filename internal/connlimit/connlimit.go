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
	"errors"
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
	// Reserve is how many descriptors (of /dev/null) the listener holds
	// for its own accepts: when accept(2) fails for want of descriptors
	// (EMFILE, ENFILE), one is given back to the kernel and the accept
	// tried again, so that the connection is served even with the
	// process's table full (the control socket: an operator can still
	// list and kill). A connection accepted so takes its descriptor back
	// into the reserve when it closes.
	Reserve int
	// OnExhausted, when set, learns of every accept that failed for want
	// of descriptors, on the accepting goroutine (it must be quick; a log
	// of it is the caller's to rate-limit): the error, whether the reserve
	// let the accept go on, and how many such failures there were.
	OnExhausted func(err error, served bool, failures uint64)
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

	// reserve holds Options.Reserve descriptors while they are not lent
	// to a connection accepted on them (under mu).
	reserve   []int
	closed    bool // no refill after Close (under mu)
	exhausted atomic.Uint64
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
	l := &Listener{Listener: ln, o: o, byPeer: map[string]int{}, answering: make(chan struct{}, refusing)}
	l.refill()
	return l
}

// refill tops the reserve up to Options.Reserve, as far as descriptors
// allow (close on exec: no child inherits them).
func (l *Listener) refill() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for !l.closed && len(l.reserve) < l.o.Reserve {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return
		}
		l.reserve = append(l.reserve, fd)
	}
}

// Reserved is how many descriptors the listener holds in reserve now.
func (l *Listener) Reserved() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reserve)
}

// Exhausted is how many accepts failed for want of descriptors.
func (l *Listener) Exhausted() uint64 { return l.exhausted.Load() }

// acceptOnReserve is Accept after accept(2) failed with err for want of
// descriptors: it gives one reserved descriptor back and accepts again.
// lent reports whether the connection holds a reserved one.
func (l *Listener) acceptOnReserve(err error) (c net.Conn, lent bool, _ error) {
	n := l.exhausted.Add(1)
	l.mu.Lock()
	fd := -1
	if k := len(l.reserve); k > 0 {
		fd, l.reserve = l.reserve[k-1], l.reserve[:k-1]
	}
	l.mu.Unlock()
	if fd >= 0 {
		unix.Close(fd)
		c, err = l.Listener.Accept()
		if err != nil {
			l.refill() // not lent after all (another thread took the descriptor, say)
		}
	}
	if l.o.OnExhausted != nil {
		l.o.OnExhausted(err, c != nil, n)
	}
	if c == nil {
		return nil, false, err
	}
	return c, true, nil
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
		lent := false
		if err != nil && l.o.Reserve > 0 && exhausted(err) {
			c, lent, err = l.acceptOnReserve(err)
		}
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
			return &conn{Conn: c, l: l, peer: peer, lent: lent}, nil
		}
		l.mu.Unlock()
		l.refuse(c, peer, perPeer && !over)
		if lent {
			l.refill()
		}
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

// Close closes the listener, waits for the refusals being answered (each
// ends within refuseWait and a write) and gives its reserve back.
func (l *Listener) Close() error {
	err := l.Listener.Close()
	l.answers.Wait()
	l.mu.Lock()
	for _, fd := range l.reserve {
		unix.Close(fd)
	}
	l.reserve, l.closed = nil, true
	l.mu.Unlock()
	return err
}

// exhausted reports whether err says the process or the system is out of
// descriptors.
func exhausted(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE)
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
	lent bool // accepted on a reserved descriptor: it goes back at close
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.release(c.peer)
		if c.lent {
			c.l.refill()
		}
	})
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
