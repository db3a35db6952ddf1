// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package netns makes network namespaces for agents: a namespace of its
// own with only loopback, up, and nothing else — no route out of it.
// hermeskilld stays in its own namespace; it opens sockets in an agent's
// (the gateway's listener) from a thread that enters the namespace for
// the call and leaves it after, and the agent is forked from a thread
// inside it (procsup.Spec.NetNS).
//
// A network namespace is a property of each thread (setns(2), unshare(2)
// CLONE_NEWNET), and a socket stays in the namespace it was created in,
// whatever thread uses it later. So every entry is made on a goroutine
// locked to its thread; if the thread cannot go back to hermeskilld's
// namespace, it is left locked and dies with its goroutine (the Go runtime
// terminates such a thread) rather than serve others from the wrong
// namespace.
//
// Creating a namespace needs CAP_SYS_ADMIN (network_namespaces(7)).
//
// References: network_namespaces(7), setns(2), unshare(2), netdevice(7).
package netns

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// ErrPrivilege: creating a network namespace needs CAP_SYS_ADMIN.
var ErrPrivilege = errors.New("a network namespace needs CAP_SYS_ADMIN (run hermeskilld as root)")

// NS is a network namespace, held open by a descriptor.
type NS struct{ f *os.File }

const self = "/proc/thread-self/ns/net"

// New creates a network namespace whose loopback interface is up.
func New() (*NS, error) {
	var ns *NS
	err := onThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			if errors.Is(err, unix.EPERM) {
				return ErrPrivilege
			}
			return os.NewSyscallError("unshare CLONE_NEWNET", err)
		}
		if err := loopbackUp(); err != nil {
			return err
		}
		f, err := os.Open(self)
		if err != nil {
			return err
		}
		ns = &NS{f: f}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ns, nil
}

// FD is the namespace's descriptor (for setns(2)), valid until Close.
func (n *NS) FD() int { return int(n.f.Fd()) }

// Close releases the descriptor; the namespace lives on while a process
// or a socket is in it.
func (n *NS) Close() error { return n.f.Close() }

// Do runs fn on a thread inside the namespace: the sockets fn creates
// are the namespace's.
func (n *NS) Do(fn func() error) error {
	return onThread(func() error {
		if err := unix.Setns(n.FD(), unix.CLONE_NEWNET); err != nil {
			return os.NewSyscallError("setns", err)
		}
		return fn()
	})
}

// Listen is net.Listen inside the namespace.
func (n *NS) Listen(network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := n.Do(func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	})
	return ln, err
}

// onThread runs fn on a goroutine locked to its thread, then returns the
// thread to our namespace; a thread that cannot return dies.
func onThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open(self)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer home.Close()
		ferr := fn()
		if atHome(home) {
			runtime.UnlockOSThread() // fn never left (a refused unshare)
			errc <- ferr
			return
		}
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			// Still locked: the thread ends with this goroutine.
			errc <- errors.Join(ferr, os.NewSyscallError("setns back", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// atHome reports whether the calling thread is in home's namespace.
func atHome(home *os.File) bool {
	var h, cur unix.Stat_t
	return unix.Fstat(int(home.Fd()), &h) == nil && unix.Stat(self, &cur) == nil && h.Dev == cur.Dev && h.Ino == cur.Ino
}

// loopbackUp sets IFF_UP on lo (netdevice(7) SIOCSIFFLAGS).
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo: %w", os.NewSyscallError("ioctl SIOCGIFFLAGS", err))
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo: %w", os.NewSyscallError("ioctl SIOCSIFFLAGS", err))
	}
	return nil
}
