// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Poller reads many agents' sockets from one goroutine, in batches at most
// once per interval. With a reader goroutine per socket, every heartbeat
// wakes a thread: with a thousand agents beating at 1 Hz the daemon spent
// most of its CPU on the context switches (and on the Go scheduler's
// monitor thread, which polls the network without sleep while events keep
// coming). The poller looks once per interval, whatever the number of
// agents and heartbeats.
//
// It looks with a non-blocking epoll_wait(2) on a timer, rather than
// waiting for the descriptors to be ready: waiting in epoll_wait, a thread
// is in a long system call that the runtime's monitor keeps retaking (and
// polls more often for); waiting through the runtime's own poller, every
// datagram wakes a thread even while nobody reads.
//
// Reading late does not move the heartbeat clock: the kernel stamps each
// datagram when it arrives (SO_TIMESTAMPNS) and Received.At is that time.
// A consumer about to judge a deadline calls Socket.Sync first, which
// reads what has arrived at once.
type Poller struct {
	interval time.Duration
	epfd     int

	// mu guards the set of sockets and the epoll instance only: it is
	// never held while a socket is read, so that nothing one agent's
	// socket does (a flood, a sender being authenticated, a socket being
	// closed) holds back the reading of the others.
	mu     sync.Mutex
	socks  map[int32]*Socket
	closed bool

	// Used by the poller's goroutine only.
	buf, oob []byte
	events   []unix.EpollEvent
	ready    []*Socket

	batches atomic.Uint64
	stop    chan struct{} // closed by Close
	done    chan struct{}
}

// batchPerSocket bounds the datagrams read from one socket in one batch,
// so that a flooded socket cannot hold the others back; the rest is read
// at the next batch (the descriptor stays ready).
const batchPerSocket = 64

// oobPollSize adds the arrival time to what a socket's reader expects.
var oobPollSize = oobSize + unix.CmsgSpace(int(unsafe.Sizeof(unix.Timespec{})))

// NewPoller starts a poller that reads once per interval (at least 1 ms).
func NewPoller(interval time.Duration) (*Poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	if interval <= 0 {
		interval = time.Millisecond
	}
	p := &Poller{interval: interval, epfd: epfd, socks: make(map[int32]*Socket),
		buf: make([]byte, MaxDatagram), oob: make([]byte, oobPollSize),
		stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p, nil
}

// Close stops the poller and waits for it. Its sockets must be closed
// first; those still open are read no more.
func (p *Poller) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.done
		return nil
	}
	p.closed = true
	close(p.stop)
	p.mu.Unlock()
	<-p.done
	return unix.Close(p.epfd)
}

func (p *Poller) add(s *Socket) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("heartbeat: poller closed")
	}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, s.fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(s.fd)}); err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	p.socks[int32(s.fd)] = s
	return nil
}

// remove stops reading s; when it returns, the poller is not reading s and
// never will again.
func (p *Poller) remove(s *Socket) {
	p.mu.Lock()
	if p.socks[int32(s.fd)] == s {
		delete(p.socks, int32(s.fd))
		if !p.closed { // once closed, epfd may be another file's number
			_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, s.fd, nil)
		}
	}
	p.mu.Unlock()
	// The poller may have taken s among the ready ones just before: wait
	// for that reading to end; any later one sees removed and stops.
	s.readMu.Lock()
	s.removed = true
	s.readMu.Unlock()
}

func (p *Poller) run() {
	defer close(p.done)
	next := time.NewTimer(p.interval)
	defer next.Stop()
	quiet := hotBatches + 1 // batches in a row in which no socket was busy
	for {
		select {
		case <-next.C:
		case <-p.stop:
			return
		}
		ready, ok := p.wait()
		if !ok {
			return
		}
		busiest := 0
		for i, s := range ready {
			busiest = max(busiest, s.readBatch(p.buf, p.oob, p.interval, batchPerSocket))
			ready[i] = nil
		}
		// A socket that held more than a datagram is sending faster than
		// a heartbeat: its kernel queue holds only net.unix.max_dgram_qlen
		// datagrams (often 10) and its client drops what does not fit, so
		// look again soon, until it calms down.
		if busiest > 1 {
			quiet = 0
		} else {
			quiet++
		}
		if quiet <= hotBatches {
			next.Reset(hotInterval)
		} else {
			next.Reset(p.interval)
		}
	}
}

// wait returns the sockets that have datagrams waiting, under p.mu and
// without blocking; false once the poller is closed. The events buffer
// holds every socket, so that one epoll_wait(2) sees them all (ready
// sockets that are not read, such as one whose run is not ready yet, are
// reported again and again: level-triggered).
func (p *Poller) wait() ([]*Socket, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, false
	}
	if n := len(p.socks) + 1; len(p.events) < n {
		p.events = make([]unix.EpollEvent, max(n, 2*len(p.events), 256))
	}
	p.ready = p.ready[:0]
	for {
		n, err := unix.EpollWait(p.epfd, p.events, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if n > 0 {
			p.batches.Add(1)
		}
		for _, ev := range p.events[:max(n, 0)] {
			if s := p.socks[ev.Fd]; s != nil {
				p.ready = append(p.ready, s)
			}
		}
		return p.ready, true
	}
}

// While a socket is busy the poller looks every hotInterval, and keeps to
// it for hotBatches more batches once all are quiet.
const (
	hotInterval = 2 * time.Millisecond
	hotBatches  = 50
)

// Sync reads what has arrived on s so far and queues it on C(), without
// waiting for the poller's next batch. A consumer calls it before judging
// a deadline, so that a heartbeat that arrived in time is applied first.
// Without a poller it does nothing: the socket's reader reads at once.
// It waits for nothing but s's own reading (the poller's, at most one
// batch of s): never for the other sockets.
func (s *Socket) Sync() {
	if s.poller == nil {
		return
	}
	b := syncBufs.Get().(*syncBuf)
	defer syncBufs.Put(b)
	s.readPolled(b.buf, b.oob, s.poller.interval, queueLen, true)
}

// syncBuf is the buffers of a Sync, which can run beside the poller's
// batch (of other sockets) and other sockets' Syncs.
type syncBuf struct{ buf, oob []byte }

var syncBufs = sync.Pool{New: func() any {
	return &syncBuf{buf: make([]byte, MaxDatagram), oob: make([]byte, oobPollSize)}
}}

// readBatch is the poller's reading of s: up to max datagrams, and none
// when s is being read already (by a Sync, which reads it all).
func (s *Socket) readBatch(buf, oob []byte, interval time.Duration, max int) int {
	return s.readPolled(buf, oob, interval, max, false)
}

// readPolled reads up to max datagrams from s into buf and oob and returns how
// many it read; wait: wait for s's other reader rather than leave it to
// it. Nothing is read before the socket's run is ready (Config.Ready), nor
// while descriptors an earlier datagram passed are still being closed.
func (s *Socket) readPolled(buf, oob []byte, interval time.Duration, max int, wait bool) (read int) {
	if wait {
		s.readMu.Lock()
	} else if !s.readMu.TryLock() {
		return 0
	}
	defer s.readMu.Unlock()
	if s.removed || !s.isReady() {
		return 0
	}
	for range max {
		if s.closingFDs.Load() {
			return
		}
		n, oobn, flags, from, err := unix.Recvmsg(s.fd, buf, oob, unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			return
		}
		if err != nil {
			s.stats.readErrors.Add(1)
			return
		}
		var name string
		if sa, ok := from.(*unix.SockaddrUnix); ok {
			name = sa.Name
		}
		ctl := oob[:oobn]
		now := time.Now()
		at, age := arrival(ctl, now, interval)
		s.stats.lag(age)
		s.handle(buf[:n], ctl, flags, name, at)
		read++
	}
	return read
}

// isReady reports whether the socket's run can judge its senders; s.readMu
// is held.
func (s *Socket) isReady() bool {
	if s.ready == nil {
		return true
	}
	select {
	case <-s.ready:
		s.ready = nil
		return true
	default:
		return false
	}
}

// arrival is when the datagram with control messages oob arrived, on the
// monotonic clock of now: now less the age the kernel's timestamp gives,
// within what a batch can delay (a wall clock stepped since is ignored).
// age is how long it waited to be read, by the kernel's stamp (0 without
// one, or with one from a clock stepped since).
func arrival(oob []byte, now time.Time, interval time.Duration) (at time.Time, age time.Duration) {
	for len(oob) > 0 {
		hdr, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			break
		}
		oob = rest
		if hdr.Level == unix.SOL_SOCKET && hdr.Type == unix.SCM_TIMESTAMPNS && len(data) >= int(unsafe.Sizeof(unix.Timespec{})) {
			ts := *(*unix.Timespec)(unsafe.Pointer(&data[0]))
			age := now.Sub(time.Unix(ts.Unix()))
			switch {
			case age < 0 || age > time.Hour:
				return now, 0
			case age > 2*interval+time.Second:
				return now, age
			}
			return now.Add(-age), age
		}
	}
	return now, 0
}

// Batches counts the batches read so far.
func (p *Poller) Batches() uint64 { return p.batches.Load() }

// String names the poller for logs.
func (p *Poller) String() string { return fmt.Sprintf("heartbeat poller (every %s)", p.interval) }

// Polled reports whether a poller reads s (in batches: see Sync).
func (s *Socket) Polled() bool { return s.poller != nil }
