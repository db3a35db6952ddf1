// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup_test

import (
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/procfs"
	"github.com/hermeskill/hermeskilld/internal/procsup"
)

// A shared scan is never older than its caller: a process started before
// the call is in the snapshot, however many scans others keep in flight.
func TestSharedScanIsFresh(t *testing.T) {
	s := procsup.NewScanner(procfs.Default())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					_, _ = s.Scan()
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()

	runs := 0
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); runs++ {
		p, err := rt.Start(procsup.Spec{Argv: []string{"/bin/sleep", "5"}})
		require.NoError(t, err)
		snap, err := s.Scan()
		_ = p.Signal(syscall.SIGKILL)
		<-p.Done()
		require.NoError(t, err)
		require.Contains(t, snap, p.PID(), "run %d: a process started before the scan was asked for is missing", runs)
	}
	assert.Greater(t, runs, 10)
}

// Callers arriving together share scans.
func TestSharedScanBatches(t *testing.T) {
	s := procsup.NewScanner(procfs.Default())
	const callers = 200
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			snap, err := s.Scan()
			assert.NoError(t, err)
			assert.NotEmpty(t, snap)
		}()
	}
	close(start)
	wg.Wait()
	assert.Less(t, s.Scans(), uint64(callers/4), "%d callers ran %d scans", callers, s.Scans())
}
