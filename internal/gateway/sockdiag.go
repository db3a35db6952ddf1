// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// The owner and inode of a loopback TCP socket are asked of the kernel by
// sock_diag(7): one exact lookup of the connection's four-tuple, whatever
// the number of sockets on the host. Reading /proc/net/tcp instead costs
// the whole table each time (3.3 ms with 2,000 sockets open, measured), so
// that a flood of connections would slow every accept to a crawl.
//
// One netlink socket serves every lookup, held open from the first: a
// lookup needs no new descriptor, even when hermeskilld has none left.

// Layouts of linux/sock_diag.h and linux/inet_diag.h.
const (
	nlmsgHdrLen     = 16
	inetDiagReqLen  = 56
	inetDiagMsgLen  = 72
	diagUIDOffset   = 4 + 48 + 12 // family..retrans, the sockid, expires, rqueue, wqueue
	diagInodeOffset = diagUIDOffset + 4
)

// diagSocket is a sock_diag socket, opened at the first lookup: it
// answers for the network namespace it was opened in.
type diagSocket struct {
	mu     sync.Mutex
	open   func() (int, error)
	fd     int // -1 once sock_diag is known not to work here
	opened bool
	seq    uint32
}

// openDiag opens a sock_diag socket in the calling thread's namespace.
func openDiag() (int, error) {
	return unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
}

// hostDiag answers for our own network namespace.
var hostDiag = &diagSocket{open: openDiag}

// diagUnsupported counts lookups that fell back to /proc/net/tcp.
var diagUnsupported atomic.Uint64

// errNoDiag: sock_diag does not work here (no inet_diag in the kernel,
// a seccomp filter): read /proc/net instead.
var errNoDiag = errors.New("sock_diag unavailable")

// diagLookup returns the inode and owner uid of the TCP socket whose own
// address is local and whose peer is remote.
func (diag *diagSocket) lookup(local, remote *net.TCPAddr) (inode uint64, uid uint32, err error) {
	req := make([]byte, nlmsgHdrLen+inetDiagReqLen)
	family := unix.AF_INET
	if local.IP.To4() == nil || remote.IP.To4() == nil {
		family = unix.AF_INET6
	}
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST)
	r := req[nlmsgHdrLen:]
	r[0], r[1] = byte(family), unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(r[4:], ^uint32(0)) // every state
	id := r[8:]
	binary.BigEndian.PutUint16(id[0:], uint16(local.Port))
	binary.BigEndian.PutUint16(id[2:], uint16(remote.Port))
	putAddr(id[4:20], local.IP, family)
	putAddr(id[20:36], remote.IP, family)
	binary.NativeEndian.PutUint32(id[40:], ^uint32(0)) // INET_DIAG_NOCOOKIE
	binary.NativeEndian.PutUint32(id[44:], ^uint32(0))

	diag.mu.Lock()
	defer diag.mu.Unlock()
	if !diag.opened {
		diag.opened = true
		diag.fd, err = diag.open()
		if err != nil {
			diag.fd = -1
		}
	}
	if diag.fd < 0 {
		return 0, 0, errNoDiag
	}
	diag.seq++
	seq := diag.seq
	binary.NativeEndian.PutUint32(req[8:], seq)
	if err := unix.Sendto(diag.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, 0, os.NewSyscallError("sock_diag sendto", err)
	}
	buf := make([]byte, 4096)
	for {
		n, _, err := unix.Recvfrom(diag.fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, 0, os.NewSyscallError("sock_diag recvfrom", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return 0, 0, fmt.Errorf("sock_diag: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue // an answer to a lookup that gave up
			}
			switch m.Header.Type {
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					errno := unix.Errno(-int32(binary.NativeEndian.Uint32(m.Data)))
					if errno == unix.EOPNOTSUPP || errno == unix.EPROTONOSUPPORT || errno == unix.EINVAL {
						return 0, 0, errNoDiag
					}
					return 0, 0, fmt.Errorf("no socket %s -> %s: %w", local, remote, errno)
				}
				return 0, 0, errors.New("sock_diag: short error")
			case unix.SOCK_DIAG_BY_FAMILY:
				if len(m.Data) < inetDiagMsgLen {
					return 0, 0, errors.New("sock_diag: short answer")
				}
				return uint64(binary.NativeEndian.Uint32(m.Data[diagInodeOffset:])),
					binary.NativeEndian.Uint32(m.Data[diagUIDOffset:]), nil
			}
		}
	}
}

// putAddr writes ip as inet_diag_sockid holds it: network byte order,
// an IPv4 address in the first word.
func putAddr(dst []byte, ip net.IP, family int) {
	if family == unix.AF_INET {
		copy(dst, ip.To4())
		return
	}
	copy(dst, ip.To16())
}

// close closes the socket; later lookups fail.
func (diag *diagSocket) close() {
	diag.mu.Lock()
	defer diag.mu.Unlock()
	if diag.opened && diag.fd >= 0 {
		unix.Close(diag.fd)
	}
	diag.opened, diag.fd = true, -1
}

// socketEntry is the inode and the owner's uid of the TCP socket bound to
// local and connected to remote, in diag's network namespace (nil: ours):
// by sock_diag, or, in ours, from /proc/net/tcp or tcp6 where sock_diag
// does not work.
func socketEntry(diag *diagSocket, local, remote *net.TCPAddr) (inode uint64, uid string, err error) {
	own := diag == nil
	if own {
		diag = hostDiag
	}
	ino, u, err := diag.lookup(local, remote)
	if err == nil {
		return ino, strconv.FormatUint(uint64(u), 10), nil
	}
	if !errors.Is(err, errNoDiag) || !own {
		return 0, "", err
	}
	diagUnsupported.Add(1)
	return procNetEntry(local, remote)
}
