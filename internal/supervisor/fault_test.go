// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/escalate"
	"github.com/hermeskill/hermeskilld/internal/fault"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// panicIn makes fault.Inject panic in component for agent id, for the
// test's duration.
func panicIn(t *testing.T, component, id string) {
	t.Helper()
	fault.SetTestHook(func(c, agent string) {
		if c == component && agent == id {
			panic("injected panic in " + c)
		}
	})
	t.Cleanup(func() { fault.SetTestHook(nil) })
}

// goAgent is a real agent on pkg/client beating every 10 ms, which stops
// on the STOP directive.
func goAgent(id string) *config.Agent {
	a := agentWith(config.Checks{HeartbeatTimeout: 5 * time.Second, MaxRuntime: time.Minute})
	a.ID = id
	a.Command = []string{os.Args[0], "-test.run=^$"}
	a.Env = map[string]string{agentEnv: "go-client"}
	a.Escalation.CoopGrace, a.Escalation.TermGrace = time.Second, time.Second
	return a
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// requireInternalError checks the certificate of a run killed for a
// panic in component.
func requireInternalError(t *testing.T, out Outcome, component, frame string) {
	t.Helper()
	c := readCert(t, out)
	require.NotNil(t, c.InternalError, "the certificate carries the panic")
	require.Equal(t, component, c.InternalError.Component)
	require.Contains(t, c.InternalError.Panic, "injected panic")
	require.Contains(t, c.InternalError.Stack, frame, "the stack shows where it panicked")
	require.LessOrEqual(t, len(c.InternalError.Stack), fault.MaxStack+64)
	found := false
	for _, s := range c.SymptomsLog {
		found = found || s.Check == string(symptoms.InternalError)
	}
	require.True(t, found, "internal_error is among the symptoms: %+v", c.SymptomsLog)
}

// A panic in one run's loop (here on a heartbeat: agent-controlled input)
// kills that run, for internal_error, with the stack in its certificate;
// another run goes on, and the panic is counted.
func TestRunLoopPanicEndsThatRunOnly(t *testing.T) {
	before := fault.Count(fault.RunLoop)
	panicIn(t, fault.RunLoop, "victim")
	// Two runs of one runtime: neither may count the other's processes.
	shared := func(o *Options) { o.Exclusive = false }
	bystander := startRealWith(t, goAgent("bystander"), shared)
	victim := startRealWith(t, goAgent("victim"), shared)

	out := victim.Wait()
	require.Equal(t, symptoms.InternalError, out.Trigger.Check)
	requireInternalError(t, out, fault.RunLoop, "(*loop).observe")
	require.Equal(t, symptoms.InternalError, symptoms.Check(readCert(t, out).TriggerCheck))
	require.False(t, alive(victim.PID()), "the agent is killed")
	require.Equal(t, StateExited, victim.Status().State)
	require.Equal(t, before+1, fault.Count(fault.RunLoop))

	// The other run is untouched: still running, its heartbeats applied.
	n := bystander.Status().Heartbeat.Accepted
	require.Eventually(t, func() bool { return bystander.Status().Heartbeat.Accepted > n+3 }, 10*time.Second, 10*time.Millisecond, "%+v", bystander.Status())
	require.Equal(t, StateRunning, bystander.Status().State)
	bystander.Kill("test", "done")
	require.Equal(t, symptoms.Manual, bystander.Wait().Trigger.Check)
}

// A panic in the ladder still kills the tree: SIGKILL of every process,
// and the run's certificate records the panic.
func TestLadderPanicStillKills(t *testing.T) {
	before := fault.Count(fault.Ladder)
	panicIn(t, fault.Ladder, "victim")
	r := startRealWith(t, goAgent("victim"), nil)
	require.Eventually(t, func() bool { return r.Status().Agent.Heartbeats > 0 }, 5*time.Second, 10*time.Millisecond)
	r.Kill("test", "stop it")
	out := r.Wait()
	require.Equal(t, escalate.StageSIGKILL, out.Reached)
	requireInternalError(t, out, fault.Ladder, "climbLadder")
	c := readCert(t, out)
	require.Equal(t, "manual", c.TriggerCheck, "the kill that was climbing stays the trigger")
	require.NotEmpty(t, c.ShutdownLog)
	require.Contains(t, stepsOf(c.ShutdownLog), escalate.StepSIGKILL)
	require.Empty(t, c.Survivors)
	require.False(t, alive(r.PID()))
	require.Equal(t, before+1, fault.Count(fault.Ladder))
}

// A panic in the gateway's handling of one request fails that run
// (internal_error), not the process: the gateway goes on metering
// another run.
func TestGatewayMeterPanicFailsTheRun(t *testing.T) {
	gw := newGateway(t)
	before := fault.Count(fault.GatewayMeter)
	panicIn(t, fault.GatewayMeter, "victim")
	llm := func(id string) *config.Agent {
		a := agentWith(config.Checks{Tokens: &config.Limit{Kill: 5 * tokensPerReply}, MaxRuntime: time.Minute})
		a.ID = id
		a.Command = []string{os.Args[0], "-test.run=^$"}
		a.Env = map[string]string{agentEnv: "llm", llmWorkersEnv: "1"}
		a.Escalation.CoopGrace, a.Escalation.TermGrace = time.Second, time.Second
		return a
	}
	victim := startRealWith(t, llm("victim"), func(o *Options) { o.Gateway = gw })
	out := victim.Wait()
	require.Equal(t, symptoms.InternalError, out.Trigger.Check)
	requireInternalError(t, out, fault.GatewayMeter, "(*exchange).fill")
	require.Equal(t, before+1, fault.Count(fault.GatewayMeter), "one panic: the run was revoked at once")

	other := startRealWith(t, llm("other"), func(o *Options) { o.Gateway = gw })
	out = other.Wait()
	require.Equal(t, symptoms.Tokens, out.Trigger.Check, "the gateway still meters")
}

func stepsOf(steps []certs.Step) []string {
	var names []string
	for _, s := range steps {
		names = append(names, s.Step)
	}
	return names
}
