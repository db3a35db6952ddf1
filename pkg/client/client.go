// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// redialInterval bounds how often a client whose supervisor went away tries
// to connect again.
const redialInterval = time.Second

// Client reports to hermeskilld and receives its directives. The zero value is
// not usable: get one from FromEnv or New. Its methods are safe for concurrent
// use; a Client that is not supervised does nothing.
type Client struct {
	supervised bool
	watchdog   time.Duration // WATCHDOG_USEC, 0 when unset
	// systemd: the address came from NOTIFY_SOCKET alone. systemd cannot
	// extend a watchdog, so a declared wait is covered with WATCHDOG=1.
	systemd bool

	// What the background heartbeat knows of the work loop, in nanoseconds
	// of the monotonic clock since epoch (see Heartbeat and Extend).
	epoch   time.Time
	active  atomic.Int64 // when the work loop last called the client
	waitEnd atomic.Int64 // the latest end of the open declared waits; 0 = none

	mu        sync.Mutex // guards the fields below, and serialises sends
	fd        int
	wake      int                // eventfd: Close wakes the directive reader with it; -1 when none
	peer      *unix.SockaddrUnix // the supervisor
	self      *unix.SockaddrUnix // the client's own (autobound) address
	connected bool
	closed    bool
	lastDial  time.Time
	now       func() time.Time
	buf       []byte  // the message being built
	waits     []int64 // the ends of the open declared waits

	dropped atomic.Uint64

	stopped context.Context // cancelled with a *StopError on STOP
	stop    context.CancelCauseFunc
	// watchers counts the contexts of Context that have not ended: an
	// agent holding one watches for the stop, and a STOP is acknowledged.
	watchers   atomic.Int64
	warnings   chan string
	done       chan struct{} // closed by Close
	readerDone chan struct{} // closed when the directive reader returns
}

// FromEnv returns a client for the supervisor named by HERMESKILL_SOCKET, or
// else NOTIFY_SOCKET, with the heartbeat timeout from WATCHDOG_USEC. When
// neither variable is set it returns a no-op client and no error. A client
// of NOTIFY_SOCKET alone talks to systemd, which cannot extend a watchdog:
// see Extend.
//
// Errors: ErrBadAddress or ErrBadWatchdog for a malformed variable, or the
// socket error of New (e.g. syscall.ENOENT when the socket does not exist).
func FromEnv() (*Client, error) {
	name, addr := envAddress()
	if name == "" {
		return newClient(), nil
	}
	watchdog, err := WatchdogFromEnv()
	if err != nil {
		return nil, err
	}
	c, err := New(addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c.watchdog = watchdog
	c.systemd = name == "NOTIFY_SOCKET"
	return c, nil
}

// New returns a client connected to the supervisor socket at addr: an absolute
// path, or "@name" for the abstract namespace. It starts the goroutine that
// reads directives; Close stops it.
//
// Errors: ErrBadAddress, or an *os.SyscallError from socket, bind or connect
// (syscall.ENOENT or syscall.ECONNREFUSED when nobody listens at addr).
func New(addr string) (*Client, error) {
	peer, err := parseAddress(addr)
	if err != nil {
		return nil, err
	}
	fd, self, err := dial(peer)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	c := newClient()
	c.supervised = true
	c.fd, c.peer, c.self, c.connected = fd, peer, self, true
	// The directive reader waits in poll(2) for input only. Not through
	// the runtime's poller: that registers the socket for write space
	// too, and every heartbeat the supervisor reads would then wake this
	// process (and cost the supervisor that wake-up).
	if c.wake, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("eventfd", err)
	}
	c.stopped, c.stop = context.WithCancelCause(context.Background())
	c.readerDone = make(chan struct{})
	go c.readDirectives()
	return c, nil
}

func newClient() *Client {
	return &Client{
		epoch:    time.Now(), // the creation counts as activity
		fd:       -1,
		wake:     -1,
		now:      time.Now,
		buf:      make([]byte, 0, 2*maxText+256),
		warnings: make(chan string, warningsBuffer),
		done:     make(chan struct{}),
	}
}

// dial opens the client's socket, bound to a fresh abstract address and
// connected to peer.
func dial(peer *unix.SockaddrUnix) (int, *unix.SockaddrUnix, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return -1, nil, os.NewSyscallError("socket", err)
	}
	self, err := bindAndConnect(fd, peer)
	if err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	return fd, self, nil
}

func bindAndConnect(fd int, peer *unix.SockaddrUnix) (*unix.SockaddrUnix, error) {
	// An empty address (addrlen = sizeof(sa_family_t)) makes Linux pick a
	// unique abstract name, "autobind" in unix(7). The supervisor can only
	// send directives back to a socket that has an address.
	if err := unix.Bind(fd, &unix.SockaddrUnix{}); err != nil {
		return nil, os.NewSyscallError("bind", err)
	}
	// Connecting is what authenticates directives: any local process may send
	// to an abstract address, but a connected datagram socket only receives
	// from its peer; the kernel refuses everyone else with EPERM (unix(7),
	// connect(2)).
	if err := unix.Connect(fd, peer); err != nil {
		return nil, os.NewSyscallError("connect", err)
	}
	// Whatever arrived between bind and connect came from someone else: the
	// supervisor only answers a socket it has heard from.
	discardQueued(fd)
	self, err := unix.Getsockname(fd)
	if err != nil {
		return nil, os.NewSyscallError("getsockname", err)
	}
	return self.(*unix.SockaddrUnix), nil
}

// discardQueued empties the receive queue of the nonblocking socket fd.
func discardQueued(fd int) {
	var b [1]byte
	for {
		if _, err := unix.Read(fd, b[:]); err != nil && err != unix.EINTR {
			return
		}
	}
}

// Supervised reports whether the client talks to a supervisor; false for the
// no-op client.
func (c *Client) Supervised() bool { return c.supervised }

// Dropped returns how many messages could not be sent: the supervisor's
// receive queue was full (EAGAIN, ENOBUFS), or the supervisor was gone.
func (c *Client) Dropped() uint64 { return c.dropped.Load() }

// Close releases the socket, stops the directive reader and every Heartbeat
// loop, and closes the Warnings channel. It does not cancel contexts returned
// by Context. Calls after the first do nothing and return nil; sends after
// Close do nothing.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()

	close(c.done)
	var err error
	if c.wake >= 0 {
		var one [8]byte
		one[0] = 1
		_, _ = unix.Write(c.wake, one[:]) // wakes the reader, which then returns
		<-c.readerDone
		c.mu.Lock() // no send is using fd
		err = unix.Close(c.fd)
		c.fd = -1
		c.mu.Unlock()
		unix.Close(c.wake)
	}
	close(c.warnings)
	return err
}

// send sends msg as one datagram, never blocking. The caller holds c.mu.
func (c *Client) send(msg []byte) {
	if c.closed {
		return
	}
	if !c.connected && !c.redial() {
		c.dropped.Add(1)
		return
	}
	err := write(c.fd, msg)
	if err == unix.ECONNREFUSED || err == unix.ENOTCONN {
		// The supervisor's socket was closed; it may be back already.
		c.disconnect()
		if c.redial() {
			err = write(c.fd, msg)
		}
	}
	if err != nil {
		c.dropped.Add(1)
	}
}

func write(fd int, msg []byte) error {
	for {
		_, err := unix.Write(fd, msg)
		if err != unix.EINTR {
			return err
		}
	}
}

// disconnect marks the supervisor gone. The caller holds c.mu.
func (c *Client) disconnect() {
	c.connected = false
	// The kernel dropped the dead peer, which left the socket unconnected, and
	// so open to datagrams from any process. Connecting the socket to itself
	// closes it again until redial, whose connect also purges the receive
	// queue (the peer changes).
	_ = unix.Connect(c.fd, c.self)
}

// redial connects to the supervisor again, at most once per redialInterval.
// The caller holds c.mu.
func (c *Client) redial() bool {
	now := c.now()
	if !c.lastDial.IsZero() && now.Sub(c.lastDial) < redialInterval {
		return false
	}
	c.lastDial = now
	if err := unix.Connect(c.fd, c.peer); err != nil {
		return false
	}
	c.connected = true
	return true
}
