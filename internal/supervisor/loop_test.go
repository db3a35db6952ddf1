// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/escalate"
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// fakeEffects records what the loop asks for; the test plays the
// processes by answering the ladders it starts.
type fakeEffects struct {
	mu       sync.Mutex
	pauses   []symptoms.Symptom
	frozen   bool
	ladders  []symptoms.Symptom
	result   chan escalate.Result // answers the main ladder
	cleanupC chan escalate.Result // answers the cleanup ladder; nil: nothing left behind
	cleanups int
	finished []*escalate.Result
	shadows  []symptoms.Symptom
	warns    []symptoms.Symptom
	events   []Event
	order    []string // ladder and the events' types, in order
	// sampleErr fails the samples; else sampleOK is each one's (none
	// while it is zero).
	sampleErr error
	sampleOK  symptoms.Sample
	// fdsErr comes with each sampleOK: its descriptors not counted.
	fdsErr error
}

func newFake() *fakeEffects { return &fakeEffects{result: make(chan escalate.Result, 1)} }

func (f *fakeEffects) ladder(t symptoms.Symptom, _ string, _ int) <-chan escalate.Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ladders = append(f.ladders, t)
	f.order = append(f.order, "ladder")
	return f.result
}

func (f *fakeEffects) cleanup() <-chan escalate.Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups++
	if f.cleanupC == nil {
		return nil
	}
	return f.cleanupC
}

func (f *fakeEffects) finish(res *escalate.Result, trigger *symptoms.Symptom, _ runState) Outcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.finished = append(f.finished, res)
	return Outcome{Killed: trigger != nil, Trigger: trigger}
}

func (f *fakeEffects) shadow(s symptoms.Symptom, _ runState) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shadows = append(f.shadows, s)
	return "/certs/" + string(s.Check) + ".json"
}

func (f *fakeEffects) warn(s symptoms.Symptom) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.warns = append(f.warns, s)
}

func (f *fakeEffects) sample(config.Checks, time.Time) (symptoms.Sample, bool, error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sampleErr != nil {
		return symptoms.Sample{}, false, f.sampleErr, nil
	}
	return f.sampleOK, f.sampleOK != (symptoms.Sample{}), nil, f.fdsErr
}

func (f *fakeEffects) heartbeats() heartbeat.StatsSnapshot { return heartbeat.StatsSnapshot{} }
func (f *fakeEffects) readNow()                            {}
func (f *fakeEffects) answered(string, time.Time)          {}
func (f *fakeEffects) setBudget(*config.Agent)             {}
func (f *fakeEffects) journal(func() runState)             {}
func (f *fakeEffects) journalNow(runState)                 {}

func (f *fakeEffects) pause(t symptoms.Symptom, rec certs.Pause, _ runState) certs.Pause {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pauses = append(f.pauses, t)
	f.frozen = true
	rec.Frozen = "fake"
	return rec
}

func (f *fakeEffects) resume(*config.Agent) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen = false
	return nil
}

func (f *fakeEffects) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen = false
}

func (f *fakeEffects) emit(e Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, e)
	f.order = append(f.order, e.Type)
}

// harness is a loop under synctest with its inputs.
type harness struct {
	t      *testing.T
	fake   *fakeEffects
	l      *loop
	msgs   chan *heartbeat.Received
	exited chan struct{}
	out    chan Outcome
}

func agentWith(checks config.Checks) *config.Agent {
	a := config.DefaultAgent()
	a.ID = "loop-test"
	a.Command = []string{"agent"}
	a.Checks = checks
	a.Checks.SampleInterval = time.Second
	a.Escalation.CoopGrace, a.Escalation.TermGrace = time.Second, time.Second
	return a
}

// start runs a loop for a; call inside a synctest bubble.
func start(t *testing.T, a *config.Agent) *harness { return startLoop(t, a, nil) }

// startMetered runs a loop for a behind the gateway: records pushed to
// meters are what the gateway metered.
func startMetered(t *testing.T, a *config.Agent) (*harness, *meterQueue) {
	q := newMeterQueue()
	return startLoop(t, a, q), q
}

func startLoop(t *testing.T, a *config.Agent, meters *meterQueue) *harness {
	return startLoopLog(t, a, meters, zaptest.NewLogger(t))
}

// startLoopLog is startLoop logging to log.
func startLoopLog(t *testing.T, a *config.Agent, meters *meterQueue, log *zap.Logger) *harness {
	h := &harness{t: t, fake: newFake(), msgs: make(chan *heartbeat.Received, 64), exited: make(chan struct{}),
		out: make(chan Outcome, 1)}
	now := time.Now()
	h.l = newLoop(log, a, symptoms.New(engineConfig(a, meters != nil), now), h.fake,
		Status{ID: a.ID, PID: 42, Started: now}, h.msgs, h.exited)
	h.l.metered, h.l.meters = meters != nil, meters
	go func() { h.out <- h.l.run() }()
	return h
}

// send delivers one datagram, received now.
func (h *harness) send(datagram string) {
	h.t.Helper()
	r := new(heartbeat.Received)
	require.NoError(h.t, heartbeat.Parse([]byte(datagram), &r.Msg))
	r.At, r.PID = time.Now(), 42
	h.msgs <- r
	synctest.Wait()
}

func (h *harness) status() Status { return *h.l.status.Load() }

func (h *harness) ladders() []symptoms.Symptom {
	h.fake.mu.Lock()
	defer h.fake.mu.Unlock()
	return append([]symptoms.Symptom(nil), h.fake.ladders...)
}

// A missed heartbeat starts the ladder at the deadline to the nanosecond;
// the run ends when the ladder does, with the trigger, and the last
// Status says so.
func TestLoopHeartbeatTimeoutStartsLadder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, agentWith(config.Checks{HeartbeatTimeout: time.Second, StartupTimeout: 5 * time.Second}))
		h.send("READY=1")
		ready := time.Now()
		require.Equal(t, StateRunning, h.status().State)
		require.True(t, h.status().Agent.Ready)

		time.Sleep(time.Second - time.Nanosecond)
		synctest.Wait()
		require.Empty(t, h.ladders(), "not a nanosecond early")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		l := h.ladders()
		require.Len(t, l, 1)
		require.Equal(t, symptoms.HeartbeatTimeout, l[0].Check)
		require.Equal(t, ready.Add(time.Second), l[0].At)
		require.Equal(t, StateStopping, h.status().State)
		require.Equal(t, symptoms.HeartbeatTimeout, h.status().Trigger.Check)

		h.fake.result <- escalate.Result{Reached: escalate.StageSIGKILL, Empty: true}
		out := <-h.out
		require.True(t, out.Killed)
		require.Equal(t, symptoms.HeartbeatTimeout, out.Trigger.Check)
		require.Equal(t, StateExited, h.status().State)
		require.Zero(t, h.fake.cleanups, "the ladder covered the main process's exit")
	})
}

// A heartbeat keeps it alive; messages go on being read while the ladder
// runs, and a second kill request starts no second ladder.
func TestLoopKillDuringLadder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, agentWith(config.Checks{}))
		h.l.kills <- killReq{operator: "ops", reason: "first"}
		synctest.Wait()
		require.Len(t, h.ladders(), 1)
		require.Equal(t, symptoms.Manual, h.ladders()[0].Check)
		h.l.kills <- killReq{operator: "ops", reason: "second"}
		h.send("STATUS=cleaning up")
		require.Len(t, h.ladders(), 1, "one ladder")
		require.Equal(t, "cleaning up", h.status().Agent.Status, "the socket is still drained")
		h.fake.result <- escalate.Result{Reached: escalate.StageCooperative, Empty: true}
		out := <-h.out
		require.Equal(t, "first", out.Trigger.Reason)
	})
}

// A main process that exits by itself and leaves processes behind: the
// cleanup ladder runs, the loop keeps publishing meanwhile (a status is
// never a wait on the cleanup), and the run ends with no trigger.
func TestLoopSurvivorCleanup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, agentWith(config.Checks{}))
		h.fake.cleanupC = make(chan escalate.Result, 1)
		close(h.exited)
		synctest.Wait()
		require.Equal(t, 1, h.fake.cleanups)
		require.Equal(t, StateStopping, h.status().State)
		for range 100 {
			h.send("WATCHDOG=1")
		}
		require.EqualValues(t, 100, h.status().Agent.Heartbeats, "messages applied during the cleanup")
		time.Sleep(time.Hour) // a long term_grace: the loop is idle, not blocked
		synctest.Wait()
		h.fake.cleanupC <- escalate.Result{Reached: escalate.StageSIGKILL, Empty: true}
		out := <-h.out
		require.False(t, out.Killed)
		require.Len(t, h.fake.finished, 1)
		require.NotNil(t, h.fake.finished[0], "the cleanup's result goes to the record")
	})
}

// A main process that exits and leaves nothing: finish at once.
func TestLoopCleanExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, agentWith(config.Checks{HeartbeatTimeout: time.Second, StartupTimeout: time.Second}))
		close(h.exited)
		out := <-h.out
		require.False(t, out.Killed)
		require.Nil(t, h.fake.finished[0])
		require.Empty(t, h.ladders())
	})
}

// Shadow mode: each check's first would-be kill is recorded, nothing is
// started, and the run goes on until the agent exits.
func TestLoopShadowRecordsEachCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := agentWith(config.Checks{MaxRuntime: 10 * time.Second, ToolLoop: &config.ToolLoop{Repeats: 3}})
		a.Mode = config.ModeShadow
		h := start(t, a)
		for range 3 {
			h.send("TOOL=search\nTOOL_ARGS_SHA256=" + sha)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		require.Empty(t, h.ladders(), "shadow mode signals nothing")
		checks := []symptoms.Check{}
		for _, s := range h.fake.shadows {
			checks = append(checks, s.Check)
		}
		require.Equal(t, []symptoms.Check{symptoms.ToolLoop, symptoms.MaxRuntime}, checks)
		close(h.exited)
		out := <-h.out
		require.Equal(t, []string{"/certs/tool_loop.json", "/certs/max_runtime.json"}, out.ShadowCerts)
		require.False(t, out.Killed)
	})
}

const sha = "abababababababababababababababababababababababababababababababab"

// A warning is sent to the agent once; a reconfiguration applies at once
// (a shorter heartbeat timeout already passed fires now).
func TestLoopWarningAndReconfigure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := agentWith(config.Checks{HeartbeatTimeout: time.Minute, StartupTimeout: time.Minute,
			Tokens: &config.Limit{Warn: 10, Kill: 100}})
		h := start(t, a)
		h.send("READY=1\nTOKENS=20")
		require.Len(t, h.fake.warns, 1)
		require.Equal(t, symptoms.Tokens, h.fake.warns[0].Check)
		time.Sleep(2 * time.Second)
		b := agentWith(config.Checks{HeartbeatTimeout: time.Second, StartupTimeout: time.Minute,
			Tokens: &config.Limit{Warn: 10, Kill: 100}})
		h.l.reconf <- b
		synctest.Wait()
		require.Len(t, h.ladders(), 1)
		require.Equal(t, symptoms.HeartbeatTimeout, h.ladders()[0].Check)
		h.fake.result <- escalate.Result{Empty: true}
		<-h.out
	})
}

// Status under load: a reader never waits for the loop, however busy it
// is, and always sees a complete Status.
func TestLoopStatusUnderLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, agentWith(config.Checks{}))
		stop, stopped := make(chan struct{}), make(chan struct{})
		reads := 0
		go func() {
			defer close(stopped)
			for {
				select {
				case <-stop:
					return
				default:
				}
				st := h.status()
				if st.ID != "loop-test" {
					panic("torn status")
				}
				reads++
				time.Sleep(time.Millisecond)
			}
		}()
		for i := range 2000 {
			r := new(heartbeat.Received)
			require.NoError(t, heartbeat.Parse([]byte("WATCHDOG=1"), &r.Msg))
			r.At = time.Now()
			h.msgs <- r
			if i%100 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		synctest.Wait()
		close(stop)
		<-stopped
		require.EqualValues(t, 2000, h.status().Agent.Heartbeats)
		require.Positive(t, reads)
		close(h.exited)
		<-h.out
	})
}

// A metered symptom is triggered when the loop learns of the spend — the
// end of the response, here a stream of five minutes — not when the
// request arrived; the request's event is stamped with its end and comes
// before the symptom it caused.
func TestLoopMeteredTriggeredAtDecision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, q := startMetered(t, agentWith(config.Checks{MaxRuntime: time.Hour, Tokens: &config.Limit{Kill: 1000}}))
		time.Sleep(10 * time.Minute)
		arrived := time.Now().Add(-5 * time.Minute)
		q.Request(gateway.Record{At: arrived, Duration: 5 * time.Minute, Model: "m", Status: 200, Stream: true,
			InputTokens: 900, OutputTokens: 200, Priced: true})
		synctest.Wait()
		decided := time.Now()
		l := h.ladders()
		require.Len(t, l, 1)
		require.Equal(t, symptoms.Tokens, l[0].Check)
		requireSame(t, decided, l[0].At, "triggered when the spend was known, not at the request's arrival %s", arrived)
		require.Equal(t, []string{EventLLMRequest, EventSymptom}, eventTypes(h.fake))
		requireSame(t, decided, h.fake.events[0].Time, "the event is the response's end")
		h.fake.result <- escalate.Result{Empty: true}
		<-h.out
	})
}

// Requests whose usage was never read (streams the agent aborted) come
// charged at their reservation: the first raises the usage_unknown
// warning, once, and their charges kill the run by cost.
func TestLoopUsageUnknownWarnsAndCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, q := startMetered(t, agentWith(config.Checks{MaxRuntime: time.Hour, Cost: &config.CostLimit{Kill: 0.05}}))
		rec := gateway.Record{At: time.Now(), Path: "chat/completions", Model: "gpt-test", Status: 200, Stream: true,
			InputTokens: 25, OutputTokens: 500, CostUSD: 0.01025, Priced: true, Incomplete: true, UsageUnknown: true}
		for range 4 {
			q.Request(rec)
			synctest.Wait()
		}
		require.Len(t, h.fake.warns, 1)
		require.Equal(t, symptoms.Cost, h.fake.warns[0].Check)
		require.Equal(t, "usage_unknown", h.fake.warns[0].Observed)
		require.Empty(t, h.ladders())
		q.Request(rec)
		synctest.Wait()
		l := h.ladders()
		require.Len(t, l, 1)
		require.Equal(t, symptoms.Cost, l[0].Check)
		require.Len(t, h.fake.warns, 1, "the warning was once")
		h.fake.result <- escalate.Result{Empty: true}
		<-h.out
	})
}

// The engine's clock never goes back: requests that overlapped (a long
// stream that began first and ended last), and a datagram queued before a
// record the loop applied, are applied at the loop's time, in order.
func TestLoopEngineTimeMonotonic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, q := startMetered(t, agentWith(config.Checks{Tokens: &config.Limit{Warn: 100, Kill: 10_000},
			ErrorStreak: &config.Limit{Kill: 1}}))
		t0 := time.Now()
		time.Sleep(time.Minute)
		// A short request, then the long stream that arrived before it.
		q.Request(gateway.Record{At: t0.Add(50 * time.Second), Duration: 10 * time.Second, Model: "m", Status: 200,
			InputTokens: 50, Priced: true})
		synctest.Wait()
		time.Sleep(time.Second)
		q.Request(gateway.Record{At: t0, Duration: 61 * time.Second, Model: "m", Status: 200, Stream: true,
			InputTokens: 60, Priced: true})
		synctest.Wait()
		warned := time.Now()
		require.Len(t, h.fake.warns, 1)
		requireSame(t, warned, h.fake.warns[0].At)
		// A datagram received before that record, applied after it.
		r := new(heartbeat.Received)
		require.NoError(t, heartbeat.Parse([]byte("ERROR=boom"), &r.Msg))
		r.At, r.PID = warned.Add(-30*time.Second), 42
		h.msgs <- r
		synctest.Wait()
		l := h.ladders()
		require.Len(t, l, 1)
		require.Equal(t, symptoms.ErrorStreak, l[0].Check)
		require.False(t, l[0].At.Before(warned), "the engine went back to %s after %s", l[0].At, warned)
		var last time.Time
		for _, s := range h.status().Symptoms {
			require.False(t, s.At.Before(last), "symptoms out of order: %+v", h.status().Symptoms)
			last = s.At
		}
		h.fake.result <- escalate.Result{Empty: true}
		<-h.out
	})
}

// The decision to kill is acted on (the ladder started, which revokes the
// handle first and then takes the autopsy) before the symptom is logged or
// reported; once, for the first terminal symptom — for an operator's kill
// too. Shadow mode starts nothing.
func TestLoopDecideFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, q := startMetered(t, agentWith(config.Checks{Cost: &config.CostLimit{Kill: 1}, Tokens: &config.Limit{Kill: 10}}))
		q.Request(gateway.Record{At: time.Now(), Model: "m", Status: 200, InputTokens: 100, CostUSD: 2, Priced: true})
		synctest.Wait()
		require.Equal(t, []string{EventLLMRequest, "ladder", EventSymptom, EventSymptom}, h.fake.order)
		require.Len(t, h.ladders(), 1)
		require.Equal(t, *h.fake.events[1].Symptom, h.ladders()[0], "the first terminal symptom is the ladder's trigger")
		h.l.kills <- killReq{operator: "ops", reason: "late"}
		synctest.Wait()
		require.Len(t, h.ladders(), 1, "a kill during the ladder decides nothing more")
		h.fake.result <- escalate.Result{Empty: true}
		<-h.out
	})
	synctest.Test(t, func(t *testing.T) {
		h := start(t, agentWith(config.Checks{}))
		h.l.kills <- killReq{operator: "ops", reason: "now"}
		synctest.Wait()
		require.Equal(t, []string{"ladder", EventSymptom}, h.fake.order)
		require.Equal(t, symptoms.Manual, h.ladders()[0].Check)
		h.fake.result <- escalate.Result{Empty: true}
		<-h.out
	})
	synctest.Test(t, func(t *testing.T) {
		a := agentWith(config.Checks{ErrorStreak: &config.Limit{Kill: 1}})
		a.Mode = config.ModeShadow
		h := start(t, a)
		h.send("ERROR=x")
		require.Empty(t, h.ladders(), "shadow mode refuses nothing")
		require.Len(t, h.fake.shadows, 1)
		close(h.exited)
		<-h.out
	})
}

func eventTypes(f *fakeEffects) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.events {
		out = append(out, e.Type)
	}
	return out
}

// requireSame compares instants (== would compare monotonic readings).
func requireSame(t *testing.T, want, got time.Time, msgAndArgs ...any) {
	t.Helper()
	require.True(t, want.Equal(got), "want %s, got %s: %v", want, got, msgAndArgs)
}
