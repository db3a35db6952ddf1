// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"errors"
	"net"
	"net/http"

	"go.uber.org/zap"
)

// An agent in a network namespace of its own (network: gateway-only)
// reaches the gateway on a listener opened inside that namespace, at the
// gateway's own address: the same base URLs work there. Its connections'
// client sockets are that namespace's, so the handle's peer check asks a
// sock_diag socket opened in it (ours cannot see them, nor can our
// /proc/net/tcp).

// nsListener accepts in an agent's namespace.
type nsListener struct {
	net.Listener
	diag *diagSocket
}

func (l *nsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &nsConn{Conn: c, diag: l.diag}, nil
}

func (l *nsListener) Close() error {
	err := l.Listener.Close()
	l.diag.close()
	return err
}

// nsConn is a connection accepted by an nsListener.
type nsConn struct {
	net.Conn
	diag *diagSocket
}

// Unwrap is the accepted connection.
func (c *nsConn) Unwrap() net.Conn { return c.Conn }

// ServeIn serves the gateway on ln as well, a listener opened in another
// network namespace, until the returned listener is closed (which closes
// ln) or the gateway stops. in runs a function on a thread inside that
// namespace (netns.NS.Do), for the sock_diag socket of the peer checks.
func (g *Gateway) ServeIn(ln net.Listener, in func(func() error) error) net.Listener {
	diag := &diagSocket{open: func() (fd int, err error) {
		if derr := in(func() error { fd, err = openDiag(); return err }); derr != nil && err == nil {
			err = derr
		}
		return fd, err
	}}
	bounded := g.bound(&nsListener{Listener: ln, diag: diag})
	go func() {
		if err := g.srv.Serve(bounded); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			g.log.Debug("llm gateway: an agent's listener ended", zap.Error(err))
		}
	}()
	return bounded
}
