// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package netns

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A namespace's loopback is up and its own: a listener opened inside is
// reached from inside, not from our namespace, and ours not from inside.
func TestNamespaceHasOnlyItsLoopback(t *testing.T) {
	ns, err := New()
	if errors.Is(err, ErrPrivilege) {
		t.Skipf("%v (run go test as root)", err)
	}
	require.NoError(t, err)
	defer ns.Close()

	inside, err := ns.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer inside.Close()
	host, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer host.Close()

	dial := func(addr string) error {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	require.NoError(t, ns.Do(func() error { return dial(inside.Addr().String()) }), "inside to inside")
	require.ErrorIs(t, dial(inside.Addr().String()), syscall.ECONNREFUSED, "ours to inside")
	require.ErrorIs(t, ns.Do(func() error { return dial(host.Addr().String()) }), syscall.ECONNREFUSED, "inside to ours")
	require.ErrorIs(t, ns.Do(func() error { return dial("192.0.2.1:80") }), syscall.ENETUNREACH, "no route out")
	require.NoError(t, dial(host.Addr().String()), "the caller's thread is back home")
}

// Without CAP_SYS_ADMIN, New fails with ErrPrivilege and leaves the
// caller where it was.
func TestNewNeedsPrivilege(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("this test runs as root (euid 0), which has CAP_SYS_ADMIN, so New cannot be refused here; the refusal is tested end to end as uid 65534 by TestNamespaceModesNeedPrivilege in cmd/hermeskilld")
	}
	_, err := New()
	require.ErrorIs(t, err, ErrPrivilege)
}
