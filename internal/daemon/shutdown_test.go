// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/keeper"
)

func TestMain(m *testing.M) {
	keeper.Main() // the daemon starts its keeper from this binary
	os.Exit(m.Run())
}

// Control requests sent throughout a shutdown: each is answered or
// refused cleanly (the control server stops first), none reaches a closed
// audit log, and Run returns once every agent and service is stopped.
func TestControlRequestsThroughShutdown(t *testing.T) {
	d, f := newTestDaemon(t)
	for i := range 5 {
		writeAgent(t, d, fmt.Sprintf("a%d", i), "")
	}
	for i := range 5 {
		f.mu.Lock()
		f.fail[fmt.Sprintf("a%d", i)] = nil
		f.mu.Unlock()
	}
	serviceStopped := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- d.Run(ctx, Service{Name: "test", Run: func(ctx context.Context) error {
			<-ctx.Done()
			close(serviceStopped)
			return nil
		}})
	}()
	cl := control.NewClient(d.ControlSocket())
	require.Eventually(t, func() bool { _, err := cl.List(context.Background()); return err == nil },
		10*time.Second, 5*time.Millisecond, "the control socket answers")

	var answered, refused atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				if (i+w)%2 == 0 {
					_, err = cl.List(context.Background())
				} else {
					// A changing request: audited before it is acted on.
					_, err = cl.Kill(context.Background(), control.KillRequest{ID: "a1", Reason: "during shutdown"})
				}
				if err == nil || errors.Is(err, control.ErrConflict) || errors.Is(err, control.ErrNotFound) {
					answered.Add(1)
				} else {
					refused.Add(1)
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond) // requests flowing before the shutdown begins: the subject of the test
	cancel()
	select {
	case err := <-ran:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after the shutdown began")
	}
	close(stop)
	wg.Wait()
	select {
	case <-serviceStopped:
	default:
		t.Fatal("the service was not stopped")
	}
	require.Positive(t, answered.Load())
	t.Logf("%d requests answered, %d refused once the server was closed", answered.Load(), refused.Load())
	require.Empty(t, d.List(), "every agent stopped")
}
