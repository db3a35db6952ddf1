// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package denials

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// Matchable errors.
var (
	// ErrDisabled: the kernel's auditing is off, so Landlock logs nothing.
	ErrDisabled = errors.New("the kernel's auditing is disabled, so Landlock logs no denials (enable it: auditctl -e 1, or audit=1 at boot)")
	// ErrPermission: reading the audit log needs CAP_AUDIT_READ, and
	// asking whether auditing is on needs CAP_AUDIT_CONTROL.
	ErrPermission = errors.New("reading the kernel's audit log needs CAP_AUDIT_READ and CAP_AUDIT_CONTROL (run hermeskilld as root)")
	// ErrUnavailable: no audit subsystem (a kernel without CONFIG_AUDIT,
	// or a network namespace other than the host's, where the audit
	// socket refuses connections).
	ErrUnavailable = errors.New("the kernel's audit subsystem is not available here")
)

const (
	auditGet       = 1000 // AUDIT_GET: the audit status
	nlgrpReadlog   = 1    // AUDIT_NLGRP_READLOG, as a bind(2) group mask
	receiveBuffer  = 1 << 20
	maxPending     = 256 // events waiting for their AUDIT_SYSCALL record
	recentDenials  = 8
	maxMessageSize = 1 << 16
)

// Reader reads the kernel's Landlock denials and counts them for the
// agents it tracks. One Reader serves a whole hermeskilld.
type Reader struct {
	f    *os.File
	done chan struct{}
	// lost counts overruns of the socket's buffer (ENOBUFS): records the
	// kernel could not queue for us.
	lost atomic.Uint64

	mu      sync.Mutex
	tracked map[*Counter]struct{}
	domains map[uint64]*Counter // attributed domains
	pending map[uint64][]access // by event serial: denials of unattributed domains
	order   []uint64            // pending's serials, oldest first
	// The event whose denials were counted before its pid was read.
	lastCounted uint64
	lastCounter *Counter
}

// access is one denial waiting for the pid that attributes its domain.
type access struct {
	domain uint64
	d      Denial
}

// Available says whether Open would succeed here: nil, or its error.
func Available() error {
	if err := auditEnabled(); err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return socketError("socket", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: nlgrpReadlog}); err != nil {
		return socketError("bind AUDIT_NLGRP_READLOG", err)
	}
	return nil
}

// Open starts reading. It fails with ErrDisabled when auditing is off,
// ErrPermission without the capabilities, ErrUnavailable without an
// audit subsystem, or the socket's *os.SyscallError.
func Open() (*Reader, error) {
	if err := auditEnabled(); err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return nil, socketError("socket", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, receiveBuffer)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: nlgrpReadlog}); err != nil {
		unix.Close(fd)
		return nil, socketError("bind AUDIT_NLGRP_READLOG", err)
	}
	r := &Reader{
		f:       os.NewFile(uintptr(fd), "audit-readlog"),
		done:    make(chan struct{}),
		tracked: map[*Counter]struct{}{},
		domains: map[uint64]*Counter{},
		pending: map[uint64][]access{},
	}
	go r.loop()
	return r, nil
}

func socketError(call string, err error) error {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return ErrPermission
	case errors.Is(err, unix.EPROTONOSUPPORT), errors.Is(err, unix.ECONNREFUSED):
		return ErrUnavailable
	}
	return os.NewSyscallError(call, err)
}

// auditEnabled asks the kernel whether auditing is on (AUDIT_GET, answered
// with a struct audit_status whose second field is "enabled").
func auditEnabled() error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return socketError("socket", err)
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 2}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	req := make([]byte, unix.NLMSG_HDRLEN)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], auditGet)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(req[8:], 1)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return socketError("sendto AUDIT_GET", err)
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return socketError("recvfrom AUDIT_GET", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return fmt.Errorf("the audit status: %w", err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if e := int32(binary.NativeEndian.Uint32(m.Data)); e < 0 {
						return socketError("AUDIT_GET", unix.Errno(-e))
					}
				}
			case auditGet:
				if len(m.Data) < 8 {
					return fmt.Errorf("the audit status: %d bytes", len(m.Data))
				}
				if binary.NativeEndian.Uint32(m.Data[4:]) == 0 {
					return ErrDisabled
				}
				return nil
			}
		}
	}
}

// Close stops reading. Counters keep what they counted.
func (r *Reader) Close() error {
	err := r.f.Close()
	<-r.done
	return err
}

// Lost is how many times the kernel could not queue records for us (the
// counts may be low until each domain's final total arrives).
func (r *Reader) Lost() uint64 { return r.lost.Load() }

func (r *Reader) loop() {
	defer close(r.done)
	buf := make([]byte, maxMessageSize)
	for {
		n, err := r.f.Read(buf)
		if errors.Is(err, unix.ENOBUFS) {
			r.lost.Add(1)
			continue
		}
		if err != nil {
			return // closed
		}
		// One record per datagram, not padded to the 4-byte alignment
		// netlink messages otherwise keep (syscall.ParseNetlinkMessage
		// refuses a record of 181 bytes): the type is read from the
		// header, the text is the rest.
		if n < unix.NLMSG_HDRLEN {
			continue
		}
		typ := binary.NativeEndian.Uint16(buf[4:6])
		if rec, ok := parseRecord(typ, string(trimNUL(buf[unix.NLMSG_HDRLEN:n]))); ok {
			r.observe(rec)
		}
	}
}

func trimNUL(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}

// observe applies one record.
func (r *Reader) observe(rec record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch rec.typ {
	case typeLandlockAccess:
		dom, ok := rec.domain()
		if !ok {
			return
		}
		d := Denial{Blockers: rec.fields["blockers"], Target: target(rec), serial: rec.serial}
		if c := r.domains[dom]; c != nil {
			c.add(dom, d)
			r.lastCounted, r.lastCounter = rec.serial, c // its pid comes next
			return
		}
		if _, ok := r.pending[rec.serial]; !ok {
			r.order = append(r.order, rec.serial)
			if len(r.order) > maxPending {
				delete(r.pending, r.order[0])
				r.order = r.order[1:]
			}
		}
		r.pending[rec.serial] = append(r.pending[rec.serial], access{dom, d})
	case typeSyscall:
		if r.lastCounter != nil && r.lastCounted == rec.serial {
			if pid, ok := rec.int("pid"); ok {
				r.lastCounter.setPID(rec.serial, pid)
			}
			r.lastCounter = nil
		}
		waiting, ok := r.pending[rec.serial]
		if !ok {
			return
		}
		r.forget(rec.serial)
		pid, ok := rec.int("pid")
		if !ok {
			return
		}
		for _, a := range waiting {
			c := r.domains[a.domain]
			if c == nil {
				c = r.owner(pid)
			}
			if c == nil {
				continue // another sandbox on this host
			}
			r.domains[a.domain] = c
			a.d.PID = pid
			c.add(a.domain, a.d)
			c.setPID(rec.serial, pid)
		}
	case typeEOE:
		r.forget(rec.serial) // a task without an audit context: no pid, no owner
	case typeLandlockDomain:
		dom, ok := rec.domain()
		if !ok {
			return
		}
		if rec.fields["status"] == "allocated" {
			// Logged with a domain's first denial: its creator's pid,
			// alive or not when the system call's record comes.
			if pid, ok := rec.int("pid"); ok && r.domains[dom] == nil {
				if c := r.owner(pid); c != nil {
					r.attribute(rec.serial, dom, c)
				}
			}
			return
		}
		if rec.fields["status"] != "deallocated" {
			return
		}
		c := r.domains[dom]
		if c == nil {
			return
		}
		if n, ok := rec.int("denials"); ok {
			c.final(dom, n)
		}
		delete(r.domains, dom)
	}
}

// attribute gives domain to c, with the denials of event serial waiting
// for it.
func (r *Reader) attribute(serial, domain uint64, c *Counter) {
	r.domains[domain] = c
	waiting := r.pending[serial]
	kept := waiting[:0]
	for _, a := range waiting {
		if a.domain == domain {
			c.add(domain, a.d)
			r.lastCounted, r.lastCounter = serial, c
		} else {
			kept = append(kept, a)
		}
	}
	if len(kept) == 0 {
		r.forget(serial)
	} else {
		r.pending[serial] = kept
	}
}

func (r *Reader) forget(serial uint64) {
	if _, ok := r.pending[serial]; !ok {
		return
	}
	delete(r.pending, serial)
	for i, s := range r.order {
		if s == serial {
			r.order = append(r.order[:i], r.order[i+1:]...)
			break
		}
	}
}

// owner is the tracked counter whose agent pid belongs to; r.mu is held.
func (r *Reader) owner(pid int) *Counter {
	for c := range r.tracked {
		if c.owns(pid) {
			return c
		}
	}
	return nil
}

// target is what a denial was about: the path for the file system, the
// other process for a signal.
func target(rec record) string {
	if p, ok := rec.fields["path"]; ok {
		return p
	}
	if p, ok := rec.fields["opid"]; ok {
		if comm := rec.fields["ocomm"]; comm != "" {
			return "pid " + p + " (" + comm + ")"
		}
		return "pid " + p
	}
	return ""
}
