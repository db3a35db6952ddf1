// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package testaudit turns the kernel's auditing on for the tests that read
// Landlock's denials from it, and off again after the last of them, when
// it was off before: hermeskilld itself never changes the audit
// configuration. Test binaries of several packages run at once, so they
// share the change through a lock file: each holds a shared lock while it
// needs auditing, and the one that can take the lock exclusively at its
// end, with nobody else holding it, turns auditing back off if a test
// turned it on (a marker file says so).
package testaudit

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

const (
	lockPath   = "/run/hermeskill-test-audit.lock"
	markerPath = "/run/hermeskill-test-audit.enabled-by-tests"

	auditGet             = 1000
	auditSet             = 1001
	auditStatusEnabled   = 1 // AUDIT_STATUS_ENABLED
	auditStatusSize      = 4 * 11
	auditStatusEnabledAt = 4
)

// Enable makes sure the kernel's auditing is on until the test ends. It
// skips the test where it cannot be: not root, no audit subsystem (a
// kernel without CONFIG_AUDIT, a network namespace not the host's).
func Enable(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("not root (euid %d): turning the kernel's auditing on needs CAP_AUDIT_CONTROL", os.Geteuid())
	}
	lock, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	on, err := enabled()
	if err != nil {
		lock.Close()
		t.Skipf("the kernel's audit subsystem is not available here: %v", err)
	}
	if !on {
		if err := os.WriteFile(markerPath, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := set(true); err != nil {
			t.Fatalf("turning auditing on: %v", err)
		}
	}
	t.Cleanup(func() {
		defer lock.Close()
		if unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			return // another test still needs it
		}
		if _, err := os.Stat(markerPath); err != nil {
			return // it was on before the tests
		}
		if err := set(false); err != nil {
			t.Errorf("turning auditing back off: %v", err)
			return
		}
		os.Remove(markerPath)
	})
}

func enabled() (bool, error) {
	reply, err := request(auditGet, nil)
	if err != nil {
		return false, err
	}
	if len(reply) < auditStatusEnabledAt+4 {
		return false, errors.New("short audit status")
	}
	return binary.NativeEndian.Uint32(reply[auditStatusEnabledAt:]) != 0, nil
}

func set(on bool) error {
	st := make([]byte, auditStatusSize)
	binary.NativeEndian.PutUint32(st[0:], auditStatusEnabled)
	if on {
		binary.NativeEndian.PutUint32(st[auditStatusEnabledAt:], 1)
	}
	_, err := request(auditSet, st)
	return err
}

// request sends one audit request and returns the reply's data (nil for a
// bare acknowledgement).
func request(typ uint16, data []byte) ([]byte, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 2}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	msg := make([]byte, unix.NLMSG_HDRLEN+len(data))
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:], 1)
	copy(msg[unix.NLMSG_HDRLEN:], data)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, os.NewSyscallError("sendto", err)
	}
	buf := make([]byte, 8192)
	var reply []byte
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, os.NewSyscallError("recvfrom", err)
		}
		if n < unix.NLMSG_HDRLEN {
			return nil, errors.New("short netlink reply")
		}
		switch binary.NativeEndian.Uint16(buf[4:6]) {
		case unix.NLMSG_ERROR:
			if e := int32(binary.NativeEndian.Uint32(buf[unix.NLMSG_HDRLEN:])); e < 0 {
				return nil, unix.Errno(-e)
			}
			if typ == auditSet || reply != nil {
				return reply, nil // the acknowledgement ends it
			}
		default:
			reply = append([]byte(nil), buf[unix.NLMSG_HDRLEN:n]...)
			if typ == auditGet {
				return reply, nil
			}
		}
	}
}
