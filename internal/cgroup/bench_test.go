// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// benchTree is the process count of the benchmark trees.
const benchTree = 100

// BenchmarkKill100 times Kill to WaitEmpty's return for a tree of 100
// processes (the target is under 10ms). Building the tree is not timed,
// but it is slow: run with -benchtime=Nx (e.g. 20x).
func BenchmarkKill100(b *testing.B) {
	benchKill(b, false)
}

// BenchmarkKill100Fallback is the same through the path of kernels
// without cgroup.kill.
func BenchmarkKill100Fallback(b *testing.B) {
	benchKill(b, true)
}

func benchKill(b *testing.B, fallback bool) {
	m := newTestManager(b, func(o *Options) { o.fallbackKill = fallback })
	b.StopTimer()
	var killTime time.Duration
	for range b.N {
		g, err := m.Create("bench")
		require.NoError(b, err)
		top := start(b, g, "fork-tree 100")
		pids, err := g.PIDs()
		require.NoError(b, err)
		require.Len(b, pids, benchTree)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)

		b.StartTimer()
		t0 := time.Now()
		err = g.Kill()
		killTime += time.Since(t0)
		if err == nil {
			err = g.WaitEmpty(ctx)
		}
		b.StopTimer()

		cancel()
		require.NoError(b, err)
		requireKilled(b, top)
		require.NoError(b, g.Remove())
	}
	// How much of ns/op is the Kill call itself (the cgroup.kill write,
	// or the fallback's passes); the rest is the processes exiting and
	// WaitEmpty noticing.
	b.ReportMetric(float64(killTime.Nanoseconds())/float64(b.N), "kill-ns/op")
}

// BenchmarkPIDs lists a 100-process group.
func BenchmarkPIDs(b *testing.B) {
	m := newTestManager(b, nil)
	g, err := m.Create("bench")
	require.NoError(b, err)
	b.Cleanup(func() { _ = g.Close() })
	start(b, g, "fork-tree 100")
	for b.Loop() {
		pids, err := g.PIDs()
		if err != nil || len(pids) != benchTree {
			b.Fatalf("PIDs: %d, %v", len(pids), err)
		}
	}
}
