// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package egress owns an agent's only way out under network: allowlist:
// an HTTP proxy that hermeskilld serves on a loopback socket opened inside
// the agent's network namespace, and that dials out from hermeskilld's
// own. It passes only the destinations the agent's allowlist names
// (Allowlist), meters each destination's connections, refusals and bytes
// in each direction, and at the kill decision closes every tunnel and
// refuses every new one (Revoke).
//
// Two forms of request are served, those HTTPS_PROXY and HTTP_PROXY make
// clients send:
//   - CONNECT host:port (RFC 9110 §9.3.6): the target is checked and
//     dialled, 200 is answered, and bytes are spliced both ways until
//     either side ends (a half-close is passed on) or the tunnel stays idle
//     for Config.IdleTimeout;
//   - a request in absolute form, GET http://host/path (RFC 9112 §3.2.2):
//     forwarded without its hop-by-hop and Proxy-* headers, one upstream
//     connection per request.
//
// A destination is judged as the client named it: the CONNECT authority or
// the absolute URI's host, never a reverse lookup. A listed name is then
// resolved once, every address it resolves to is checked against the
// ranges no name may lead into (loopback, private, link-local and the
// metadata services there, shared, multicast; see special) unless an
// address or range entry lists it, and the checked address is dialled:
// no second resolution can rebind the name elsewhere. A refusal is
// answered 403 with a line saying why, and counted.
package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/connlimit"
)

// Defaults of Config.
const (
	DefaultMaxTunnels  = 256
	DefaultDialTimeout = 10 * time.Second
	DefaultIdleTimeout = 5 * time.Minute
	// maxDestinations bounds the destinations metered one by one; those
	// beyond share the entry named otherDestinations.
	maxDestinations   = 1024
	otherDestinations = "(other destinations)"
	headerTimeout     = 30 * time.Second
	bufSize           = 32 << 10
)

// Observer learns what the proxy does, on the goroutine that did it; it
// must not block.
type Observer interface {
	// Refused is a request refused for its destination (or after the
	// revocation).
	Refused(r Refusal)
	// Moved is bytes passed: out from the agent to a destination, in from
	// a destination to the agent.
	Moved(out, in int64, at time.Time)
}

// Refusal is one refused request.
type Refusal struct {
	At          time.Time
	Destination string // host:port as the client asked
	Reason      string
}

// Config configures a Proxy.
type Config struct {
	Allow       *Allowlist
	MaxTunnels  int           // tunnels and forwarded requests at once; 0 = DefaultMaxTunnels
	DialTimeout time.Duration // resolution and connection to a destination; 0 = DefaultDialTimeout
	IdleTimeout time.Duration // a tunnel with no byte either way for this long is closed; 0 = DefaultIdleTimeout
	// Resolve resolves a listed name; nil = the system resolver, in
	// hermeskilld's namespace.
	Resolve  func(ctx context.Context, host string) ([]netip.Addr, error)
	Observer Observer
	Log      *zap.Logger
}

// Proxy is one agent's egress proxy.
type Proxy struct {
	cfg   Config
	srv   *http.Server
	rp    *httputil.ReverseProxy
	slots chan struct{}

	revoked atomic.Bool
	mu      sync.Mutex
	open    map[io.Closer]struct{} // the tunnels' and forwarded requests' sockets, both sides
	clients map[net.Conn]struct{}  // the agent's connections to the proxy, until hijacked or closed
	flows   int                    // tunnels and forwarded requests open
	dests   map[string]*dest
	cut     int
	overCap int64
	// lastMoved is when the write of the last bytes passed either way
	// began, Unix nanoseconds.
	lastMoved atomic.Int64
}

// dest is one destination's meters.
type dest struct {
	name              string
	conns, refused    int64
	failed            int64
	reason            string
	bytesOut, bytesIn atomic.Int64
}

// New makes a proxy; Serve serves it.
func New(cfg Config) *Proxy {
	if cfg.MaxTunnels <= 0 {
		cfg.MaxTunnels = DefaultMaxTunnels
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.Resolve == nil {
		cfg.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Allow == nil {
		cfg.Allow = &Allowlist{}
	}
	p := &Proxy{cfg: cfg, slots: make(chan struct{}, cfg.MaxTunnels),
		open: map[io.Closer]struct{}{}, clients: map[net.Conn]struct{}{}, dests: map[string]*dest{}}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			for k := range pr.Out.Header {
				if strings.HasPrefix(k, "Proxy-") {
					pr.Out.Header.Del(k)
				}
			}
			// The URI's authority, whatever Host said (RFC 9112 §3.2.2):
			// it is the one that was checked.
			pr.Out.Host = pr.In.URL.Host
		},
		Transport: &http.Transport{
			Proxy: nil, DialContext: p.dialForward, DisableKeepAlives: true,
			ResponseHeaderTimeout: cfg.IdleTimeout, MaxResponseHeaderBytes: 1 << 20,
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			text(w, http.StatusBadGateway, fmt.Sprintf("egress to %s failed: %v", target(r), err))
		},
		ErrorLog: log.New(io.Discard, "", 0),
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: headerTimeout, IdleTimeout: cfg.IdleTimeout,
		MaxHeaderBytes: 64 << 10, ConnState: p.connState, ErrorLog: log.New(io.Discard, "", 0)}
	return p
}

// Serve serves the proxy on ln (a loopback socket in the agent's
// namespace) until Close; the agent's connections are bounded to twice
// the tunnels.
func (p *Proxy) Serve(ln net.Listener) {
	bounded := connlimit.Wrap(ln, connlimit.Options{Total: 2 * p.cfg.MaxTunnels, PerPeer: 2 * p.cfg.MaxTunnels,
		Refusal: func(bool) []byte {
			return connlimit.HTTPRefusal(http.StatusServiceUnavailable, []byte(`{"error":"egress proxy: too many connections"}`))
		}})
	go func() {
		if err := p.srv.Serve(bounded); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.cfg.Log.Debug("egress proxy: the listener ended", zap.Error(err))
		}
	}()
}

// Revoke is the kill decision's cut: every tunnel and forwarded request is
// closed, both its sockets, at once (with SO_LINGER 0, so that what the
// kernel still holds for the agent is dropped, not delivered), and every
// request from now on is refused 403. It returns how many were cut.
func (p *Proxy) Revoke() int {
	p.revoked.Store(true)
	p.mu.Lock()
	socks := make([]io.Closer, 0, len(p.open)+len(p.clients))
	for c := range p.open {
		socks = append(socks, c)
	}
	for c := range p.clients {
		socks = append(socks, c)
	}
	n := p.flows
	p.cut += n
	p.mu.Unlock()
	for _, c := range socks {
		abort(c)
	}
	return n
}

// Close stops serving and closes every socket.
func (p *Proxy) Close() error {
	p.Revoke()
	return p.srv.Close()
}

// abort closes c with SO_LINGER 0 when it is a TCP socket.
func abort(c io.Closer) {
	if tc, ok := unwrapTCP(c); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func unwrapTCP(c any) (*net.TCPConn, bool) {
	for range 4 {
		switch x := c.(type) {
		case *net.TCPConn:
			return x, true
		case interface{ Unwrap() net.Conn }:
			c = x.Unwrap()
		default:
			return nil, false
		}
	}
	return nil, false
}

func (p *Proxy) connState(c net.Conn, s http.ConnState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch s {
	case http.StateNew:
		p.clients[c] = struct{}{}
	case http.StateHijacked, http.StateClosed:
		delete(p.clients, c)
	}
}

// ServeHTTP serves one request of the agent.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host, port, dst, err := parseTarget(r)
	if err != nil {
		text(w, http.StatusBadRequest, "egress proxy: "+err.Error())
		return
	}
	if p.revoked.Load() {
		p.refuse(w, dst, "revoked", fmt.Sprintf("egress to %s refused: this agent's network was revoked at the kill decision", dst))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), p.cfg.DialTimeout)
	addrs, reason, err := p.check(ctx, host, port)
	cancel()
	switch {
	case reason != "":
		p.refuse(w, dst, reason, fmt.Sprintf("egress to %s %s", dst, reason))
		return
	case err != nil:
		p.failed(p.dest(dst))
		text(w, http.StatusBadGateway, fmt.Sprintf("egress to %s failed: %v", dst, err))
		return
	}
	select {
	case p.slots <- struct{}{}:
		defer func() { <-p.slots }()
	default:
		p.mu.Lock()
		p.overCap++
		p.mu.Unlock()
		text(w, http.StatusServiceUnavailable, fmt.Sprintf("egress to %s refused: %d tunnels are open, the most this agent may hold", dst, p.cfg.MaxTunnels))
		return
	}
	d := p.dest(dst)
	if r.Method == http.MethodConnect {
		p.tunnel(w, r, d, addrs)
		return
	}
	ctx = context.WithValue(r.Context(), forwardKey{}, &forward{d: d, addrs: addrs})
	if !p.begin(nil) {
		p.refuse(w, dst, "revoked", fmt.Sprintf("egress to %s refused: this agent's network was revoked at the kill decision", dst))
		return
	}
	defer p.end(nil)
	p.rp.ServeHTTP(w, r.WithContext(ctx))
}

// parseTarget is where r asks to go: host (unbracketed), port, and
// host:port for the meters and messages (the host in lower case).
func parseTarget(r *http.Request) (host string, port uint16, dst string, err error) {
	var hostport, defPort string
	if r.Method == http.MethodConnect {
		// authority-form: host:port, the port required.
		hostport = r.Host
		if hostport == "" {
			hostport = r.URL.Host
		}
	} else {
		if !r.URL.IsAbs() || r.URL.Host == "" {
			return "", 0, "", errors.New("only CONNECT host:port and requests in absolute form (GET http://host/path) are served")
		}
		if !strings.EqualFold(r.URL.Scheme, "http") {
			return "", 0, "", fmt.Errorf("the %s scheme is not forwarded: use CONNECT", r.URL.Scheme)
		}
		hostport, defPort = r.URL.Host, "80"
	}
	h, ps, serr := net.SplitHostPort(hostport)
	if serr != nil {
		if defPort == "" {
			return "", 0, "", fmt.Errorf("CONNECT needs host:port, got %q", hostport)
		}
		h, ps = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), defPort
	}
	if ps == "" {
		ps = defPort
	}
	n, perr := strconv.ParseUint(ps, 10, 16)
	if perr != nil || n == 0 || h == "" {
		return "", 0, "", fmt.Errorf("bad destination %q", hostport)
	}
	return h, uint16(n), net.JoinHostPort(strings.ToLower(h), strconv.Itoa(int(n))), nil
}

// target names r's destination for an error message.
func target(r *http.Request) string {
	if _, _, dst, err := parseTarget(r); err == nil {
		return dst
	}
	return r.Host
}

// check judges a destination: the addresses to dial, or why not
// (reason), or why they could not be had (err).
func (p *Proxy) check(ctx context.Context, host string, port uint16) ([]netip.AddrPort, string, error) {
	a := p.cfg.Allow
	if addr, err := netip.ParseAddr(host); err == nil {
		addr = addr.Unmap()
		if addr.Zone() != "" || !a.addrListed(addr, port) {
			return nil, "is not in this agent's allowlist", nil
		}
		return []netip.AddrPort{netip.AddrPortFrom(addr, port)}, "", nil
	}
	name := canonicalName(host)
	if !a.nameAllowed(name, port) {
		return nil, "is not in this agent's allowlist", nil
	}
	ips, err := p.cfg.Resolve(ctx, name)
	if err != nil {
		return nil, "", fmt.Errorf("resolving %s: %w", name, err)
	}
	if len(ips) == 0 {
		return nil, "", fmt.Errorf("resolving %s: no address", name)
	}
	out := make([]netip.AddrPort, 0, len(ips))
	for _, ip := range ips {
		ip = ip.Unmap().WithZone("")
		if r, bad := specialRange(ip); bad && !a.addrListed(ip, port) {
			return nil, fmt.Sprintf("is refused: %s resolves to %s, %s (%s), which the allowlist does not list", name, ip, rangeName(r), r), nil
		}
		out = append(out, netip.AddrPortFrom(ip, port))
	}
	return out, "", nil
}

// refuse answers 403 and counts it.
func (p *Proxy) refuse(w http.ResponseWriter, dst, reason, msg string) {
	p.mu.Lock()
	d := p.destLocked(dst)
	d.refused++
	d.reason = reason
	p.mu.Unlock()
	if o := p.cfg.Observer; o != nil {
		o.Refused(Refusal{At: time.Now(), Destination: dst, Reason: reason})
	}
	p.cfg.Log.Debug("egress refused", zap.String("destination", dst), zap.String("reason", reason))
	w.Header().Set("Connection", "close")
	text(w, http.StatusForbidden, msg)
}

func text(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

func (p *Proxy) dest(name string) *dest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.destLocked(name)
}

// passed counts a connection made to d; failed one that could not be.
func (p *Proxy) passed(d *dest) {
	p.mu.Lock()
	d.conns++
	p.mu.Unlock()
}

func (p *Proxy) failed(d *dest) {
	p.mu.Lock()
	d.failed++
	p.mu.Unlock()
}

func (p *Proxy) destLocked(name string) *dest {
	if d, ok := p.dests[name]; ok {
		return d
	}
	if len(p.dests) >= maxDestinations {
		name = otherDestinations
		if d, ok := p.dests[name]; ok {
			return d
		}
	}
	d := &dest{name: name}
	p.dests[name] = d
	return d
}

// begin registers the sockets of a flow (a tunnel, a forwarded request)
// for the revocation; false once revoked (the caller closes them).
func (p *Proxy) begin(socks ...io.Closer) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.revoked.Load() {
		return false
	}
	for _, s := range socks {
		if s != nil {
			p.open[s] = struct{}{}
		}
	}
	p.flows++
	return true
}

func (p *Proxy) end(socks ...io.Closer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range socks {
		delete(p.open, s)
	}
	p.flows--
}

// moved counts bytes passed; at is when their write began (a write the
// revocation ended counts what it wrote before it failed).
func (p *Proxy) moved(d *dest, out, in int64, at time.Time) {
	now := at
	d.bytesOut.Add(out)
	d.bytesIn.Add(in)
	p.lastMoved.Store(now.UnixNano())
	if o := p.cfg.Observer; o != nil {
		o.Moved(out, in, now)
	}
}

// dial connects to the first of addrs that answers.
func (p *Proxy) dial(ctx context.Context, addrs []netip.AddrPort) (net.Conn, error) {
	d := net.Dialer{Timeout: p.cfg.DialTimeout}
	var errs []error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, "tcp", a.String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// Stats are a proxy's meters.
type Stats struct {
	Allow    []string
	Passed   int64 // tunnels and forwarded requests
	Failed   int64 // allowed, but the destination could not be resolved or reached (502)
	Refused  int64
	OverCap  int64 // refused for want of a free tunnel (503)
	BytesOut int64 // from the agent
	BytesIn  int64 // to the agent
	Cut      int   // closed by the revocation
	Revoked  bool
	// LastByteAt is when the write of the last bytes passed, either
	// way, began (zero: none).
	LastByteAt time.Time
	// Destinations are by bytes (both ways), then refusals, then name.
	Destinations []Destination
}

// Destination is one destination's meters.
type Destination struct {
	Destination string // host:port as the client asked
	Passed      int64
	Failed      int64
	Refused     int64
	Reason      string // the last refusal's
	BytesOut    int64
	BytesIn     int64
}

// Stats returns the meters so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Allow: p.cfg.Allow.Entries(), OverCap: p.overCap, Cut: p.cut, Revoked: p.revoked.Load()}
	if ns := p.lastMoved.Load(); ns != 0 {
		s.LastByteAt = time.Unix(0, ns)
	}
	for _, d := range p.dests {
		x := Destination{Destination: d.name, Passed: d.conns, Failed: d.failed, Refused: d.refused, Reason: d.reason,
			BytesOut: d.bytesOut.Load(), BytesIn: d.bytesIn.Load()}
		s.Passed += x.Passed
		s.Failed += x.Failed
		s.Refused += x.Refused
		s.BytesOut += x.BytesOut
		s.BytesIn += x.BytesIn
		s.Destinations = append(s.Destinations, x)
	}
	slices.SortFunc(s.Destinations, func(a, b Destination) int {
		if c := (b.BytesIn + b.BytesOut) - (a.BytesIn + a.BytesOut); c != 0 {
			return sign(c)
		}
		if c := b.Refused - a.Refused; c != 0 {
			return sign(c)
		}
		return strings.Compare(a.Destination, b.Destination)
	})
	return s
}

func sign(v int64) int {
	if v < 0 {
		return -1
	}
	return 1
}
