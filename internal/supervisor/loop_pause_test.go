// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/escalate"
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// pausing is an agent whose $1 cost budget pauses it for at most an
// hour, with a heartbeat timeout of a second.
func pausingAgent() *config.Agent {
	a := agentWith(config.Checks{HeartbeatTimeout: time.Second, Cost: &config.CostLimit{Warn: 0.5, Kill: 1.00}})
	a.OnBudget, a.PauseTimeout = config.OnBudgetPause, time.Hour
	return a
}

func (h *harness) resume(req ResumeRequest) error {
	rq := resumeReq{ResumeRequest: req, reply: make(chan error, 1)}
	h.l.resumes <- rq
	err := <-rq.reply
	synctest.Wait()
	return err
}

func (h *harness) frozen() bool {
	h.fake.mu.Lock()
	defer h.fake.mu.Unlock()
	return h.fake.frozen
}

// overspend meters a request that takes the run past its $1 budget.
func overspend(q *meterQueue) {
	q.Request(gateway.Record{At: time.Now(), Model: "m", Status: 200, InputTokens: 10, OutputTokens: 10, CostUSD: 1.50, Priced: true})
	synctest.Wait()
}

// The cost budget pauses the run instead of killing it: no ladder, the
// tree frozen, and no liveness deadline while it is (a frozen agent
// cannot beat). A resume that does not raise the budget above the spend
// is refused, the run still paused; one that does thaws it, and the
// heartbeat deadline counts from the resume.
func TestLoopPauseThenResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, q := startMetered(t, pausingAgent())
		h.send("READY=1")
		overspend(q)
		require.Empty(t, h.ladders())
		require.Len(t, h.fake.pauses, 1)
		require.Equal(t, symptoms.Cost, h.fake.pauses[0].Check)
		st := h.status()
		require.Equal(t, StatePaused, st.State)
		require.NotNil(t, st.Pause)
		require.Equal(t, "cost", st.Pause.Check)
		require.True(t, h.frozen())

		time.Sleep(59 * time.Minute)
		synctest.Wait()
		require.Empty(t, h.ladders(), "59 minutes paused, no heartbeat: nothing fires")

		require.ErrorIs(t, h.resume(ResumeRequest{}), ErrResumeBudget)
		require.ErrorIs(t, h.resume(ResumeRequest{Tokens: 1000}), ErrResumeBudget, "paused for cost: tokens alone do not resume")
		err := h.resume(ResumeRequest{CostUSD: 1.20})
		require.ErrorIs(t, err, ErrResumeBudget)
		require.Contains(t, err.Error(), "not above the spend, $1.5000")
		require.Equal(t, StatePaused, h.status().State)

		require.NoError(t, h.resume(ResumeRequest{CostUSD: 3, Operator: "uid:0(root)"}))
		resumed := time.Now()
		require.Equal(t, StateRunning, h.status().State)
		require.Nil(t, h.status().Pause)
		require.False(t, h.frozen())
		require.ErrorIs(t, h.resume(ResumeRequest{CostUSD: 4}), ErrNotPaused)
		require.Len(t, h.l.pauses, 1)
		p := h.l.pauses[0]
		require.Equal(t, certs.PauseResumed, p.Ended)
		require.Equal(t, "cost $3.0000", p.Budget)
		require.Equal(t, "uid:0(root)", p.Operator)
		require.InDelta(t, float64(59*time.Minute/time.Millisecond), p.DurationMS, 1)
		require.InDelta(t, 3.0, h.l.a.Checks.Cost.Kill, 0)
		require.InDelta(t, 0.5, h.l.a.Checks.Cost.Warn, 0, "the warning threshold stays")
		require.Contains(t, eventTypes(h.fake), EventResumed)

		time.Sleep(time.Second)
		synctest.Wait()
		l := h.ladders()
		require.Len(t, l, 1)
		require.Equal(t, symptoms.HeartbeatTimeout, l[0].Check)
		require.Equal(t, resumed.Add(time.Second), l[0].At, "the heartbeat deadline counts from the resume")
		h.fake.result <- escalate.Result{Empty: true}
		<-h.out
	})
}

// A pause not resumed within pause_timeout is killed, to the nanosecond,
// for the money check, thawed first; the reason says how long it was
// paused, and the pause's record ends "timeout".
func TestLoopPauseTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, q := startMetered(t, pausingAgent())
		h.send("READY=1")
		overspend(q)
		time.Sleep(time.Hour - time.Nanosecond)
		synctest.Wait()
		require.Empty(t, h.ladders(), "not a nanosecond early")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		l := h.ladders()
		require.Len(t, l, 1)
		require.Equal(t, symptoms.Cost, l[0].Check)
		require.Contains(t, l[0].Message, "; paused 1h0m0s without a resume (pause_timeout 1h)")
		require.False(t, h.frozen(), "thawed before the ladder")
		require.Equal(t, StateStopping, h.status().State)
		p := h.l.runState().pauses
		require.Len(t, p, 1)
		require.Equal(t, certs.PauseTimeout, p[0].Ended)
		require.InDelta(t, float64(time.Hour/time.Millisecond), p[0].DurationMS, 0)
		h.fake.result <- escalate.Result{Empty: true}
		<-h.out
	})
}

// An operator's kill ends a pause at once: thawed, then the ladder.
// Other terminal symptoms while paused change nothing.
func TestLoopKillWhilePaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := pausingAgent()
		a.Checks.MaxRuntime = 10 * time.Minute
		h, q := startMetered(t, a)
		h.send("READY=1")
		overspend(q)
		time.Sleep(20 * time.Minute)
		synctest.Wait()
		require.Empty(t, h.ladders(), "max_runtime is not acted on while paused")
		h.l.kills <- killReq{operator: "uid:0(root)", reason: "enough"}
		synctest.Wait()
		l := h.ladders()
		require.Len(t, l, 1)
		require.Equal(t, symptoms.Manual, l[0].Check)
		require.False(t, h.frozen())
		require.Equal(t, certs.PauseKilled, h.l.runState().pauses[0].Ended)
		h.fake.result <- escalate.Result{Empty: true}
		<-h.out
	})
}

// on_budget: kill (the default) kills as ever; so does a pause agent in
// shadow mode, which records and signals nothing.
func TestLoopBudgetKillsByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := pausingAgent()
		a.OnBudget = config.OnBudgetKill
		h, q := startMetered(t, a)
		overspend(q)
		require.Empty(t, h.fake.pauses)
		l := h.ladders()
		require.Len(t, l, 1)
		require.Equal(t, symptoms.Cost, l[0].Check)
		h.fake.result <- escalate.Result{Empty: true}
		<-h.out
	})
}
