// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !race

package client_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/pkg/client"
)

// TestHotPathDoesNotAllocate: the calls a work loop makes every step, and
// the background heartbeat's ticks (a beat, an extension), cost no
// allocation: what they add to a send is one atomic store of a monotonic
// timestamp. (Not under -race, which changes what escapes.)
func TestHotPathDoesNotAllocate(t *testing.T) {
	sup := newSupervisor(t)
	sup.drain()
	c := sup.dial()
	var n uint64
	for name, f := range map[string]func(){
		"Beat":           c.Beat,
		"Progress":       func() { n++; c.Progress(n) },
		"Usage":          func() { c.Usage(n, 0.25) },
		"Status":         func() { c.Status("step") },
		"Error nil":      func() { c.Error(nil) },
		"Heartbeat tick": func() { client.Tick(c) },
	} {
		require.Zero(t, testing.AllocsPerRun(1000, f), name)
	}

	end := c.Extend(time.Hour)
	defer end()
	client.SetWatchdog(c, time.Nanosecond) // silent: the wait speaks
	require.Zero(t, testing.AllocsPerRun(1000, func() { client.Tick(c) }), "Heartbeat tick in a wait")
}
