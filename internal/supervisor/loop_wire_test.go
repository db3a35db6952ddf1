// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/escalate"
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// wireChecks are the timeouts of the wire tests: a normalized agent
// file's startup_timeout floor, a heartbeat and a progress timeout.
var wireChecks = config.Checks{StartupTimeout: 10 * time.Second, HeartbeatTimeout: 3 * time.Second,
	ProgressTimeout: 3 * time.Second, MaxRuntime: time.Hour}

// call is one request the gateway sees: its arrival now, its answer
// after took.
func call(q *meterQueue, took time.Duration, status int) {
	at := time.Now()
	q.Arrived(at)
	synctest.Wait()
	time.Sleep(took)
	q.Request(gateway.Record{At: at, Duration: took, Path: "chat/completions", Model: "m", Status: status,
		InputTokens: 10, OutputTokens: 5, Priced: true})
	synctest.Wait()
}

// An agent with no client behind the gateway: the loop takes its traffic
// as its heartbeat (READY at the first request) and its answers as its
// steps. It lives while its loop calls the model, through a request in
// flight for ten minutes; once the loop stops it dies of
// heartbeat_timeout, the timeout after its last answer to the nanosecond.
func TestLoopWireLiveness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, q := startMetered(t, agentWith(wireChecks))
		time.Sleep(2 * time.Second)
		for range 120 {
			call(q, 100*time.Millisecond, 200)
			time.Sleep(400 * time.Millisecond)
		}
		st := h.status().Agent
		require.True(t, st.Ready)
		require.EqualValues(t, 120, st.Progress, "each answer a step")
		require.EqualValues(t, 120, st.WireRequests)

		// One answer that takes ten minutes, streamed or not.
		call(q, 10*time.Minute, 200)
		require.Empty(t, h.ladders(), "a request in flight holds the heartbeat and the progress clock")
		last := time.Now()

		time.Sleep(3*time.Second - time.Nanosecond)
		synctest.Wait()
		require.Empty(t, h.ladders(), "not a nanosecond early")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		l := h.ladders()
		require.Len(t, l, 1)
		require.Equal(t, symptoms.HeartbeatTimeout, l[0].Check, "%+v", l[0])
		requireSame(t, last.Add(3*time.Second), l[0].At)
		require.Equal(t, "no heartbeat or LLM traffic for 3.00s (timeout 3s)", l[0].Message)
		h.fake.result <- escalate.Result{Empty: true}
		<-h.out
	})
}

// A loop that keeps calling but is never answered (a retry loop on 500s)
// beats and makes no progress: progress_timeout, not heartbeat_timeout.
func TestLoopWireFailuresAreNoProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, q := startMetered(t, agentWith(wireChecks))
		first := time.Now()
		for len(h.ladders()) == 0 {
			call(q, 100*time.Millisecond, 500)
			time.Sleep(400 * time.Millisecond)
		}
		l := h.ladders()
		require.Equal(t, symptoms.ProgressTimeout, l[0].Check, "%+v", l[0])
		requireSame(t, first.Add(3*time.Second), l[0].At, "the progress clock runs from the first request")
		h.fake.result <- escalate.Result{Empty: true}
		<-h.out
	})
}

// An agent with its own client keeps its own semantics: its beats count
// beside the traffic's, and once it reported PROGRESS the answers are no
// steps of its.
func TestLoopWireWithClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, q := startMetered(t, agentWith(wireChecks))
		h.send("READY=1\nPROGRESS=1")
		stalled := time.Now()
		for len(h.ladders()) == 0 {
			call(q, 100*time.Millisecond, 200)
			h.send("WATCHDOG=1")
			time.Sleep(400 * time.Millisecond)
		}
		l := h.ladders()
		require.Equal(t, symptoms.ProgressTimeout, l[0].Check, "%+v", l[0])
		requireSame(t, stalled.Add(3*time.Second), l[0].At)
		require.EqualValues(t, 1, h.status().Agent.Progress)
		h.fake.result <- escalate.Result{Empty: true}
		<-h.out
	})
}

// A request that arrived before the heartbeat deadline but is still
// queued when the timer fires is applied first, at its arrival: the timer
// and the gateway cannot race.
func TestLoopWireQueuedBeforeTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, q := startMetered(t, agentWith(wireChecks))
		call(q, 0, 200)
		time.Sleep(3*time.Second - time.Nanosecond)
		synctest.Wait()
		// Queued without the kick, as if the loop had not yet woken for it.
		q.mu.Lock()
		q.evs = append(q.evs, wireEvent{at: time.Now(), arrived: true})
		q.mu.Unlock()
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		require.Empty(t, h.ladders(), "the request in flight was applied before the deadline was judged")
		require.Equal(t, 1, h.status().Agent.InFlight)
		close(h.exited)
		<-h.out
	})
}

// A request that left no record (its body never came whole) ends its
// flight all the same: it holds nothing after.
func TestLoopWireGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, q := startMetered(t, agentWith(wireChecks))
		q.Arrived(time.Now())
		synctest.Wait()
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Empty(t, h.ladders(), "in flight for a minute")
		gone := time.Now()
		q.Gone(gone)
		synctest.Wait()
		l := h.ladders()
		require.Len(t, l, 1)
		require.Equal(t, symptoms.ProgressTimeout, l[0].Check, "the progress deadline passed in flight: it fires as the flight ends")
		requireSame(t, gone, l[0].At)
		h.fake.result <- escalate.Result{Empty: true}
		<-h.out
	})
}
