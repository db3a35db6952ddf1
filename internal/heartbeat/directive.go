// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// maxClients bounds the set of bound client addresses remembered per agent.
const maxClients = 64

// StopDirective is the directive of the ladder's cooperative stage: STOP=1,
// the check that fired, the reason, the grace before SIGTERM and, when
// killEventID is not empty, KILL_EVENT_ID: the id of the death
// certificate that will record this kill.
func StopDirective(check, reason string, grace time.Duration, killEventID string) []byte {
	var b strings.Builder
	b.WriteString("STOP=1\nCHECK=")
	b.WriteString(oneLine(check))
	b.WriteString("\nREASON=")
	b.WriteString(oneLine(reason))
	b.WriteString("\nGRACE_USEC=")
	b.WriteString(strconv.FormatInt(grace.Microseconds(), 10))
	if killEventID != "" {
		b.WriteString("\nKILL_EVENT_ID=")
		b.WriteString(oneLine(killEventID))
	}
	return []byte(b.String())
}

// WarningDirective tells clients about a warning symptom.
func WarningDirective(check, message string) []byte {
	return []byte("WARNING=" + oneLine(check) + ": " + oneLine(message))
}

func oneLine(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
}

// addClient remembers a bound sender's address for Broadcast. Only an
// absolute path or an abstract name ("@…") names the same socket from here:
// a relative path would be resolved against hermeskilld's working directory,
// not the agent's, and reach some other socket or none.
func (s *Socket) addClient(addr string) {
	if addr == "" || addr[0] != '/' && addr[0] != '@' {
		return
	}
	s.clientsMu.Lock()
	defer s.clientsMu.Unlock()
	if _, ok := s.clients[addr]; ok {
		return
	}
	if len(s.clients) >= maxClients {
		for k := range s.clients { // evict an arbitrary one
			delete(s.clients, k)
			break
		}
	}
	s.clients[addr] = struct{}{}
}

// Clients is how many clients can receive directives: bound client
// addresses, and open stream connections.
func (s *Socket) Clients() int {
	s.clientsMu.Lock()
	n := len(s.clients)
	s.clientsMu.Unlock()
	if s.stream != nil {
		n += s.stream.count()
	}
	return n
}

// Broadcast sends payload to every bound client that sent an authenticated
// message, without blocking: a client whose queue is full misses it, a
// client that is gone is forgotten. It also writes it to every stream
// connection, in the stream framing, each within DirectiveWriteTimeout: a
// connection that does not take it in time loses it and is closed. It
// returns how many clients got it.
func (s *Socket) Broadcast(payload []byte) int {
	return len(s.BroadcastTo(payload))
}

// BroadcastTo is Broadcast, returning the identities that got payload
// (bound addresses, "stream:N"): a client's answer to it (the
// acknowledgement of a STOP) is recognised by its identity,
// Received.Client.
func (s *Socket) BroadcastTo(payload []byte) []string {
	s.clientsMu.Lock()
	addrs := make([]string, 0, len(s.clients))
	for a := range s.clients {
		addrs = append(addrs, a)
	}
	s.clientsMu.Unlock()
	sent := addrs[:0]
	for _, a := range addrs {
		sendErr := s.sendTo(payload, a)
		switch {
		case sendErr == nil:
			sent = append(sent, a)
			s.stats.directivesSent.Add(1)
		case errors.Is(sendErr, unix.ECONNREFUSED), errors.Is(sendErr, unix.ENOENT):
			s.clientsMu.Lock()
			delete(s.clients, a)
			s.clientsMu.Unlock()
			s.stats.directivesDropped.Add(1)
		default:
			s.stats.directivesDropped.Add(1)
		}
	}
	if s.stream != nil {
		sent = append(sent, s.stream.broadcast(payload, &s.stats)...)
	}
	return sent
}

// sendTo sends payload to the client bound at addr without blocking.
func (s *Socket) sendTo(payload []byte, addr string) error {
	to := &unix.SockaddrUnix{Name: addr}
	if s.conn == nil {
		s.fdMu.RLock()
		defer s.fdMu.RUnlock()
		if s.closed {
			return net.ErrClosed
		}
		return unix.Sendto(s.fd, payload, unix.MSG_DONTWAIT, to)
	}
	rc, err := s.conn.SyscallConn()
	if err != nil {
		return err
	}
	var sendErr error
	if err := rc.Write(func(fd uintptr) bool {
		sendErr = unix.Sendto(int(fd), payload, unix.MSG_DONTWAIT, to)
		return true
	}); err != nil {
		return err
	}
	return sendErr
}
