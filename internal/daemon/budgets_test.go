// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/budgets"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

const teamBudget = "budgets:\n  - {name: team-a, selector: team=a, per: day, warn: 5, kill: 10}\n"

// startBudgets runs the daemon's budget goroutine until the test ends.
func startBudgets(t *testing.T, d *Daemon) {
	done := make(chan struct{})
	go d.meterBudgets(done)
	t.Cleanup(func() {
		close(d.stopping)
		<-done
	})
}

func budgetOf(t *testing.T, d *Daemon) control.Budget {
	t.Helper()
	list := d.Budgets()
	require.Len(t, list, 1)
	return list[0]
}

// Two agents of team a spend $6 and $4.50: the first crossing is a
// warning, the second trips the budget. Both are stopped for check
// budget, neither is quarantined; an agent of another team runs on; a new
// agent of team a is refused. After a restart of the daemon the budget
// still holds them; lifted, they start and it does not trip again that
// day; at midnight UTC a new window starts from $0, and a budget tripped
// again frees what it holds when the next window starts.
func TestBudgetAcrossRuns(t *testing.T) {
	root := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		d, f := newTestDaemonWith(t, root, teamBudget)
		startBudgets(t, d)
		writeAgent(t, d, "a1", "labels: {team: a}\nrestart: {policy: always, backoff: 100ms}\n")
		writeAgent(t, d, "a2", "labels: {team: a}\n")
		writeAgent(t, d, "b1", "labels: {team: b}\n")
		synctest.Wait()

		f.of("a1")[0].spend(6)
		f.of("b1")[0].spend(50) // not team a's
		d.kickBudgets()
		synctest.Wait()
		b := budgetOf(t, d)
		require.Equal(t, budgets.StateWarned, b.State)
		require.InDelta(t, 6, b.SpentUSD, 1e-9)
		require.Nil(t, f.of("a1")[0].exceeded.Load())

		f.of("a2")[0].spend(4.5)
		d.kickBudgets()
		synctest.Wait()
		require.Equal(t, budgets.StateTripped, budgetOf(t, d).State)
		for _, id := range []string{"a1", "a2"} {
			s := f.of(id)[0].exceeded.Load()
			require.NotNil(t, s, id)
			require.Equal(t, symptoms.Budget, s.Check)
			require.Equal(t, "budget team-a: spent $10.50 of $10.00 today", s.Message)
		}
		require.Nil(t, f.of("b1")[0].exceeded.Load())
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Len(t, f.of("a1"), 1, "held, whatever its restart policy")
		st, err := d.Status("a1")
		require.NoError(t, err)
		require.Equal(t, control.StateRevoked, st.State)
		require.Contains(t, st.Note, "budget team-a: spent $10.50 of $10.00 today; held until 2000-01-02T00:00:00Z")
		_, quarantined := d.held.quarantined("a1")
		require.False(t, quarantined, "the budget holds it, not a quarantine")
		require.Equal(t, control.StateRunning, state(d, "b1"))

		writeAgent(t, d, "a3", "labels: {team: a}\n")
		synctest.Wait()
		require.Empty(t, f.of("a3"), "a new agent of the team is refused")
		require.Equal(t, control.StateRevoked, state(d, "a3"))
	})
	synctest.Test(t, func(t *testing.T) {
		d, f := newTestDaemonWith(t, root, teamBudget) // the daemon restarted
		startBudgets(t, d)
		writeAgent(t, d, "a1", "labels: {team: a}\n")
		synctest.Wait()
		require.Empty(t, f.of("a1"), "the trip survived the restart")
		b := budgetOf(t, d)
		require.Equal(t, budgets.StateTripped, b.State)
		require.InDelta(t, 10.5, b.SpentUSD, 1e-9)

		require.ErrorIs(t, d.LiftBudget(control.BudgetLiftRequest{Name: "nope"}), control.ErrNotFound)
		require.NoError(t, d.LiftBudget(control.BudgetLiftRequest{Name: "team-a", Operator: "uid:0"}))
		require.ErrorIs(t, d.LiftBudget(control.BudgetLiftRequest{Name: "team-a"}), control.ErrConflict)
		synctest.Wait()
		require.Len(t, f.of("a1"), 1, "lifted: it starts")
		f.of("a1")[0].spend(20)
		d.kickBudgets()
		synctest.Wait()
		require.Nil(t, f.of("a1")[0].exceeded.Load(), "lifted: no trip again before the window rolls over")
		require.Equal(t, budgets.StateLifted, budgetOf(t, d).State)

		time.Sleep(24 * time.Hour) // 2000-01-02T00:00Z: a new window
		synctest.Wait()
		b = budgetOf(t, d)
		require.Equal(t, budgets.StateOK, b.State)
		require.Zero(t, b.SpentUSD)
		require.Equal(t, time.Date(2000, 1, 2, 0, 0, 0, 0, time.UTC), b.WindowStart)

		f.of("a1")[0].spend(31) // $11 more in the new window
		d.kickBudgets()
		synctest.Wait()
		require.NotNil(t, f.of("a1")[0].exceeded.Load())
		require.Equal(t, budgets.StateTripped, budgetOf(t, d).State)
		time.Sleep(time.Hour)
		synctest.Wait()
		require.Len(t, f.of("a1"), 1)
		time.Sleep(23 * time.Hour) // the next window frees it
		synctest.Wait()
		require.Len(t, f.of("a1"), 2, "started again when its budget's window rolled over")
		require.Equal(t, budgets.StateOK, budgetOf(t, d).State)
	})
}

// poolsOf are the pools a fake run was last given.
func poolsOf(r *fakeRun) []*gateway.Pool {
	if p := r.pools.Load(); p != nil {
		return *p
	}
	return nil
}

// A budget across runs is a cap at the gateway: each run of the team is
// given its pool, whose limit is the kill amount and whose spent follows
// the book; a request that did not fit in it (the gateway's record says
// which budget) trips the budget below its kill amount, and the team's
// runs are stopped for check budget. A lifted budget's pool refuses
// nothing; a budget added by a reload gets a pool, given to the live runs
// it matches.
func TestBudgetPools(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, f := newTestDaemonWith(t, t.TempDir(), teamBudget)
		startBudgets(t, d)
		writeAgent(t, d, "a1", "labels: {team: a}\n")
		writeAgent(t, d, "a2", "labels: {team: a}\n")
		writeAgent(t, d, "b1", "labels: {team: b}\n")
		writeAgent(t, d, "s1", "labels: {team: a}\nmode: shadow\n")
		synctest.Wait()
		pa := poolsOf(f.of("a1")[0])
		require.Len(t, pa, 1)
		require.Equal(t, "team-a", pa[0].Name())
		require.Equal(t, pa, poolsOf(f.of("a2")[0]), "one pool for the team")
		require.Empty(t, poolsOf(f.of("b1")[0]))
		require.Empty(t, poolsOf(f.of("s1")[0]), "shadow mode: nothing refused")

		f.of("s1")[0].spend(3) // reaches the pool through the book
		d.kickBudgets()
		synctest.Wait()
		spent, _ := pa[0].Use()
		require.InDelta(t, 3, spent, 1e-9)

		full := gateway.Record{Refused: true, OverBudget: gateway.OverPool, Budget: "team-a", Err: "does not fit in budget team-a"}
		d.budgetEvents(nil)(supervisor.Event{Type: supervisor.EventLLMRequest, LLM: &full})
		synctest.Wait()
		require.Equal(t, budgets.StateTripped, budgetOf(t, d).State)
		for _, id := range []string{"a1", "a2", "s1"} {
			s := f.of(id)[0].exceeded.Load()
			require.NotNil(t, s, id)
			require.Equal(t, symptoms.Budget, s.Check)
			require.Equal(t, "budget team-a: spent $3.00 of $10.00 today; the next request's worst case did not fit in the rest", s.Message)
		}
		require.Nil(t, f.of("b1")[0].exceeded.Load())
		st, err := d.Status("a1")
		require.NoError(t, err)
		require.Contains(t, st.Note, "the next request's worst case did not fit in the rest; held until")

		require.NoError(t, d.LiftBudget(control.BudgetLiftRequest{Name: "team-a", Operator: "uid:0"}))
		synctest.Wait()
		require.Len(t, f.of("a1"), 2, "lifted: it starts")
		d.budgetEvents(nil)(supervisor.Event{Type: supervisor.EventLLMRequest, LLM: &full})
		synctest.Wait()
		require.Equal(t, budgets.StateLifted, budgetOf(t, d).State, "a lifted budget does not trip again")
		require.Nil(t, f.of("a1")[1].exceeded.Load())

		nc, err := config.ParseDaemon([]byte(teamBudget+"  - {name: team-b, selector: team=b, per: month, kill: 2}\n"), "hk.yaml")
		require.NoError(t, err)
		d.budgets.Configure(nc.Budgets, d.now()) // as a reload does
		d.kickBudgets()
		synctest.Wait()
		pb := poolsOf(f.of("b1")[0])
		require.Len(t, pb, 1, "the new budget's pool, given to the live run")
		require.Equal(t, "team-b", pb[0].Name())
	})
}
