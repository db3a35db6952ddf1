// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/sockpath"
)

// Socket errors.
var (
	ErrPathTooLong = sockpath.ErrTooLong
	ErrInUse       = errors.New("socket path is in use by a live listener")
	ErrNotSocket   = errors.New("path exists and is not a socket")
)

// queueLen is how many authenticated messages may wait for the consumer
// before new ones are dropped; the reader never blocks on the consumer, so
// the kernel queue (net.unix.max_dgram_qlen, often only 10) keeps draining.
// The queue holds pointers to pooled messages: deep enough for bursts,
// 2 KiB per idle agent (a thousand agents share the pool).
const queueLen = 256

// pool recycles Received values between the reader and the consumer.
var pool = sync.Pool{New: func() any { return new(Received) }}

// Free returns r to the pool once the consumer is done with it; r must
// not be used afterwards. Not calling it is correct, only slower.
func Free(r *Received) {
	*r = Received{}
	pool.Put(r)
}

// Received is one authenticated message.
type Received struct {
	Msg Message
	// At is when the datagram was read: the heartbeat clock runs on it.
	At time.Time
	// PID and UID are the sender's, from SCM_CREDENTIALS.
	PID, UID int
	// Client is the sender's bound address ("@…" abstract or a path), ""
	// when it did not bind, or "stream:N" for a message read on the
	// stream socket's connection N; directives reach bound clients and
	// stream connections only.
	Client string
}

// Config describes one agent's socket.
type Config struct {
	// Path of the socket; its directory must already exist, be private
	// (see PrepareDir) and the path must fit in sun_path.
	Path string
	// StreamPath, when set, is where the stream socket is bound beside
	// it (see stream.go): the same messages over SOCK_STREAM
	// connections, for runtimes that have no datagram sockets. Same
	// rules as Path.
	StreamPath string
	// UID and GID own the socket (the agent's user); -1 keeps ours.
	UID, GID int
	// Auth decides tree membership of a sender pid; nil accepts any pid
	// (uid checks still apply) and is meant for tests only.
	Auth Authenticator
	// Rate is the sustained datagrams/s accepted before drops; 0 = no limit.
	Rate int
	// Poller, when set, reads the socket along with its other sockets
	// (see Poller); nil gives the socket a reader goroutine of its own.
	Poller *Poller
	// Ready, when set, is closed once Auth can answer (the agent's tree
	// is known). Until then nothing is read: what arrives waits in the
	// kernel's queue, stamped with its arrival, and a poller goes on
	// reading the other sockets rather than wait for this one.
	Ready <-chan struct{}
}

// Socket is a listening heartbeat socket. Its reader goroutine (or its
// poller's reading) starts in Listen and stops in Close.
type Socket struct {
	conn *net.UnixConn // nil when a Poller reads the socket
	path string
	uid  int
	// screenMu guards the verdicts and budgets every message is screened
	// by, datagrams (one reader at a time) and stream connections (each
	// on its goroutine) alike.
	screenMu sync.Mutex
	auth     *authCache  // under screenMu
	rate     rateLimiter // under screenMu
	// mainRate is the main process's own budget (SetMainPID), so that a
	// busy child's datagrams never starve the main process's beats.
	mainRate rateLimiter // under screenMu
	mainPID  atomic.Int32
	out      chan *Received
	stats    Stats
	stop     chan struct{}   // closed by Close
	stream   *streamListener // nil without Config.StreamPath

	clientsMu sync.Mutex
	clients   map[string]struct{}

	closeOnce sync.Once
	closeErr  error
	done      chan struct{}

	// With a Poller: the socket's descriptor, and the lock that keeps it
	// open while a directive is sent (Close takes it exclusively).
	poller *Poller
	fd     int
	fdMu   sync.RWMutex
	closed bool // under fdMu

	// With a Poller: held while the socket is read (by the poller's
	// batch or a Sync), so that one socket's reading holds back no other.
	readMu  sync.Mutex
	removed bool            // under readMu: read no more
	ready   <-chan struct{} // under readMu: nil once closed
	// closingFDs: descriptors a datagram passed are being closed on a
	// goroutine of their own (closing one can block: a socket that
	// lingers, a file on a stalled FUSE or NFS mount); the socket is not
	// read until they are.
	closingFDs atomic.Bool
}

// Listen creates the socket at cfg.Path (replacing a stale socket left by a
// crash, refusing one a live process still listens on), makes it 0600 owned
// by the agent's user, enables SO_PASSCRED and starts the reader.
func Listen(cfg Config) (*Socket, error) {
	if err := sockpath.Check(cfg.Path); err != nil {
		return nil, err
	}
	if err := removeStale(cfg.Path, unix.SOCK_DGRAM); err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	f := os.NewFile(uintptr(fd), cfg.Path)
	defer f.Close()
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: cfg.Path}); err != nil {
		return nil, fmt.Errorf("bind %s: %w", cfg.Path, err)
	}
	ok := false
	var stream *streamListener
	defer func() {
		if !ok {
			os.Remove(cfg.Path)
			if stream != nil {
				stream.close()
			}
		}
	}()
	if err := secureSocketFile(cfg.Path, cfg.UID, cfg.GID); err != nil {
		return nil, err
	}
	// SO_PASSCRED after bind: on an unbound socket it would autobind an
	// abstract name (unix(7)). With it, every datagram carries the sender's
	// kernel-verified pid/uid/gid even when the sender attached none.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		return nil, os.NewSyscallError("setsockopt SO_PASSCRED", err)
	}
	// A larger buffer absorbs bursts; the datagram count limit
	// (max_dgram_qlen) still applies, hence the dedicated reader.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 1<<20) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	}
	uid := cfg.UID
	if uid < 0 {
		uid = os.Geteuid()
	}
	s := &Socket{
		path:     cfg.Path,
		uid:      uid,
		auth:     newAuthCache(cfg.Auth),
		rate:     newRateLimiter(cfg.Rate),
		mainRate: newRateLimiter(cfg.Rate),
		out:      make(chan *Received, queueLen),
		clients:  make(map[string]struct{}),
		done:     make(chan struct{}),
		stop:     make(chan struct{}),
		fd:       -1,
		ready:    cfg.Ready,
	}
	if cfg.StreamPath != "" {
		if stream, err = listenStream(cfg.StreamPath, cfg.UID, cfg.GID); err != nil {
			return nil, err
		}
		s.stream = stream
	}
	if p := cfg.Poller; p != nil {
		// The kernel stamps each datagram with its arrival: the poller
		// reads in batches, and the heartbeat clock runs on arrival.
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			return nil, os.NewSyscallError("setsockopt SO_TIMESTAMPNS", err)
		}
		dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, os.NewSyscallError("fcntl F_DUPFD_CLOEXEC", err)
		}
		s.poller, s.fd = p, dup
		if err := p.add(s); err != nil {
			unix.Close(dup)
			return nil, err
		}
		ok = true
		s.serveStream(cfg.Ready)
		return s, nil
	}
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	s.conn = c.(*net.UnixConn)
	ok = true
	go s.read()
	s.serveStream(cfg.Ready)
	return s, nil
}

// secureSocketFile makes the freshly bound socket file at path mode 0600,
// owned by uid/gid (-1 keeps ours), without following a symlink. The
// directory belongs to the agent's user, who can replace the socket file by
// a symlink between bind(2) and chmod(2), and chmod(2) follows symlinks: as
// root that would chmod any file on the host. So the file is opened with
// O_PATH|O_NOFOLLOW, checked to be a socket, and changed through that
// descriptor (chmod of /proc/self/fd/N reaches exactly its inode, as glibc's
// fchmodat(AT_SYMLINK_NOFOLLOW) does; fchmod(2) refuses O_PATH descriptors).
func secureSocketFile(path string, uid, gid int) error {
	// With O_PATH, O_NOFOLLOW opens a symlink itself: fstat then sees it.
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return fmt.Errorf("%s was replaced after bind: %w", path, ErrNotSocket)
	}
	if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), 0o600); err != nil {
		return &os.PathError{Op: "chmod", Path: path, Err: err}
	}
	if uid >= 0 || gid >= 0 {
		if err := unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH); err != nil {
			return &os.PathError{Op: "chown", Path: path, Err: err}
		}
	}
	return nil
}

// removeStale removes a socket file nobody listens on any more; sotype is
// the socket's type (a datagram probe of a stream socket fails with
// EPROTOTYPE, whether anyone listens or not).
func removeStale(path string, sotype int) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s: %w", path, ErrNotSocket)
	}
	fd, err := unix.Socket(unix.AF_UNIX, sotype|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
	switch {
	case err == nil:
		return fmt.Errorf("%s: %w", path, ErrInUse)
	case errors.Is(err, unix.ECONNREFUSED):
		return os.Remove(path)
	default:
		return fmt.Errorf("probe %s: %w", path, err)
	}
}

// Path is the socket's filesystem path.
func (s *Socket) Path() string { return s.path }

// C delivers authenticated messages in arrival order (see Free).
func (s *Socket) C() <-chan *Received { return s.out }

// Stats returns a snapshot of the counters.
func (s *Socket) Stats() StatsSnapshot { return s.stats.snapshot() }

// Close stops the reader, closes the stream socket and its connections,
// waits for every goroutine of the socket and removes the socket files.
// The channel returned by C is closed. Later calls return the first call's
// result and do nothing: in particular they never remove a socket file that
// a new Listen has bound at the same path since.
func (s *Socket) Close() error {
	s.closeOnce.Do(func() {
		var err error
		close(s.stop)
		if s.poller != nil {
			s.poller.remove(s) // after it, the poller never reads s again
			s.fdMu.Lock()
			err = unix.Close(s.fd)
			s.closed = true
			s.fdMu.Unlock()
			close(s.done)
		} else {
			err = s.conn.Close()
		}
		<-s.done
		if rmErr := os.Remove(s.path); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) && err == nil {
			err = rmErr
		}
		if s.stream != nil {
			if sErr := s.stream.close(); sErr != nil && err == nil {
				err = sErr
			}
		}
		close(s.out) // nobody sends on it any more
		s.closeErr = err
	})
	return s.closeErr
}

// oobSize holds SCM_CREDENTIALS plus SCM_RIGHTS for the kernel's maximum of
// 253 descriptors per message (SCM_MAX_FD).
var oobSize = unix.CmsgSpace(unix.SizeofUcred) + unix.CmsgSpace(253*4)

func (s *Socket) read() {
	defer close(s.done)
	if s.ready != nil {
		select {
		case <-s.ready:
		case <-s.stop:
			return
		}
	}
	buf := make([]byte, MaxDatagram)
	oob := make([]byte, oobSize)
	for {
		n, oobn, flags, addr, err := s.conn.ReadMsgUnix(buf, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.stats.readErrors.Add(1)
			continue
		}
		var from string
		if addr != nil {
			from = addr.Name
		}
		s.handle(buf[:n], oob[:oobn], flags, from, time.Now())
	}
}

// handle screens, parses and delivers one datagram read at time at.
func (s *Socket) handle(data, oob []byte, flags int, from string, at time.Time) {
	s.stats.received.Add(1)
	cred, drop := s.screen(flags, oob, at)
	if drop != nil {
		drop.Add(1) // before the close, which the sender may be waiting for
	}
	// Close the descriptors passed along only now, whatever the
	// verdict: a sender blocked on BARRIER=1 (systemd-notify) exits as
	// soon as they are closed, and must still exist while screen
	// authenticates it; closed first, it would often be Gone.
	if s.poller == nil {
		closeFDs(oob, &s.stats)
	} else if fds := passedFDs(oob); len(fds) > 0 {
		// Not on the poller's goroutine: a close that blocks would hold
		// back every socket. This socket waits for it (read).
		s.closingFDs.Store(true)
		go func() {
			defer s.closingFDs.Store(false)
			for _, fd := range fds {
				s.stats.fdsClosed.Add(1) // first: whoever sees the close sees it counted
				unix.Close(fd)
			}
		}()
	}
	if drop != nil {
		return
	}
	s.deliver(data, at, cred, from, from != "")
}

// deliver parses one screened message from the sender cred (client its
// identity, see Received.Client) read at at, and queues it on C().
// bound: client is a datagram sender's address, remembered for
// directives once the message parses. A consumer that is behind costs the
// message (overflow), never the reader's progress.
func (s *Socket) deliver(data []byte, at time.Time, cred unix.Ucred, client string, bound bool) {
	r := pool.Get().(*Received)
	if err := Parse(data, &r.Msg); err != nil {
		s.stats.malformed.Add(1)
		Free(r)
		return
	}
	s.stats.badFields.Add(uint64(r.Msg.BadFields))
	r.At, r.PID, r.UID, r.Client = at, int(cred.Pid), int(cred.Uid), client
	if bound {
		s.addClient(client) // before the message is seen: its sender can be answered
	}
	select {
	case s.out <- r:
		s.stats.accepted.Add(1)
	default:
		s.stats.overflow.Add(1)
		Free(r)
	}
}

// screen decides whether a datagram read with flags and control messages
// ctl may go on to be parsed: it returns the sender's credentials, and the
// counter of the reason to drop it or nil.
func (s *Socket) screen(flags int, ctl []byte, now time.Time) (unix.Ucred, *atomic.Uint64) {
	cred, haveCred := credentials(ctl)
	switch {
	case flags&unix.MSG_TRUNC != 0:
		return cred, &s.stats.oversize
	case flags&unix.MSG_CTRUNC != 0 || !haveCred:
		return cred, &s.stats.malformed
	}
	s.screenMu.Lock()
	defer s.screenMu.Unlock()
	if drop := s.admit(cred, now); drop != nil {
		return cred, drop
	}
	// Rate limiting comes after authentication: the budget is the
	// agent's, and a forger flooding the socket must neither spend it
	// (starving the agent's real heartbeats into a heartbeat_timeout
	// kill) nor hide among datagrams counted as rate-limited.
	return cred, s.limit(cred.Pid, now)
}

// admit is the screen of a sender's kernel credentials, a datagram's
// (SCM_CREDENTIALS) or a stream peer's (SO_PEERCRED): the uid must be the
// agent's or root, and the pid a member of the agent's tree. It returns
// the counter of the reason to refuse it, or nil. s.screenMu is held.
func (s *Socket) admit(cred unix.Ucred, now time.Time) *atomic.Uint64 {
	if int(cred.Uid) != s.uid && cred.Uid != 0 {
		return &s.stats.forged
	}
	switch s.auth.verdict(int(cred.Pid), now) {
	case NotMember:
		return &s.stats.forged
	case Gone:
		return &s.stats.unverifiable
	}
	return nil
}

// limit spends one message of pid's rate budget: the main process's own
// (SetMainPID), or the one the rest of the tree shares. It returns the
// rate-limited counter when the budget is spent, else nil. s.screenMu is
// held.
func (s *Socket) limit(pid int32, now time.Time) *atomic.Uint64 {
	limit := &s.rate
	if p := s.mainPID.Load(); p != 0 && pid == p {
		limit = &s.mainRate
	}
	if !limit.allow(now) {
		return &s.stats.rateLimited
	}
	return nil
}

// SetMainPID names the agent's main process: its datagrams get a rate
// budget of their own, the rest of the tree shares the other.
func (s *Socket) SetMainPID(pid int) { s.mainPID.Store(int32(pid)) }

// credentials returns the sender's SCM_CREDENTIALS from the control
// messages ctl; SO_PASSCRED makes the kernel attach them to every datagram.
func credentials(ctl []byte) (unix.Ucred, bool) {
	for len(ctl) > 0 {
		hdr, data, rest, err := unix.ParseOneSocketControlMessage(ctl)
		if err != nil {
			break
		}
		ctl = rest
		if hdr.Level == unix.SOL_SOCKET && hdr.Type == unix.SCM_CREDENTIALS && len(data) >= unix.SizeofUcred {
			return *(*unix.Ucred)(unsafe.Pointer(&data[0])), true
		}
	}
	return unix.Ucred{}, false
}

// passedFDs lists the file descriptors passed in the control messages ctl
// (SCM_RIGHTS).
func passedFDs(ctl []byte) []int {
	var fds []int
	for len(ctl) > 0 {
		hdr, data, rest, err := unix.ParseOneSocketControlMessage(ctl)
		if err != nil {
			break
		}
		ctl = rest
		if hdr.Level != unix.SOL_SOCKET || hdr.Type != unix.SCM_RIGHTS {
			continue
		}
		for i := 0; i+4 <= len(data); i += 4 {
			fds = append(fds, int(*(*int32)(unsafe.Pointer(&data[i]))))
		}
	}
	return fds
}

// closeFDs closes every file descriptor passed in the control messages
// ctl (SCM_RIGHTS): nothing here wants them, and closing completes a
// BARRIER=1 (sd_notify_barrier(3) waits for its pipe to be closed).
func closeFDs(ctl []byte, st *Stats) {
	for _, fd := range passedFDs(ctl) {
		st.fdsClosed.Add(1) // first: whoever sees the close sees it counted
		unix.Close(fd)
	}
}
