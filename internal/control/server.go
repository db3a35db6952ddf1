// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/connlimit"
	"github.com/hermeskill/hermeskilld/internal/fdbudget"
)

// Limits and timeouts of the server.
const (
	maxBody           = 1 << 20 // a request body
	maxReason         = 4096    // bytes of a kill or e-stop reason
	bodyReadTimeout   = 30 * time.Second
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 2 * time.Minute
	// eventWriteTimeout drops an event subscriber that stops reading, so
	// that it cannot hold its subscription (and the daemon's buffers)
	// forever.
	eventWriteTimeout = 30 * time.Second
	// shutdownGrace bounds how long Close waits for requests to finish
	// once their contexts are cancelled.
	shutdownGrace = 5 * time.Second
	// DefaultEventsHeartbeat is how often an idle event stream gets an
	// empty line, so that clients and proxies see it alive.
	DefaultEventsHeartbeat = 15 * time.Second
)

// ServerOptions configures a Server.
type ServerOptions struct {
	// Path is the control socket (the daemon's is runtime_dir/control.sock).
	Path string
	// ReadGroup may list and read; OperatorsGroup may also kill, e-stop
	// and release. Empty: nobody but root at that level. Everyone may
	// connect (see SocketMode); these decide what a caller may do.
	ReadGroup, OperatorsGroup string
	// MaxConns bounds the connections open at once and MaxConnsPerUser
	// those of one uid (SO_PEERCRED); one over is answered 503 and closed.
	// Zero: connlimit.Bounds, from the descriptor limit. Root's own
	// connections are bounded only per user.
	MaxConns, MaxConnsPerUser int
	// Member decides group membership; nil means InGroup.
	Member MemberFunc
	// OwnerUID, when not 0, is a user who may do everything an operator
	// may (supervise's own user, on its own control socket).
	OwnerUID int
	// Refuse, when set, refuses a caller before any other rule (an error
	// matching ErrForbidden): supervise refuses its agent's own processes,
	// which run as its user.
	Refuse func(c Caller) error
	// EventsHeartbeat: 0 means DefaultEventsHeartbeat.
	EventsHeartbeat time.Duration
	Log             *zap.Logger
}

// Server serves a Backend on the control socket. Create it with NewServer,
// then Listen (optional: to fail early) and Serve; Close stops it.
type Server struct {
	b         Backend
	o         ServerOptions
	log       *zap.Logger
	auth      authorizer
	hs        *http.Server
	heartbeat time.Duration

	// base is every request's parent context; cancelling it ends event
	// streams and waits for kills (the kills themselves go on).
	base       context.Context
	cancelBase context.CancelFunc

	mu      sync.Mutex
	sock    *socketFile
	closed  bool
	serving bool

	exhaustedLog atomic.Int64 // when an accept short of descriptors was last logged, Unix nanoseconds

	closeOnce sync.Once
	done      chan struct{} // closed once Close has finished
}

// errClosed is Listen's error after Close.
var errClosed = errors.New("control server closed")

// NewServer returns a server of b; nothing is listening until Listen or
// Serve.
func NewServer(b Backend, opts ServerOptions) *Server {
	s := &Server{b: b, o: opts, log: opts.Log, heartbeat: opts.EventsHeartbeat, done: make(chan struct{})}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	s.log = s.log.Named("control")
	if s.heartbeat <= 0 {
		s.heartbeat = DefaultEventsHeartbeat
	}
	s.auth = authorizer{readGroup: opts.ReadGroup, opsGroup: opts.OperatorsGroup, member: opts.Member,
		owner: opts.OwnerUID, refuse: opts.Refuse}
	if s.auth.member == nil {
		s.auth.member = InGroup
	}
	s.base, s.cancelBase = context.WithCancel(context.Background())

	mux := http.NewServeMux()
	s.route(mux, "GET /v1/info", accessRead, "reading the daemon's info", s.info)
	s.route(mux, "GET /v1/agents", accessRead, "listing agents", s.list)
	s.route(mux, "GET /v1/agents/{id}", accessRead, "reading an agent's status", s.status)
	s.route(mux, "POST /v1/kill", accessChange, "killing agents", s.kill)
	s.route(mux, "POST /v1/estop", accessChange, "the e-stop", s.estop)
	s.route(mux, "POST /v1/release", accessChange, "releasing agents", s.release)
	s.route(mux, "POST /v1/stop", accessChange, "stopping agents", s.stop)
	s.route(mux, "POST /v1/start", accessChange, "starting agents", s.start)
	s.route(mux, "POST /v1/restart", accessChange, "restarting agents", s.restart)
	s.route(mux, "POST /v1/resume", accessChange, "resuming agents", s.resume)
	s.route(mux, "GET /v1/agents/{id}/logs", accessRead, "reading agents' output", s.logs)
	s.route(mux, "POST /v1/revoke", accessChange, "revoking agents", s.revoke)
	s.route(mux, "GET /v1/revocations", accessRead, "listing revocations", s.revocations)
	s.route(mux, "POST /v1/revocations/lift", accessChange, "lifting revocations", s.lift)
	s.route(mux, "GET /v1/budgets", accessRead, "listing budgets", s.budgets)
	s.route(mux, "POST /v1/budgets/lift", accessChange, "lifting budgets", s.liftBudget)
	s.route(mux, "GET /v1/certs", accessRead, "listing certificates", s.certs)
	s.route(mux, "GET /v1/certs/{id}", accessRead, "reading certificates", s.cert)
	s.route(mux, "GET /v1/events", accessRead, "following events", s.events)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErrorText(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path))
	})

	s.hs = &http.Server{
		Handler:           mux,
		ConnContext:       connContext,
		BaseContext:       func(net.Listener) context.Context { return s.base },
		ReadHeaderTimeout: readHeaderTimeout,
		// No ReadTimeout (it would cancel long requests' contexts; bodies
		// get their own deadline in decode) and no WriteTimeout: a kill
		// that waits lasts as long as its ladder, and events stream.
		IdleTimeout:    idleTimeout,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       zap.NewStdLog(s.log),
	}
	return s
}

// Listen creates the control socket (see SocketMode; a stale socket is
// replaced, a live one gives ErrSocketInUse). Serve calls it when it was
// not called before; calling it first lets the daemon fail before it
// starts agents, and tell systemd it is ready once operators can connect.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	if s.sock != nil {
		return nil
	}
	sock, err := listenSocket(s.o.Path, -1)
	if err != nil {
		return err
	}
	s.sock = sock
	s.log.Info("control socket listening", zap.String("path", s.o.Path),
		zap.String("mode", fmt.Sprintf("%#o", SocketMode)),
		zap.String("read_group", s.o.ReadGroup), zap.String("operators_group", s.o.OperatorsGroup))
	return nil
}

// Serve listens (when Listen was not called) and serves until ctx ends or
// Close is called; then it returns nil once Close has finished. Any other
// error is returned after the server was closed.
func (s *Server) Serve(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		if errors.Is(err, errClosed) {
			return nil
		}
		return err
	}
	s.mu.Lock()
	if s.serving {
		s.mu.Unlock()
		return errors.New("control server: already serving")
	}
	s.serving = true
	ln := s.bound(s.sock.ln)
	s.mu.Unlock()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-stop:
		}
	})
	err := s.hs.Serve(ln)
	close(stop)
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		<-s.done
		return nil
	}
	s.Close()
	return fmt.Errorf("control socket: %w", err)
}

// bound wraps the control socket in connection bounds: everyone may
// connect, so without them any local user could hold the daemon's
// descriptors with idle connections until neither its kill path nor its
// operators get one. Root is not bounded by the others' connections
// (only by its own per-user bound): an operator is never locked out.
func (s *Server) bound(ln net.Listener) net.Listener {
	l := connlimit.Wrap(ln, connlimit.Options{Total: s.o.MaxConns, PerPeer: s.o.MaxConnsPerUser,
		Peer: func(c net.Conn) string {
			if cr, err := peerCred(c); err == nil {
				return strconv.Itoa(cr.UID)
			}
			return "unknown"
		},
		Exempt: func(peer string) bool { return peer == "0" },
		Refusal: func(perPeer bool) []byte {
			msg := "too many control connections open in total; close idle ones"
			if perPeer {
				msg = "too many control connections open from this user; close idle ones"
			}
			body, _ := json.Marshal(errorBody{Error: msg})
			return connlimit.HTTPRefusal(http.StatusServiceUnavailable, append(body, '\n'))
		},
		OnRefuse: func(peer string, perPeer bool, refused uint64) {
			s.log.Warn("control connection refused, too many open", zap.String("uid", peer), zap.Bool("per_user", perPeer),
				zap.Uint64("refused", refused))
		},
		// Out of descriptors, the socket still accepts on its reserve:
		// ps, kill and estop keep working while the daemon is short.
		Reserve: fdbudget.ControlReserve,
		OnExhausted: func(err error, served bool, failures uint64) {
			fdbudget.Shortage(fdbudget.ControlAccept)
			now, last := time.Now().UnixNano(), s.exhaustedLog.Load()
			if now-last < int64(time.Second) || !s.exhaustedLog.CompareAndSwap(last, now) {
				return
			}
			if served {
				s.log.Error("control socket out of descriptors; connection accepted on its reserve (raise LimitNOFILE=)",
					zap.Error(err), zap.Uint64("failures", failures))
			} else {
				s.log.Error("control socket out of descriptors and its reserve is lent; connections wait (raise LimitNOFILE=)",
					zap.Error(err), zap.Uint64("failures", failures))
			}
		},
	})
	total, perUser := l.Limits()
	s.log.Debug("control connection bounds", zap.Int("total", total), zap.Int("per_user", perUser))
	return l
}

// Limits are the connection bounds the socket is served with
// (ServerOptions.MaxConns and MaxConnsPerUser, or connlimit.Bounds).
func (s *Server) Limits() (total, perUser int) {
	total, perUser = connlimit.Bounds()
	if s.o.MaxConns > 0 {
		total = s.o.MaxConns
	}
	if s.o.MaxConnsPerUser > 0 {
		perUser = s.o.MaxConnsPerUser
	}
	return total, min(perUser, total)
}

// Close stops the server: request contexts are cancelled (event streams
// end; kills go on in the daemon), requests get shutdownGrace to finish,
// the socket is removed if it is still ours and its lock released. It is
// safe to call more than once and concurrently; it always returns nil.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		sock := s.sock
		s.mu.Unlock()

		s.cancelBase()
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		if err := s.hs.Shutdown(ctx); err != nil {
			s.log.Warn("control requests still running at shutdown; closing their connections", zap.Error(err))
			s.hs.Close()
		}
		cancel()
		if sock != nil {
			sock.close()
		}
		close(s.done)
	})
	<-s.done
	return nil
}

// handler serves one authorised request; an error it returns is written
// as the JSON error response (so it must return one only before writing).
type handler func(w http.ResponseWriter, r *http.Request, c Caller) error

// route registers h behind the authorisation of level need.
func (s *Server) route(mux *http.ServeMux, pattern string, need access, what string, h handler) {
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		c, err := callerFrom(r.Context())
		if err != nil {
			s.log.Error("control request without peer credentials", zap.Error(err))
			writeError(w, fmt.Errorf("%w: %v", ErrForbidden, err))
			return
		}
		if err := s.auth.allow(c, need, what); err != nil {
			s.log.Warn("control request refused", zap.String("caller", c.Name), zap.Int("pid", c.PID),
				zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
			writeError(w, err)
			return
		}
		if err := h(w, r, c); err != nil {
			writeError(w, err)
		}
	})
}
