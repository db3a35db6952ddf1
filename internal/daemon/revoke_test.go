// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/labels"
)

// A standing revocation by id kills the running agent (no quarantine:
// the rule holds it), refuses its new starts, survives a restart of the
// daemon, and once lifted lets the agent start again.
func TestRevocationByID(t *testing.T) {
	root := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		d, f := newTestDaemonIn(t, root)
		writeAgent(t, d, "bot", "restart: {policy: always, backoff: 100ms}\n")
		synctest.Wait()
		res, err := d.Revoke(context.Background(), control.RevokeRequest{ID: "bot", Reason: "prompt injection", Operator: "uid:0"})
		require.NoError(t, err)
		require.Equal(t, "r1", res.Revocation.Rule)
		require.Len(t, res.Killed, 1)
		synctest.Wait()
		time.Sleep(time.Minute)
		synctest.Wait()
		require.EqualValues(t, 1, f.of("bot")[0].killed.Load())
		require.Len(t, f.of("bot"), 1, "refused a new start, whatever its restart policy")
		st, err := d.Status("bot")
		require.NoError(t, err)
		require.Equal(t, control.StateRevoked, st.State)
		require.Contains(t, st.Note, "rule r1: prompt injection")
		_, quarantined := d.held.quarantined("bot")
		require.False(t, quarantined, "the rule holds it, not a quarantine")
	})
	synctest.Test(t, func(t *testing.T) {
		d, f := newTestDaemonIn(t, root) // the daemon restarted
		writeAgent(t, d, "bot", "")
		synctest.Wait()
		require.Empty(t, f.of("bot"), "the revocation survived the restart")
		require.Equal(t, control.StateRevoked, state(d, "bot"))
		require.Len(t, d.Revocations(), 1)
		require.ErrorIs(t, d.Lift(control.LiftRequest{Rule: "r9"}), control.ErrNotFound)
		require.NoError(t, d.Lift(control.LiftRequest{Rule: "r1", Operator: "uid:0"}))
		synctest.Wait()
		require.Len(t, f.of("bot"), 1, "lifted: it starts")
		require.Empty(t, d.Revocations())
	})
}

// A rule by selector kills every matching agent and refuses agents added
// later with the same labels; others are untouched. A started-before rule
// kills runs but blocks no new start.
func TestRevocationBySelectorAndAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, f := newTestDaemon(t)
		writeAgent(t, d, "a", "labels: {model: bad}\n")
		writeAgent(t, d, "b", "labels: {model: good}\n")
		synctest.Wait()
		res, err := d.Revoke(context.Background(), control.RevokeRequest{Selector: labels.MustParse("model=bad"), Reason: "recalled"})
		require.NoError(t, err)
		require.Len(t, res.Killed, 1)
		require.Equal(t, "a", res.Killed[0].ID)
		writeAgent(t, d, "c", "labels: {model: bad}\n")
		synctest.Wait()
		require.Empty(t, f.of("c"))
		require.Equal(t, control.StateRevoked, state(d, "c"))
		require.Equal(t, control.StateRunning, state(d, "b"))

		time.Sleep(time.Hour)
		res, err = d.Revoke(context.Background(), control.RevokeRequest{StartedBefore: time.Now(), Reason: "stale"})
		require.NoError(t, err)
		require.Len(t, res.Killed, 1, "b, the only running agent")
		require.Equal(t, "b", res.Killed[0].ID)
		synctest.Wait()
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Len(t, f.of("b"), 1, "killed by a started-before rule, it stays down as any killed agent (quarantine)")
		require.Equal(t, control.StateQuarantined, state(d, "b"))

		_, err = d.Revoke(context.Background(), control.RevokeRequest{Reason: "nothing named"})
		require.ErrorIs(t, err, control.ErrBadInput)
		_, err = d.Revoke(context.Background(), control.RevokeRequest{ID: "a"})
		require.ErrorIs(t, err, control.ErrBadInput, "a reason is required")
	})
}
