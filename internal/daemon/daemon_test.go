// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// fakeRun is a run without a process: the test ends it.
type fakeRun struct {
	a      *config.Agent
	pid    int
	done   chan struct{}
	once   sync.Once
	out    supervisor.Outcome
	killed atomic.Int32
	reconf atomic.Pointer[config.Agent]
	pools  atomic.Pointer[[]*gateway.Pool]
	// exceeded is the limit Exceed was given; cost is the run's spend.
	exceeded atomic.Pointer[symptoms.Symptom]
	cost     atomic.Pointer[float64]
	// onKill, when set, ends the run as a kill through the ladder would.
	onKill func(r *fakeRun, operator, reason string)
}

func (r *fakeRun) Done() <-chan struct{} { return r.done }
func (r *fakeRun) Wait() supervisor.Outcome {
	<-r.done
	return r.out
}
func (r *fakeRun) Kill(operator, reason string) {
	r.killed.Add(1)
	if r.onKill != nil {
		r.onKill(r, operator, reason)
	}
}
func (r *fakeRun) HostStop(check symptoms.Check, _, reason string) { r.Kill(string(check), reason) }

// Exceed ends the run as the ladder does after a limit's terminal symptom.
func (r *fakeRun) Exceed(s symptoms.Symptom) {
	r.exceeded.Store(&s)
	s.Severity = symptoms.Terminal
	r.end(supervisor.Outcome{Killed: true, Exit: procsup.ExitStatus{Signaled: true, Signal: 9}, Trigger: &s, Usage: r.usage()})
}
func (r *fakeRun) Reconfigure(a *config.Agent)     { r.reconf.Store(a) }
func (r *fakeRun) SetPools(pools ...*gateway.Pool) { r.pools.Store(&pools) }
func (r *fakeRun) Status() supervisor.Status {
	return supervisor.Status{ID: r.a.ID, State: supervisor.StateRunning, PID: r.pid, Mode: r.a.Mode, Usage: r.usage()}
}

func (r *fakeRun) usage() supervisor.Usage {
	var u supervisor.Usage
	if c := r.cost.Load(); c != nil {
		u.CostUSD = *c
	}
	return u
}

// spend sets what the run spent so far.
func (r *fakeRun) spend(usd float64) { r.cost.Store(&usd) }
func (r *fakeRun) PID() int          { return r.pid }

// Resume: a fake run is never paused.
func (r *fakeRun) Resume(context.Context, supervisor.ResumeRequest) error {
	return supervisor.ErrNotPaused
}

// end ends the run with out (once).
func (r *fakeRun) end(out supervisor.Outcome) {
	r.once.Do(func() {
		r.out = out
		close(r.done)
	})
}

// killedByLadder ends a run as a manual kill through the ladder does.
func killedByLadder(r *fakeRun, operator, reason string) {
	r.end(supervisor.Outcome{Killed: true, Exit: procsup.ExitStatus{Signaled: true, Signal: 9},
		Trigger: &symptoms.Symptom{Check: symptoms.Manual, Operator: operator, Reason: reason}})
}

// fakes starts fake runs and remembers them, by agent id.
type fakes struct {
	mu   sync.Mutex
	runs map[string][]*fakeRun
	next int
	// fail, when set, makes starts of that id fail.
	fail map[string]error
}

func (f *fakes) start(s *slot, a *config.Agent) (agentRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail[a.ID]; err != nil {
		return nil, err
	}
	f.next++
	r := &fakeRun{a: a, pid: 1000 + f.next, done: make(chan struct{}), onKill: killedByLadder}
	r.SetPools(s.d.poolsFor(a)...) // as startRun gives them
	f.runs[a.ID] = append(f.runs[a.ID], r)
	return r, nil
}

func (f *fakes) of(id string) []*fakeRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*fakeRun(nil), f.runs[id]...)
}

// newTestDaemon is a daemon in temp dirs whose agents are fake runs.
func newTestDaemon(t *testing.T) (*Daemon, *fakes) {
	t.Helper()
	return newTestDaemonIn(t, t.TempDir())
}

// newTestDaemonIn is newTestDaemon in root: a second one in the same root
// is the same daemon restarted.
func newTestDaemonIn(t *testing.T, root string) (*Daemon, *fakes) {
	t.Helper()
	return newTestDaemonWith(t, root, "")
}

// newTestDaemonWith is newTestDaemonIn with more of the daemon file.
func newTestDaemonWith(t *testing.T, root, extra string) (*Daemon, *fakes) {
	t.Helper()
	cfg, err := config.ParseDaemon([]byte(fmt.Sprintf("state_dir: %s\nruntime_dir: %s\nagents_dir: %s\nestop_file: %s\n%s",
		filepath.Join(root, "state"), filepath.Join(root, "run"), filepath.Join(root, "agents"), filepath.Join(root, "STOP"), extra)),
		filepath.Join(root, "hk.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(cfg.AgentsDir, 0o755))
	d, err := newDaemon(Options{Config: cfg, Log: zaptest.NewLogger(t)}, true)
	require.NoError(t, err)
	f := &fakes{runs: map[string][]*fakeRun{}, fail: map[string]error{}}
	d.starter = f.start
	t.Cleanup(func() {
		for _, s := range d.sortedSlots() {
			s.stopFor("test", "test over", true)
			for _, r := range f.of(s.id) {
				r.end(supervisor.Outcome{})
			}
			<-s.done
		}
		_ = d.h.Close()
	})
	return d, f
}

// writeAgent writes an agent file (command: [agent], then extra) and
// applies it, as the watcher would.
func writeAgent(t *testing.T, d *Daemon, id, extra string) string {
	t.Helper()
	return writeAgentFile(t, d, id, fmt.Sprintf("id: %s\ncommand: [agent]\n%s", id, extra))
}

func writeAgentFile(t *testing.T, d *Daemon, id, content string) string {
	t.Helper()
	path := filepath.Join(d.cfg.AgentsDir, id+".yaml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	d.applyFile(path)
	return path
}

func state(d *Daemon, id string) string {
	st, err := d.Status(id)
	if err != nil {
		return "error: " + err.Error()
	}
	return st.State
}

// Reconcile: a new file starts its agent; an edit reconfigures the run
// (checks at once, the command at the next start); the same content
// saved again changes nothing; a removed file stops the agent through the
// ladder, without quarantine.
func TestReconcileAddEditRemove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, f := newTestDaemon(t)
		path := writeAgent(t, d, "bot", "checks: {heartbeat_timeout: 30s}\n")
		synctest.Wait()
		require.Len(t, f.of("bot"), 1)
		require.Equal(t, control.StateRunning, state(d, "bot"))

		d.applyFile(path) // the same content again: a touch
		synctest.Wait()
		require.Nil(t, f.of("bot")[0].reconf.Load())

		writeAgent(t, d, "bot", "checks: {heartbeat_timeout: 10s}\n")
		synctest.Wait()
		got := f.of("bot")[0].reconf.Load()
		require.NotNil(t, got, "an edit reconfigures the running agent")
		require.Equal(t, 10*time.Second, got.Checks.HeartbeatTimeout)
		require.Len(t, f.of("bot"), 1, "no restart for a check")

		writeAgentFile(t, d, "bot", "id: bot\ncommand: [other]\n")
		synctest.Wait()
		st, err := d.Status("bot")
		require.NoError(t, err)
		require.Equal(t, []string{"command changes at the next start"}, st.Pending)

		require.NoError(t, os.Remove(path))
		d.applyFile(path)
		synctest.Wait()
		require.EqualValues(t, 1, f.of("bot")[0].killed.Load(), "removal stops it through the ladder")
		_, quarantined := d.held.quarantined("bot")
		require.False(t, quarantined, "a removed agent is not quarantined")
		require.Empty(t, d.List())
	})
}

// A file that does not parse is listed with its error and starts nothing;
// a running agent whose file breaks keeps its last good configuration.
func TestReconcileInvalidFile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, f := newTestDaemon(t)
		writeAgent(t, d, "broken", "chekcs: {}\n")
		synctest.Wait()
		require.Empty(t, f.of("broken"))
		require.Equal(t, control.StateInvalid, state(d, "broken"))

		writeAgent(t, d, "bot", "")
		synctest.Wait()
		writeAgent(t, d, "bot", "checks: {heartbeat_timeout: nonsense}\n")
		synctest.Wait()
		st, err := d.Status("bot")
		require.NoError(t, err)
		require.Equal(t, control.StateRunning, st.State)
		require.Contains(t, st.ConfigError, "heartbeat_timeout")
		require.Len(t, f.of("bot"), 1)
	})
}

// Restart policy and crash loop, in virtual time: an agent that exits 1
// at once is restarted after 100ms, 200ms, 400ms, then left down as
// failed; `release` starts it again.
func TestCrashLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, f := newTestDaemon(t)
		writeAgent(t, d, "crasher", "restart: {policy: on-failure, backoff: 100ms, max_backoff: 1s, max_restarts: 3, window: 1m}\n")
		var starts []time.Time
		for i := 0; ; i++ {
			synctest.Wait()
			runs := f.of("crasher")
			if len(runs) == len(starts) {
				break // no new start: left down
			}
			starts = append(starts, time.Now())
			runs[len(runs)-1].end(supervisor.Outcome{Exit: procsup.ExitStatus{Code: 1}})
			synctest.Wait()
			time.Sleep(time.Second)
		}
		require.Len(t, starts, 4, "the first start and 3 restarts")
		require.Equal(t, control.StateFailed, state(d, "crasher"))

		require.NoError(t, d.Release(control.ReleaseRequest{ID: "crasher", Operator: "test"}))
		synctest.Wait()
		require.Len(t, f.of("crasher"), 5, "released: started again")
	})
}

// An operator's kill quarantines the agent: it stays down until released.
func TestKillQuarantines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, f := newTestDaemon(t)
		writeAgent(t, d, "bot", "restart: {policy: always, backoff: 100ms}\n")
		synctest.Wait()
		res, err := d.Kill(context.Background(), control.KillRequest{ID: "bot", Reason: "looping", Operator: "uid:0", Wait: true})
		require.NoError(t, err)
		require.Len(t, res, 1)
		require.Empty(t, res[0].Error)
		synctest.Wait()
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Equal(t, control.StateQuarantined, state(d, "bot"))
		require.Len(t, f.of("bot"), 1, "a quarantined agent is not restarted, whatever its policy")

		require.NoError(t, d.Release(control.ReleaseRequest{ID: "bot", Operator: "uid:0"}))
		synctest.Wait()
		require.Len(t, f.of("bot"), 2)
		require.Equal(t, control.StateRunning, state(d, "bot"))
	})
}

// The e-stop kills every running agent and keeps every agent down, new
// ones included, until released.
func TestEstop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, f := newTestDaemon(t)
		for _, id := range []string{"a", "b", "c"} {
			writeAgent(t, d, id, "restart: {policy: always, backoff: 100ms}\n")
		}
		synctest.Wait()
		res, err := d.Estop(context.Background(), control.EstopRequest{Reason: "drill", Operator: "uid:0", Wait: true})
		require.NoError(t, err)
		require.Len(t, res, 3)
		writeAgent(t, d, "d", "")
		time.Sleep(time.Minute)
		synctest.Wait()
		for _, id := range []string{"a", "b", "c", "d"} {
			require.Equal(t, control.StateEstopped, state(d, id), id)
		}
		require.Empty(t, f.of("d"), "no agent starts under the e-stop")
		require.NoError(t, d.Release(control.ReleaseRequest{Estop: true, Operator: "uid:0"}))
		synctest.Wait()
		for _, id := range []string{"a", "b", "c", "d"} {
			require.Equal(t, control.StateRunning, state(d, id), id)
		}
	})
}

// Status under load: ps and status answer while every agent is busy
// dying slowly (a run whose kill never ends it until the test says so).
func TestStatusWhileAgentsStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, f := newTestDaemon(t)
		for i := range 50 {
			writeAgent(t, d, fmt.Sprintf("a%02d", i), "")
		}
		synctest.Wait()
		for i := range 50 {
			f.of(fmt.Sprintf("a%02d", i))[0].onKill = nil // a ladder that takes its time
		}
		for _, s := range d.sortedSlots() {
			s.stopFor("test", "slow shutdown", false)
		}
		synctest.Wait()
		require.Len(t, d.List(), 50, "listed while stopping")
		for _, s := range d.sortedSlots() {
			_, err := d.Status(s.id)
			require.NoError(t, err)
		}
	})
}

// A shutdown that comes while an agent's run is being started (its
// process forked, the run not yet the slot's) still stops that run: the
// slot does not wait for ever on a run nobody stops, nor the daemon's
// shutdown on the slot.
func TestShutdownDuringAStart(t *testing.T) {
	d, f := newTestDaemon(t)
	starting, gate := make(chan struct{}), make(chan struct{})
	var first sync.Once
	d.starter = func(s *slot, a *config.Agent) (agentRun, error) {
		first.Do(func() { close(starting) })
		<-gate
		return f.start(s, a)
	}
	writeAgent(t, d, "bot", "restart: {policy: always}\n")
	<-starting
	slots := d.sortedSlots()
	require.Len(t, slots, 1)
	slots[0].stopFor("daemon-shutdown", "hermeskilld is shutting down", true)
	close(gate)
	select {
	case <-slots[0].done:
	case <-time.After(10 * time.Second):
		t.Fatal("the slot still waits on the run started during the shutdown")
	}
	runs := f.of("bot")
	require.Len(t, runs, 1)
	require.EqualValues(t, 1, runs[0].killed.Load(), "the run started during the shutdown was stopped")
}

// An e-stop that comes while an agent's run is being started (its process
// forked, the run not yet the slot's) stops that run as its start
// completes, and waits for its end like any other: the e-stop's results
// (and so its receipt) name it, and nothing outlives the e-stop.
func TestEstopDuringAStart(t *testing.T) {
	d, f := newTestDaemon(t)
	starting, gate := make(chan struct{}), make(chan struct{})
	var first sync.Once
	d.starter = func(s *slot, a *config.Agent) (agentRun, error) {
		first.Do(func() { close(starting) })
		<-gate
		return f.start(s, a)
	}
	writeAgent(t, d, "bot", "restart: {policy: always}\n")
	<-starting
	done := make(chan []control.KillResult, 1)
	go func() {
		res, err := d.Estop(context.Background(), control.EstopRequest{Reason: "drill", Operator: "uid:0", Wait: true})
		require.NoError(t, err)
		done <- res
	}()
	select {
	case res := <-done:
		t.Fatalf("the e-stop returned before the starting run was stopped: %+v", res)
	case <-time.After(200 * time.Millisecond):
	}
	close(gate)
	var res []control.KillResult
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the e-stop never returned")
	}
	require.Len(t, res, 1)
	require.Equal(t, "bot", res[0].ID)
	require.Empty(t, res[0].Error)
	runs := f.of("bot")
	require.Len(t, runs, 1)
	require.EqualValues(t, 1, runs[0].killed.Load(), "the run started during the e-stop was stopped")
	require.Eventually(t, func() bool { return state(d, "bot") == control.StateEstopped }, 10*time.Second, 10*time.Millisecond)
	require.Len(t, f.of("bot"), 1, "and not started again")
}
