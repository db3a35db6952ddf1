// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// tunnel serves CONNECT: the destination is dialled before anything is
// answered (a failure is a 502 the client reads), then 200, then bytes
// both ways.
func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request, d *dest, addrs []netip.AddrPort) {
	up, err := p.dial(r.Context(), addrs)
	if err != nil {
		p.failed(d)
		text(w, http.StatusBadGateway, "egress to "+d.name+" failed: "+err.Error())
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = up.Close()
		text(w, http.StatusInternalServerError, "egress proxy: the connection cannot be taken over")
		return
	}
	client, brw, err := hj.Hijack()
	if err != nil {
		_ = up.Close()
		return
	}
	if !p.begin(client, up) {
		abort(client)
		abort(up)
		return
	}
	defer p.end(client, up)
	defer client.Close()
	defer up.Close()
	p.passed(d)
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	t := &splice{idle: p.cfg.IdleTimeout}
	t.touch()
	// What the client sent after its request (a TLS ClientHello, say) is
	// in brw's buffer already.
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		at := time.Now()
		if _, err := up.Write(b); err != nil {
			return
		}
		p.moved(d, int64(n), 0, at)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t.pipe(up, client, func(n int, at time.Time) { p.moved(d, int64(n), 0, at) })
	}()
	t.pipe(client, up, func(n int, at time.Time) { p.moved(d, 0, int64(n), at) })
	wg.Wait()
}

// splice is the two directions of one tunnel.
type splice struct {
	idle time.Duration
	last atomic.Int64 // the latest byte either way, Unix nanoseconds
	done atomic.Int32 // directions ended
}

func (s *splice) touch() { s.last.Store(time.Now().UnixNano()) }

// pipe copies src to dst until src ends, then half-closes dst (the other
// direction may go on); an error either way, or idle with no byte in
// either direction, closes both.
func (s *splice) pipe(dst, src net.Conn, count func(n int, at time.Time)) {
	buf := make([]byte, bufSize)
	for {
		_ = src.SetReadDeadline(time.Now().Add(s.idle))
		n, err := src.Read(buf)
		if n > 0 {
			s.touch()
			at := time.Now()
			_ = dst.SetWriteDeadline(at.Add(s.idle))
			w, werr := dst.Write(buf[:n])
			if w > 0 {
				count(w, at) // what went, even of a write the revocation ended
			}
			if werr != nil {
				break
			}
		}
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && time.Since(time.Unix(0, s.last.Load())) < s.idle {
			continue // the other direction is busy
		}
		if errors.Is(err, io.EOF) && s.done.Add(1) < 2 {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
				return
			}
		}
		break
	}
	_ = src.Close()
	_ = dst.Close()
}

// forwardKey carries a forwarded request's checked destination to its dial.
type forwardKey struct{}

type forward struct {
	d     *dest
	addrs []netip.AddrPort
}

// dialForward is the transport's dial for a request in absolute form: to
// the address ServeHTTP checked, whatever addr the transport names, with
// the socket metered and registered for the revocation.
func (p *Proxy) dialForward(ctx context.Context, _, _ string) (net.Conn, error) {
	f, ok := ctx.Value(forwardKey{}).(*forward)
	if !ok {
		return nil, errors.New("egress proxy: a dial without a checked destination")
	}
	c, err := p.dial(ctx, f.addrs)
	if err != nil {
		p.failed(f.d)
		return nil, err
	}
	p.passed(f.d)
	mc := &meteredConn{Conn: c, p: p, d: f.d}
	p.mu.Lock()
	revoked := p.revoked.Load()
	if !revoked {
		p.open[mc] = struct{}{}
	}
	p.mu.Unlock()
	if revoked {
		abort(c)
		return nil, errors.New("revoked")
	}
	return mc, nil
}

// meteredConn is a forwarded request's upstream socket, counting bytes.
type meteredConn struct {
	net.Conn
	p    *Proxy
	d    *dest
	once sync.Once
}

func (c *meteredConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.p.moved(c.d, 0, int64(n), time.Now())
	}
	return n, err
}

func (c *meteredConn) Write(b []byte) (int, error) {
	at := time.Now()
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.p.moved(c.d, int64(n), 0, at)
	}
	return n, err
}

func (c *meteredConn) Close() error {
	c.once.Do(func() {
		c.p.mu.Lock()
		delete(c.p.open, c)
		c.p.mu.Unlock()
	})
	return c.Conn.Close()
}

// Unwrap is the socket.
func (c *meteredConn) Unwrap() net.Conn { return c.Conn }
