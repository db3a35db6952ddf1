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
// coming). A batch every interval costs a few wake-ups per interval
// whatever the number of agents.
//
// Reading late does not move the heartbeat clock: the kernel stamps each
// datagram when it arrives (SO_TIMESTAMPNS) and Received.At is that time.
// A consumer about to judge a deadline calls Socket.Sync first, which
// reads what has arrived at once.
type Poller struct {
	interval time.Duration
	epfd     int
	wake     int // eventfd: Close wakes the goroutine with it

	mu     sync.Mutex // held while reading; guards what follows
	socks  map[int32]*Socket
	closed bool
	buf    []byte
	oob    []byte

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

// NewPoller starts a poller that reads at most once per interval (0: as
// soon as a datagram arrives).
func NewPoller(interval time.Duration) (*Poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, os.NewSyscallError("eventfd", err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wake)}); err != nil {
		unix.Close(epfd)
		unix.Close(wake)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	p := &Poller{interval: interval, epfd: epfd, wake: wake, socks: make(map[int32]*Socket),
		buf: make([]byte, MaxDatagram), oob: make([]byte, oobPollSize), stop: make(chan struct{}), done: make(chan struct{})}
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
	var one [8]byte
	one[0] = 1
	_, _ = unix.Write(p.wake, one[:])
	<-p.done
	return errors.Join(unix.Close(p.epfd), unix.Close(p.wake))
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
	defer p.mu.Unlock()
	if p.socks[int32(s.fd)] == s {
		delete(p.socks, int32(s.fd))
		_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, s.fd, nil)
	}
}

func (p *Poller) run() {
	defer close(p.done)
	events := make([]unix.EpollEvent, 256)
	pause := time.NewTimer(time.Hour)
	pause.Stop()
	defer pause.Stop()
	for {
		n, err := unix.EpollWait(p.epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		began := time.Now()
		p.batches.Add(1)
		p.mu.Lock()
		if p.closed || err != nil {
			p.mu.Unlock()
			return
		}
		for _, ev := range events[:n] {
			if s := p.socks[ev.Fd]; s != nil {
				p.readLocked(s, batchPerSocket)
			}
		}
		p.mu.Unlock()
		if rest := p.interval - time.Since(began); rest > 0 {
			pause.Reset(rest)
			select {
			case <-pause.C:
			case <-p.stop:
				return
			}
		}
	}
}

// Sync reads what has arrived on s so far and queues it on C(), without
// waiting for the poller's next batch. A consumer calls it before judging
// a deadline, so that a heartbeat that arrived in time is applied first.
// Without a poller it does nothing: the socket's reader reads at once.
func (s *Socket) Sync() {
	p := s.poller
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.socks[int32(s.fd)] == s {
		p.readLocked(s, queueLen)
	}
}

// readLocked reads up to max datagrams from s; p.mu is held.
func (p *Poller) readLocked(s *Socket, max int) {
	for range max {
		n, oobn, flags, from, err := unix.Recvmsg(s.fd, p.buf, p.oob, unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
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
		oob := p.oob[:oobn]
		s.handle(p.buf[:n], oob, flags, name, arrival(oob, time.Now(), p.interval))
	}
}

// arrival is when the datagram with control messages oob arrived, on the
// monotonic clock of now: now less the age the kernel's timestamp gives,
// within what a batch can delay (a wall clock stepped since is ignored).
func arrival(oob []byte, now time.Time, interval time.Duration) time.Time {
	for len(oob) > 0 {
		hdr, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			break
		}
		oob = rest
		if hdr.Level == unix.SOL_SOCKET && hdr.Type == unix.SCM_TIMESTAMPNS && len(data) >= int(unsafe.Sizeof(unix.Timespec{})) {
			ts := *(*unix.Timespec)(unsafe.Pointer(&data[0]))
			age := now.Sub(time.Unix(ts.Unix()))
			if age < 0 || age > 2*interval+time.Second {
				return now
			}
			return now.Add(-age)
		}
	}
	return now
}

// Batches counts the batches read so far.
func (p *Poller) Batches() uint64 { return p.batches.Load() }

// String names the poller for logs.
func (p *Poller) String() string { return fmt.Sprintf("heartbeat poller (every %s)", p.interval) }
