// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/pkg/client"
)

func TestExtendMessages(t *testing.T) {
	sup := newSupervisor(t)
	c := sup.dial()

	end := c.Extend(90 * time.Second)
	require.Equal(t, "EXTEND_TIMEOUT_USEC=90000000", sup.recv())
	end()
	end() // once
	c.Extend(time.Nanosecond)()
	require.Equal(t, "EXTEND_TIMEOUT_USEC=1", sup.recv(), "rounded up, never 0")
	c.Extend(0)()
	c.Extend(-time.Second)()
	c.Beat()
	require.Equal(t, "WATCHDOG=1", sup.recv(), "a wait of 0 or less declares nothing")
	require.Zero(t, c.Dropped())
}

// Overlapping waits: the longest open one covers; ending it leaves the
// other; ending both leaves nothing to extend. Heartbeat is driven with a
// window of a nanosecond, so that only declared waits make it speak.
func TestExtendOverlapping(t *testing.T) {
	sup := newSupervisor(t)
	c := sup.dial()
	client.SetWatchdog(c, time.Nanosecond)
	tick := func() string {
		t.Helper()
		c.Heartbeat(canceled(), time.Hour) // one beat, then it returns
		return sup.recv()
	}
	endShort := c.Extend(time.Minute)
	sup.recv()
	endLong := c.Extend(time.Hour)
	sup.recv()
	require.Equal(t, "EXTEND_TIMEOUT_USEC=1", tick(), "the window, shorter than what is left")

	client.SetWatchdog(c, 2*time.Hour)
	require.Equal(t, "WATCHDOG=1", tick(), "Extend counts as activity")
	client.SetWatchdog(c, time.Nanosecond)

	endLong()
	endShort()
	endLong()
	c.Heartbeat(canceled(), time.Hour)
	c.Beat()
	require.Equal(t, "WATCHDOG=1", sup.recv(), "no wait left, no activity within a nanosecond: the tick sent nothing")
}

// canceled is a context that has ended.
func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
