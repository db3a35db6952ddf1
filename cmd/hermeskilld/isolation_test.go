// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/control"
)

// churnAgent beats at once (before the daemon may know its tree), then
// every 100 ms for a random while, and exits: restarted, it starts again.
const churnAgent = `
import os, random, socket, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); a = os.environ["NOTIFY_SOCKET"]
s.sendto(b"READY=1", a)
end = time.time() + random.uniform(0.2, 1.5)
while time.time() < end:
    s.sendto(b"WATCHDOG=1", a)
    time.sleep(0.1)
`

// watchedAgent beats every 100 ms for ever.
const watchedAgent = `
import os, socket, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); a = os.environ["NOTIFY_SOCKET"]
s.sendto(b"READY=1", a)
while True:
    s.sendto(b"WATCHDOG=1", a)
    time.sleep(0.1)
`

// No agent's start, stop or restart delays another agent's heartbeats: 50
// agents start, beat, exit, restart and are removed and added again in a
// loop, while a watched agent beats every 100 ms under a 400 ms heartbeat
// timeout. It is never killed, and the longest any of its datagrams waited
// to be read is printed (HK_ISOLATION_DURATION: `make soak` runs 5
// minutes; `make test` a short run).
func TestHeartbeatIsolationUnderChurn(t *testing.T) {
	dur := envDuration(t, "HK_ISOLATION_DURATION", 20*time.Second)
	const churn = 50
	m := marker(t)
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	d := startDaemonFor(t, shortTemp(t), "", dur+3*time.Minute)
	py := python(t)
	src := writeTestFile(t, d.root, "churn.py", churnAgent)
	wsrc := writeTestFile(t, d.root, "watched.py", watchedAgent)
	churnFile := func(id string) string {
		return fmt.Sprintf("id: %s\ncommand: [%s, -S, %s, %q]\nescalation: {coop_grace: 100ms, term_grace: 300ms}\n"+
			"checks: {heartbeat_timeout: 2s}\nrestart: {policy: always, backoff: 100ms, max_backoff: 400ms}\n", id, py, src, m)
	}
	d.writeAgent("watched", fmt.Sprintf("id: watched\ncommand: [%s, -S, %s, %q]\n"+
		"checks: {heartbeat_timeout: 400ms}\nescalation: {coop_grace: 100ms, term_grace: 300ms}\nrestart: {policy: never}\n", py, wsrc, m))
	d.waitState("watched", control.StateRunning)
	present := map[string]bool{}
	for i := range churn {
		id := fmt.Sprintf("c%02d", i)
		d.writeAgent(id, churnFile(id))
		present[id] = true
	}

	began := time.Now()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	removed := 0
	for time.Since(began) < dur {
		<-tick.C
		id := fmt.Sprintf("c%02d", rand.IntN(churn))
		if present[id] {
			require.NoError(t, os.Remove(filepath.Join(d.agents, id+".yaml")))
			removed++
		} else {
			d.writeAgent(id, churnFile(id))
		}
		present[id] = !present[id]
	}

	r := d.ctl("status", "watched", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var st control.AgentStatus
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	runs := 0
	for _, c := range d.certs() {
		if c["agent_id"] == "watched" {
			t.Errorf("the watched agent was killed: %v: %v", c["trigger_check"], c["trigger_reason"])
		}
		runs++
	}
	require.Equal(t, control.StateRunning, st.State, "the watched agent: %s", st.LastExit)
	require.NotNil(t, st.Run)
	require.Zero(t, st.Restarts)
	msgs := st.Run.Messages
	t.Logf("%s of churn (%d agents, %d removals, %d certificates): the watched agent's %d heartbeats, "+
		"longest wait to be read %.1f ms (poll interval 100 ms)", dur, churn, removed, runs, msgs.Accepted, msgs.MaxIntakeLagMS)
	require.Greater(t, msgs.Accepted, uint64(dur/(200*time.Millisecond)), "too few heartbeats read")
	require.Zero(t, msgs.Dropped)
	// One poll interval (100 ms), plus what a loaded machine (two cores,
	// the race detector) adds to a batch: far below the 400 ms timeout.
	require.Less(t, msgs.MaxIntakeLagMS, 300.0, "a heartbeat waited too long to be read")
}
