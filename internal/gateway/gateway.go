// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/connlimit"
)

// Defaults of Config's bounds.
const (
	DefaultListen                = "127.0.0.1:0"
	DefaultMaxRequestBytes       = 8 << 20
	DefaultMaxResponseBytes      = 16 << 20
	DefaultMaxEventBytes         = 4 << 20
	DefaultMaxToolArgsBytes      = 1 << 20
	DefaultRequestTimeout        = time.Minute
	DefaultUpstreamHeaderTimeout = 10 * time.Minute
	DefaultStreamIdleTimeout     = 5 * time.Minute
	DefaultAgentWriteTimeout     = time.Minute
	DefaultIdleTimeout           = 2 * time.Minute
)

// shutdownWait bounds Serve's wait (http.Server.Shutdown) for the requests
// in flight, once cut, to end and their connections to close.
const shutdownWait = 5 * time.Second

// Config is a gateway's settings. Zero bounds take their defaults.
type Config struct {
	Upstreams []Upstream
	Prices    *Prices // nil: every model is unpriced
	// Listen is a loopback host:port ("127.0.0.1:0", "[::1]:8089",
	// "localhost:0"); DefaultListen when empty.
	Listen string
	Log    *zap.Logger // nil: no logs

	// MaxRequestBytes bounds an agent's request body (413 above).
	MaxRequestBytes int64
	// MaxResponseBytes bounds what is held of a non-streamed response to
	// read its usage; a larger body is forwarded, not metered.
	MaxResponseBytes int64
	// MaxEventBytes bounds a stream event held before it is forwarded; a
	// larger one is forwarded as it comes, not metered.
	MaxEventBytes int
	// MaxToolArgsBytes bounds one tool call's assembled arguments; longer
	// ones are hashed at the bound and marked Truncated.
	MaxToolArgsBytes int
	// RequestTimeout bounds reading an agent's request, headers and body.
	RequestTimeout time.Duration
	// UpstreamHeaderTimeout bounds the wait for the upstream's response
	// headers (a non-streamed completion sends them when it is done).
	UpstreamHeaderTimeout time.Duration
	// StreamIdleTimeout bounds the silence of an upstream's response body.
	StreamIdleTimeout time.Duration
	// AgentWriteTimeout bounds each write to the agent.
	AgentWriteTimeout time.Duration
	// IdleTimeout bounds an agent's idle keep-alive connection.
	IdleTimeout time.Duration
	// DefaultMaxOutputTokens is the output reserved for a request that
	// names no output bound (DefaultMaxOutputTokens when 0).
	DefaultMaxOutputTokens int64
	// PricesFile is where Prices came from; given to the agents
	// (EnvPrices), for the gateways of the runs they start.
	PricesFile string
	// MaxConns bounds the agents' connections open at once, and
	// MaxConnsPerUser those of one local user (the owner of the client
	// socket); a connection over either is answered 503 and closed.
	// Zero: connlimit.Bounds, from the descriptor limit.
	MaxConns, MaxConnsPerUser int
	// UpstreamIdleConns bounds the idle connections to the upstreams kept
	// for reuse, per upstream host and in total. Zero: MaxConns (as
	// resolved), the most requests the agents can have in flight at once
	// (each agent connection carries one at a time), so that the pool
	// never closes a connection a request at that concurrency is about to
	// need: below it the upstream sees no new connection (no new TLS
	// handshake) once the pool is warm.
	UpstreamIdleConns int
}

func (c *Config) setDefaults() {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.MaxEventBytes <= 0 {
		c.MaxEventBytes = DefaultMaxEventBytes
	}
	if c.MaxToolArgsBytes <= 0 {
		c.MaxToolArgsBytes = DefaultMaxToolArgsBytes
	}
	if c.DefaultMaxOutputTokens <= 0 {
		c.DefaultMaxOutputTokens = DefaultMaxOutputTokens
	}
	def(&c.RequestTimeout, DefaultRequestTimeout)
	def(&c.UpstreamHeaderTimeout, DefaultUpstreamHeaderTimeout)
	def(&c.StreamIdleTimeout, DefaultStreamIdleTimeout)
	def(&c.AgentWriteTimeout, DefaultAgentWriteTimeout)
	def(&c.IdleTimeout, DefaultIdleTimeout)
}

// Gateway serves the agents' LLM requests on loopback.
type Gateway struct {
	cfg       Config
	log       *zap.Logger
	ln        *connlimit.Listener
	srv       *http.Server
	transport *http.Transport
	upstreams map[string]*upstream
	env       []envVars

	// stop cuts every request in flight (their contexts derive from ctx).
	ctx  context.Context
	stop context.CancelCauseFunc

	mu     sync.RWMutex
	grants map[[sha256.Size]byte]*Grant

	// fresh are the connections that have not sent a request yet:
	// http.Server.Shutdown would wait up to 5 seconds for each to send
	// one; closeFresh closes them at once, as Shutdown closes idle ones.
	fmu         sync.Mutex
	fresh       map[net.Conn]struct{}
	freshClosed bool
}

// upstream is a configured Upstream with its key.
type upstream struct {
	Upstream
	key string
}

// envVars names the variables that give an agent one upstream.
type envVars struct {
	name         string // the upstream's
	baseURL, key string // variable names
}

// New checks cfg, reads the upstreams' keys and opens the listener. Serve
// then serves; Close releases the listener when Serve is never called.
func New(cfg Config) (*Gateway, error) {
	cfg.setDefaults()
	if len(cfg.Upstreams) == 0 {
		return nil, errors.New("llm gateway: no upstream")
	}
	g := &Gateway{cfg: cfg, log: cfg.Log, upstreams: map[string]*upstream{}, grants: map[[sha256.Size]byte]*Grant{},
		fresh: map[net.Conn]struct{}{}}
	for _, u := range cfg.Upstreams {
		if err := u.validate(); err != nil {
			return nil, fmt.Errorf("llm upstream %s: %w", u.Name, err)
		}
		u.URL = strings.TrimSuffix(u.URL, "/")
		if g.upstreams[u.Name] != nil {
			return nil, fmt.Errorf("llm upstream %s: configured twice", u.Name)
		}
		up := &upstream{Upstream: u, key: u.Key}
		if u.KeyFile != "" {
			key, err := LoadKey(u.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("llm upstream %s: %w", u.Name, err)
			}
			up.key = key
		}
		g.upstreams[u.Name] = up
	}
	var err error
	if g.env, err = envFor(cfg.Upstreams); err != nil {
		return nil, err
	}
	if err := checkLoopback(cfg.Listen); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("llm gateway: %w", err)
	}
	g.ln = g.bound(ln)
	if cfg.UpstreamIdleConns <= 0 {
		g.cfg.UpstreamIdleConns, _ = g.ln.Limits()
	}
	g.ctx, g.stop = context.WithCancelCause(context.Background())
	g.transport = newTransport(g.cfg)
	g.srv = &http.Server{
		Handler:           http.HandlerFunc(g.serveHTTP),
		ReadHeaderTimeout: cfg.RequestTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return g.ctx },
		ConnContext:       connContext,
		ConnState:         g.connState,
		ErrorLog:          zap.NewStdLog(cfg.Log.Named("http")),
	}
	g.srv.RegisterOnShutdown(g.closeFresh)
	return g, nil
}

// newTransport is the gateway's client of its upstreams.
func newTransport(cfg Config) *http.Transport {
	return &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  cfg.UpstreamHeaderTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxIdleConns:           cfg.UpstreamIdleConns,
		MaxIdleConnsPerHost:    cfg.UpstreamIdleConns,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 1 << 20,
	}
}

// UpstreamIdleConns is the bound of the upstream pool in force
// (Config.UpstreamIdleConns as resolved).
func (g *Gateway) UpstreamIdleConns() int { return g.cfg.UpstreamIdleConns }

// Limits are the connection bounds in force (Config.MaxConns and
// MaxConnsPerUser as resolved).
func (g *Gateway) Limits() (total, perUser int) { return g.ln.Limits() }

// Upstreams is how many upstreams are configured.
func (g *Gateway) Upstreams() int { return len(g.upstreams) }

// connState keeps the fresh connections.
func (g *Gateway) connState(c net.Conn, s http.ConnState) {
	g.fmu.Lock()
	defer g.fmu.Unlock()
	switch {
	case s != http.StateNew:
		delete(g.fresh, c)
	case g.freshClosed: // accepted as Shutdown began
		c.Close()
	default:
		g.fresh[c] = struct{}{}
	}
}

// closeFresh closes the fresh connections, and those accepted after.
func (g *Gateway) closeFresh() {
	g.fmu.Lock()
	defer g.fmu.Unlock()
	g.freshClosed = true
	for c := range g.fresh {
		c.Close()
	}
}

// bound wraps the listener in the connection bounds (Config.MaxConns):
// idle connections, from the agent or from any local user (loopback
// needs no handle to connect), cannot take the descriptors hermeskilld
// needs to kill and to write certificates.
func (g *Gateway) bound(ln net.Listener) *connlimit.Listener {
	l := connlimit.Wrap(ln, connlimit.Options{Total: g.cfg.MaxConns, PerPeer: g.cfg.MaxConnsPerUser,
		Peer: connPeer, Refusal: tooManyConns,
		OnRefuse: func(peer string, perPeer bool, refused uint64) {
			g.log.Warn("llm gateway: connection refused, too many open", zap.String("peer", peer),
				zap.Bool("per_user", perPeer), zap.Uint64("refused", refused))
		}})
	total, perUser := l.Limits()
	g.log.Debug("llm gateway connection bounds", zap.Int("total", total), zap.Int("per_user", perUser))
	return l
}

// checkLoopback refuses a listen address that is not loopback: the
// gateway must be reachable from this host only.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("llm gateway listen %q: %w", addr, err)
	}
	if !loopbackHost(host) {
		return fmt.Errorf("llm gateway listen %q: %w", addr, ErrNotLoopback)
	}
	return nil
}

// envFor names each upstream's variables: OPENAI_BASE_URL/OPENAI_API_KEY
// for the openai-style upstream named "openai", else the first of that
// style; ANTHROPIC_* likewise; HERMESKILL_LLM_<NAME>_BASE_URL/_API_KEY for
// the others (NAME upper-cased, '-' as '_').
func envFor(ups []Upstream) ([]envVars, error) {
	primary := map[Style]string{}
	for _, u := range ups {
		if u.Name == string(u.Style) {
			primary[u.Style] = u.Name
		}
	}
	for _, u := range ups {
		if _, ok := primary[u.Style]; !ok {
			primary[u.Style] = u.Name
		}
	}
	var out []envVars
	seen := map[string]string{}
	for _, u := range ups {
		prefix := "HERMESKILL_LLM_" + strings.ToUpper(strings.ReplaceAll(u.Name, "-", "_")) + "_"
		if primary[u.Style] == u.Name {
			prefix = strings.ToUpper(string(u.Style)) + "_"
		}
		if other, dup := seen[prefix]; dup {
			return nil, fmt.Errorf("llm upstreams %s and %s: both would be given as %sBASE_URL", other, u.Name, prefix)
		}
		seen[prefix] = u.Name
		out = append(out, envVars{name: u.Name, baseURL: prefix + "BASE_URL", key: prefix + "API_KEY"})
	}
	return out, nil
}

// Addr is the address the gateway listens on, host:port.
func (g *Gateway) Addr() string { return g.ln.Addr().String() }

// Serve serves until ctx ends or Close is called, and returns nil then.
// At its end the requests in flight are cut (a stream gets a final error
// event, a request still waiting for its response the 503), then
// http.Server.Shutdown lets their responses end and closes the
// connections, within shutdownWait; what is left is closed. A request that
// still comes meanwhile is answered 503. It returns the listener's error
// if serving fails.
func (g *Gateway) Serve(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- g.srv.Serve(g.ln) }()
	select {
	case err := <-done:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("llm gateway: %w", err)
	case <-ctx.Done():
	}
	g.stop(errShutdown)
	wait, cancel := context.WithTimeout(context.Background(), shutdownWait)
	defer cancel()
	if err := g.srv.Shutdown(wait); errors.Is(err, context.DeadlineExceeded) {
		g.log.Warn("llm gateway: requests still running at shutdown", zap.Duration("waited", shutdownWait))
	}
	g.srv.Close()
	<-done
	g.transport.CloseIdleConnections()
	return nil
}

// Close stops serving at once: the requests in flight are cut, the
// listener and connections closed. It may be called more than once.
func (g *Gateway) Close() error {
	g.stop(errShutdown)
	err := g.srv.Close()
	if lerr := g.ln.Close(); lerr != nil && !errors.Is(lerr, net.ErrClosed) && err == nil {
		err = lerr
	}
	g.transport.CloseIdleConnections()
	return err
}

// handleLen is the random part of a handle, in bytes.
const handleLen = 32

// Grant gives one agent run access to the upstreams: a new random handle
// that is its credential here and worthless anywhere else. obs is told of
// each of its requests.
func (g *Gateway) Grant(agentID string, obs Observer) *Grant {
	var raw [handleLen]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand)
	handle := "hk-" + base64.RawURLEncoding.EncodeToString(raw[:])
	gr := &Grant{g: g, agentID: agentID, handle: handle, sum: sha256.Sum256([]byte(handle)), obs: obs,
		mu: &sync.Mutex{}, inflight: map[*flight]struct{}{}, models: map[string]*certs.ModelUsage{}}
	g.mu.Lock()
	g.grants[gr.sum] = gr
	g.mu.Unlock()
	return gr
}

func (g *Gateway) forget(gr *Grant) {
	g.mu.Lock()
	if g.grants[gr.sum] == gr {
		delete(g.grants, gr.sum)
	}
	g.mu.Unlock()
}

// authenticate finds the grant whose handle the request carries, as
// Anthropic's x-api-key or OpenAI's Authorization: Bearer.
func (g *Gateway) authenticate(r *http.Request) *Grant {
	if gr := g.grantOf(r.Header.Get("X-Api-Key")); gr != nil {
		return gr
	}
	auth := r.Header.Get("Authorization")
	if len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
		return g.grantOf(auth[7:])
	}
	return nil
}

// grantOf looks the handle up by its sha256, then compares it in constant
// time: neither step tells an attacker how much of a guess was right.
func (g *Gateway) grantOf(handle string) *Grant {
	if handle == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(handle))
	g.mu.RLock()
	gr := g.grants[sum]
	g.mu.RUnlock()
	if gr == nil || subtle.ConstantTimeCompare([]byte(gr.handle), []byte(handle)) != 1 {
		return nil
	}
	return gr
}

// baseURL is where an agent reaches upstream name.
func (g *Gateway) baseURL(name string) string {
	return (&url.URL{Scheme: "http", Host: g.Addr(), Path: "/" + name}).String()
}
