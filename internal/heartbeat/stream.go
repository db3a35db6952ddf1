// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/sockpath"
)

// The stream socket carries the datagram socket's messages for runtimes
// that cannot send datagrams on a Unix socket without native code (Node,
// Deno, Bun, Java, .NET): a connection carries KEY=VALUE lines, each
// message ended by an empty line, parsed by Parse with the datagrams'
// keys, limits and meanings; directives come back on the connection in
// the same framing.
//
// The peer is screened once, at accept, by its SO_PEERCRED credentials
// (those of the process that called connect(2)) exactly as a datagram's
// sender is: the agent's uid or root, a pid of the agent's tree. A peer
// that fails is refused: its connection is closed before anything is
// read from it. Every message then spends the same rate budget as a
// datagram of that pid would.
//
// Each connection is read on a goroutine of its own, never on the
// poller's: a peer that stalls mid-message holds only its own goroutine.

// StreamName is the stream socket's name beside SocketName in an agent's
// socket directory. Its length is SocketName's, so that a directory in
// which one fits sun_path fits the other.
const StreamName = "stream.sock"

const (
	// MaxStreamConns is how many connections one stream socket serves
	// at once; more are refused (closed at accept) and counted.
	MaxStreamConns = 16
	// DirectiveWriteTimeout bounds the writing of a directive to a
	// stream connection: a peer that does not read loses the directive
	// and its connection, and never holds up the broadcaster longer.
	DirectiveWriteTimeout = 200 * time.Millisecond
	// streamBacklog is listen(2)'s backlog: connections the kernel
	// queues until they are accepted (and screened).
	streamBacklog = 32
	// streamReadBuf is the buffer a connection is read into; a longer
	// message is read in pieces.
	streamReadBuf = 4 << 10
	// acceptRetry is the pause after an accept(2) that failed for lack
	// of descriptors or memory, which retrying at once would not cure.
	acceptRetry = 50 * time.Millisecond
)

// streamListener is the stream socket of a Socket and its connections.
type streamListener struct {
	ln   *net.UnixListener
	path string

	mu     sync.Mutex
	conns  map[*streamConn]struct{} // under mu
	closed bool                     // under mu: no connection is added once set
	next   uint64                   // under mu: the last connection's number

	// wg counts the accepting goroutine and every connection's.
	wg sync.WaitGroup
}

// streamConn is one authenticated connection.
type streamConn struct {
	c    *net.UnixConn
	id   string // "stream:N", Received.Client of its messages
	cred unix.Ucred
	// wmu keeps two directives' bytes from interleaving.
	wmu sync.Mutex
}

// listenStream binds a SOCK_STREAM socket at path, 0600 and owned by
// uid/gid (-1 keeps ours), and listens on it. A stale socket left at path
// is replaced, a live one refused (ErrInUse).
func listenStream(path string, uid, gid int) (*streamListener, error) {
	if err := sockpath.Check(path); err != nil {
		return nil, err
	}
	if err := removeStale(path, unix.SOCK_STREAM); err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close() // net.FileListener holds a copy
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		return nil, fmt.Errorf("bind %s: %w", path, err)
	}
	ok := false
	defer func() {
		if !ok {
			os.Remove(path)
		}
	}()
	// Secured before listen(2): nobody can connect until it is 0600 and
	// the agent's (the private directory keeps others out meanwhile).
	if err := secureSocketFile(path, uid, gid); err != nil {
		return nil, err
	}
	if err := unix.Listen(fd, streamBacklog); err != nil {
		return nil, os.NewSyscallError("listen", err)
	}
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, err
	}
	ok = true
	return &streamListener{ln: ln.(*net.UnixListener), path: path, conns: make(map[*streamConn]struct{})}, nil
}

// serveStream starts accepting on the stream socket, once ready is closed
// (the run can tell its tree's members; nil: at once). Without a stream
// socket it does nothing.
func (s *Socket) serveStream(ready <-chan struct{}) {
	if s.stream == nil {
		return
	}
	s.stream.wg.Go(func() { s.accept(ready) })
}

// accept accepts and screens connections until the listener is closed.
func (s *Socket) accept(ready <-chan struct{}) {
	if ready != nil {
		// Until then the kernel queues connections (streamBacklog),
		// and their peers' first messages with them.
		select {
		case <-ready:
		case <-s.stop:
			return
		}
	}
	var pause *time.Timer
	for {
		c, err := s.stream.ln.AcceptUnix()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// EMFILE, ENFILE, ENOBUFS: the connection waits in the
			// backlog; retrying at once would only spin.
			s.stats.readErrors.Add(1)
			if pause == nil {
				pause = time.NewTimer(acceptRetry)
				defer pause.Stop()
			} else {
				pause.Reset(acceptRetry)
			}
			select {
			case <-pause.C:
			case <-s.stop:
				return
			}
			continue
		}
		s.admitConn(c)
	}
}

// admitConn screens the peer of a new connection and, when it passes and
// there is room, serves it on a goroutine of its own; otherwise the
// connection is closed. The credential screen comes first: a process
// outside the tree is refused before it could take one of the agent's
// connections.
func (s *Socket) admitConn(c *net.UnixConn) {
	cred, err := peerCred(c)
	if err != nil {
		s.stats.streamRefused.Add(1)
		c.Close()
		return
	}
	s.screenMu.Lock()
	refused := s.admit(cred, time.Now()) != nil
	s.screenMu.Unlock()
	if refused {
		s.stats.streamRefused.Add(1)
		c.Close()
		return
	}
	l := s.stream
	l.mu.Lock()
	if l.closed || len(l.conns) >= MaxStreamConns {
		closed := l.closed
		l.mu.Unlock()
		if !closed {
			s.stats.streamOverLimit.Add(1)
		}
		c.Close()
		return
	}
	l.next++
	sc := &streamConn{c: c, id: "stream:" + strconv.FormatUint(l.next, 10), cred: cred}
	l.conns[sc] = struct{}{}
	s.stats.streamAccepted.Add(1) // first: whoever gets a message sees it counted
	// Added under mu while not closed: close, which sets closed under mu
	// before it waits, never waits while a connection is being added.
	l.wg.Go(func() { s.readConn(sc) })
	l.mu.Unlock()
}

// peerCred returns the credentials of the process that connected c, as
// the kernel recorded them at connect(2) (SO_PEERCRED, unix(7)).
func peerCred(c *net.UnixConn) (unix.Ucred, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return unix.Ucred{}, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := rc.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return unix.Ucred{}, err
	}
	if credErr != nil {
		return unix.Ucred{}, os.NewSyscallError("getsockopt SO_PEERCRED", credErr)
	}
	return *cred, nil
}

// readConn reads sc's messages until the peer hangs up, sends a message
// over MaxDatagram (the connection is then closed), or the socket closes.
func (s *Socket) readConn(sc *streamConn) {
	defer s.stream.remove(sc)
	buf := make([]byte, streamReadBuf)
	var f framer
	deliver := func(msg []byte) { s.deliverStream(sc, msg) }
	for {
		n, err := sc.c.Read(buf)
		if !f.feed(buf[:n], deliver) {
			s.stats.received.Add(1)
			s.stats.oversize.Add(1)
			s.stats.streamDropped.Add(1)
			return
		}
		if err != nil {
			return // hung up, or closed by Close or a directive not taken
		}
	}
}

// maxFramed bounds what a framer holds: a message of MaxDatagram, the
// line end of its last line and the empty line, both "\r\n".
const maxFramed = MaxDatagram + 4

// framer cuts the bytes of a connection into messages. A message is its
// lines up to an empty line; "\r\n" ends a line as "\n" does, and empty
// lines with no message before them are ignored. A message's size is
// that of the datagram it stands for: its lines without the last line's
// end. What a peer left unfinished when it hung up is never delivered.
type framer struct {
	msg []byte // the message so far, its unfinished line last
	cur int    // the length of its unfinished line
}

// feed takes data, the next bytes read, and passes each message they
// complete to deliver (which must not keep it). It returns false once the
// message being read is over MaxDatagram.
func (f *framer) feed(data []byte, deliver func([]byte)) bool {
	for len(data) > 0 {
		part := data
		end := bytes.IndexByte(data, '\n')
		if end >= 0 {
			part = data[:end+1]
		}
		data = data[len(part):]
		if len(f.msg)+len(part) > maxFramed {
			return false
		}
		f.msg = append(f.msg, part...)
		f.cur += len(part)
		if end >= 0 {
			line := f.msg[len(f.msg)-f.cur:]
			f.cur = 0
			if isEmptyLine(line) {
				msg := withoutEOL(f.msg[:len(f.msg)-len(line)])
				f.msg = f.msg[:0]
				if len(msg) > 0 {
					deliver(msg)
				}
				continue
			}
		}
		if f.size() > MaxDatagram {
			return false
		}
	}
	return true
}

// size is the size of the message so far as a datagram: without the end
// of its last line, whole or begun, nor a "\r" that may begin the empty
// line.
func (f *framer) size() int {
	n := len(f.msg)
	switch {
	case f.cur == 1 && f.msg[n-1] == '\r':
		return len(withoutEOL(f.msg[:n-1]))
	case f.cur > 0 && f.msg[n-1] == '\r':
		return n - 1
	case f.cur > 0:
		return n
	}
	return len(withoutEOL(f.msg))
}

// withoutEOL is msg without the end of its last line, whole ("\n",
// "\r\n") or begun ("\r").
func withoutEOL(msg []byte) []byte {
	return bytes.TrimSuffix(bytes.TrimSuffix(msg, []byte("\n")), []byte("\r"))
}

func isEmptyLine(line []byte) bool {
	return len(line) == 1 || len(line) == 2 && line[0] == '\r'
}

// deliverStream screens one message of sc's peer against the rate budget
// and delivers it.
func (s *Socket) deliverStream(sc *streamConn, msg []byte) {
	now := time.Now()
	s.stats.received.Add(1)
	s.screenMu.Lock()
	drop := s.limit(sc.cred.Pid, now)
	s.screenMu.Unlock()
	if drop != nil {
		drop.Add(1)
		return
	}
	s.deliver(msg, now, sc.cred, sc.id, false)
}

// remove forgets sc and closes it.
func (l *streamListener) remove(sc *streamConn) {
	l.mu.Lock()
	delete(l.conns, sc)
	l.mu.Unlock()
	sc.c.Close()
}

// count is how many connections are open.
func (l *streamListener) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// broadcast writes payload, framed as a stream message, to every
// connection at once, each within DirectiveWriteTimeout; it returns the
// identities of those that took it. A connection that did not is closed:
// what it got of the directive may be a part, and its peer must not take
// a part for the whole.
func (l *streamListener) broadcast(payload []byte, st *Stats) []string {
	l.mu.Lock()
	conns := make([]*streamConn, 0, len(l.conns))
	for sc := range l.conns {
		conns = append(conns, sc)
	}
	l.mu.Unlock()
	if len(conns) == 0 {
		return nil
	}
	framed := frame(payload)
	deadline := time.Now().Add(DirectiveWriteTimeout)
	took := make([]bool, len(conns))
	var wg sync.WaitGroup
	for i, sc := range conns {
		wg.Go(func() { took[i] = sc.write(framed, deadline) })
	}
	wg.Wait()
	var sent []string
	for i, sc := range conns {
		if took[i] {
			sent = append(sent, sc.id)
			st.directivesSent.Add(1)
			continue
		}
		st.directivesDropped.Add(1)
		st.streamDropped.Add(1)
		sc.c.Close() // its reader ends and removes it
	}
	return sent
}

// write writes framed to sc, giving up at deadline.
func (sc *streamConn) write(framed []byte, deadline time.Time) bool {
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	if sc.c.SetWriteDeadline(deadline) != nil {
		return false
	}
	_, err := sc.c.Write(framed)
	return err == nil
}

// frame is payload (a directive: KEY=VALUE lines, none empty) as a stream
// message: its lines, then an empty line.
func frame(payload []byte) []byte {
	for len(payload) > 0 && payload[len(payload)-1] == '\n' {
		payload = payload[:len(payload)-1]
	}
	b := make([]byte, 0, len(payload)+2)
	return append(append(b, payload...), '\n', '\n')
}

// close closes the listener and every connection, waits for their
// goroutines and removes the socket file.
func (l *streamListener) close() error {
	err := l.ln.Close()
	l.mu.Lock()
	l.closed = true
	for sc := range l.conns {
		sc.c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
	if rmErr := os.Remove(l.path); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) && err == nil {
		err = rmErr
	}
	return err
}

// StreamPath is the stream socket's path, "" without one.
func (s *Socket) StreamPath() string {
	if s.stream == nil {
		return ""
	}
	return s.stream.path
}
