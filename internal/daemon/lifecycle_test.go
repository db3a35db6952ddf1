// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// advance moves a synctest bubble's clock by d and lets every goroutine
// settle (virtual time: the test does not wait).
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// An operator's stop runs the ladder without quarantine; with policy
// never the agent stays exited until `start`, which starts it at once.
func TestStopNoQuarantineThenStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, f := newTestDaemon(t)
		writeAgent(t, d, "bot", "")
		synctest.Wait()
		res, err := d.Stop(context.Background(), control.StopRequest{ID: "bot", Reason: "maintenance", Operator: "uid:0", Wait: true})
		require.NoError(t, err)
		require.True(t, res.Stopped)
		require.Equal(t, control.StateExited, res.State)
		require.Contains(t, res.Note, "stopped by uid:0: maintenance")
		require.EqualValues(t, 1, f.of("bot")[0].killed.Load(), "through the ladder")
		_, quarantined := d.held.quarantined("bot")
		require.False(t, quarantined, "a stop is not a kill: no quarantine")
		advance(time.Minute)
		require.Len(t, f.of("bot"), 1, "policy never: it stays down")

		_, err = d.Stop(context.Background(), control.StopRequest{ID: "bot", Operator: "uid:0"})
		require.ErrorIs(t, err, control.ErrConflict, "not running")
		_, err = d.Stop(context.Background(), control.StopRequest{ID: "nope", Operator: "uid:0"})
		require.ErrorIs(t, err, control.ErrNotFound)

		res, err = d.Start(context.Background(), control.StartRequest{ID: "bot", Operator: "uid:0"})
		require.NoError(t, err)
		require.Len(t, f.of("bot"), 2)
		require.Equal(t, f.of("bot")[1].pid, res.PID, "the new run's pid")
		require.Equal(t, control.StateRunning, res.State)
		_, err = d.Start(context.Background(), control.StartRequest{ID: "bot", Operator: "uid:0"})
		require.ErrorIs(t, err, control.ErrConflict, "already running")
	})
}

// After a stop the restart policy decides: always restarts it after the
// backoff; a stop during that backoff cancels the restart.
func TestStopThenPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, f := newTestDaemon(t)
		writeAgent(t, d, "bot", "restart: {policy: always, backoff: 10s}\n")
		synctest.Wait()
		res, err := d.Stop(context.Background(), control.StopRequest{ID: "bot", Operator: "uid:0", Wait: true})
		require.NoError(t, err)
		require.Equal(t, control.StateBackoff, res.State, "policy always: it restarts after the backoff")
		advance(11 * time.Second)
		require.Len(t, f.of("bot"), 2, "restarted by its policy")

		// Now in a backoff again: a stop keeps it down.
		f.of("bot")[1].end(supervisor.Outcome{Exit: procsup.ExitStatus{Code: 1}})
		synctest.Wait()
		require.Equal(t, control.StateBackoff, state(d, "bot"))
		res, err = d.Stop(context.Background(), control.StopRequest{ID: "bot", Operator: "uid:0"})
		require.NoError(t, err)
		require.False(t, res.Stopped, "no run to stop")
		require.Equal(t, control.StateExited, res.State)
		advance(time.Minute)
		require.Len(t, f.of("bot"), 2, "the pending restart was cancelled")
	})
}

// Restart: the ladder, then a new run at once whatever the policy (and
// not counted as a quarantine); an agent that is down is just started.
func TestRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, f := newTestDaemon(t)
		writeAgent(t, d, "bot", "restart: {policy: never}\n")
		synctest.Wait()
		res, err := d.Restart(context.Background(), control.RestartRequest{ID: "bot", Reason: "new weights", Operator: "uid:0"})
		require.NoError(t, err)
		runs := f.of("bot")
		require.Len(t, runs, 2)
		require.True(t, res.Stopped)
		require.Equal(t, runs[1].pid, res.PID)
		require.Equal(t, control.StateRunning, res.State)
		require.EqualValues(t, 1, runs[0].killed.Load())
		st, err := d.Status("bot")
		require.NoError(t, err)
		require.Contains(t, st.LastExit, "stopped by uid:0: new weights")

		// Down (stopped): restart starts it.
		_, err = d.Stop(context.Background(), control.StopRequest{ID: "bot", Operator: "uid:0", Wait: true})
		require.NoError(t, err)
		res, err = d.Restart(context.Background(), control.RestartRequest{ID: "bot", Operator: "uid:0"})
		require.NoError(t, err)
		require.False(t, res.Stopped)
		require.Len(t, f.of("bot"), 3)
	})
}

// What holds an agent down on purpose is not lifted by start; a crash
// loop (failed) is.
func TestStartRefusesHeldAgents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, f := newTestDaemon(t)
		writeAgent(t, d, "q", "")
		writeAgent(t, d, "crasher", "restart: {policy: on-failure, backoff: 100ms, max_restarts: 1, window: 1m}\n")
		synctest.Wait()
		_, err := d.Kill(context.Background(), control.KillRequest{ID: "q", Reason: "r", Operator: "uid:0", Wait: true})
		require.NoError(t, err)
		synctest.Wait()
		_, err = d.Start(context.Background(), control.StartRequest{ID: "q", Operator: "uid:0"})
		require.ErrorIs(t, err, control.ErrConflict)
		require.Contains(t, err.Error(), "hermeskilld release q")
		_, err = d.Restart(context.Background(), control.RestartRequest{ID: "q", Operator: "uid:0"})
		require.ErrorIs(t, err, control.ErrConflict)

		for range 2 {
			runs := f.of("crasher")
			runs[len(runs)-1].end(supervisor.Outcome{Exit: procsup.ExitStatus{Code: 3}})
			synctest.Wait()
			advance(time.Second)
		}
		require.Equal(t, control.StateFailed, state(d, "crasher"))
		res, err := d.Start(context.Background(), control.StartRequest{ID: "crasher", Operator: "uid:0"})
		require.NoError(t, err, "start clears a crash loop")
		require.Equal(t, control.StateRunning, res.State)

		_, err = d.Estop(context.Background(), control.EstopRequest{Reason: "drill", Operator: "uid:0", Wait: true})
		require.NoError(t, err)
		synctest.Wait()
		_, err = d.Start(context.Background(), control.StartRequest{ID: "crasher", Operator: "uid:0"})
		require.ErrorIs(t, err, control.ErrConflict)
		require.Contains(t, err.Error(), "release --estop")
	})
}

// A run already dying of a check keeps that check's consequences: a stop
// that arrives meanwhile does not turn its quarantine into a stop; a
// restart waiting for it is told.
func TestStopDuringAutomaticKill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, f := newTestDaemon(t)
		writeAgent(t, d, "bot", "")
		synctest.Wait()
		run := f.of("bot")[0]
		run.onKill = func(r *fakeRun, _, _ string) {
			r.end(supervisor.Outcome{Killed: true, Exit: procsup.ExitStatus{Signaled: true, Signal: 9},
				Trigger: &symptoms.Symptom{Check: symptoms.HeartbeatTimeout, Message: "no heartbeat"}})
		}
		_, err := d.Restart(context.Background(), control.RestartRequest{ID: "bot", Operator: "uid:0"})
		require.ErrorIs(t, err, control.ErrConflict)
		require.Contains(t, err.Error(), "not started again")
		synctest.Wait()
		require.Equal(t, control.StateQuarantined, state(d, "bot"), "the check's quarantine stands")
		require.Len(t, f.of("bot"), 1)
	})
}

// A start that fails is an error naming why; waiting is bounded.
func TestStartFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, f := newTestDaemon(t)
		f.fail["bot"] = errors.New("exec: no such file")
		writeAgent(t, d, "bot", "")
		synctest.Wait()
		require.Equal(t, control.StateExited, state(d, "bot"))
		_, err := d.Start(context.Background(), control.StartRequest{ID: "bot", Operator: "uid:0"})
		require.Error(t, err)
		require.Contains(t, err.Error(), "failed to start: exec: no such file")
	})
}
