// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
	"github.com/hermeskill/hermeskilld/pkg/client"
)

// beatOftenAgent beats every 100 ms from its loop until stopped.
func beatOftenAgent() int {
	c, err := client.FromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		return 2
	}
	defer c.Close()
	ctx := c.Context(context.Background())
	c.Ready()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0
		case <-t.C:
			c.Beat()
		}
	}
}

// With a poller that reads far less often than the heartbeat timeout, an
// agent that beats in time is never killed: the deadline reads what has
// arrived before judging.
func TestPolledHeartbeatsMeetTheirDeadlines(t *testing.T) {
	p, err := heartbeat.NewPoller(time.Second)
	require.NoError(t, err)
	defer p.Close()
	a := agentWith(config.Checks{HeartbeatTimeout: 400 * time.Millisecond, StartupTimeout: 5 * time.Second})
	a.Command = []string{os.Args[0]}
	a.Env = map[string]string{agentEnv: "beat-often"}
	a.Escalation.CoopGrace, a.Escalation.TermGrace = time.Second, time.Second
	r := startRealWith(t, a, func(o *Options) { o.Poller = p })

	look := time.NewTicker(50 * time.Millisecond)
	defer look.Stop()
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); <-look.C {
		st := r.Status()
		require.Equal(t, StateRunning, st.State, "killed although it beat every 100 ms: %+v", st.Trigger)
	}
	r.Kill("test", "done")
	out := r.Wait()
	require.NotNil(t, out.Trigger)
	require.Equal(t, symptoms.Manual, out.Trigger.Check)
	require.Greater(t, r.Status().Heartbeat.Accepted, uint64(15), "the beats were read")
}
