package escalate_test

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/escalate"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/testchild"
)

var rt *procsup.Runtime

func TestMain(m *testing.M) {
	testchild.Main()
	var err error
	if rt, err = procsup.NewRuntime(procsup.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	rt.Close()
	os.Exit(code)
}

var _ escalate.Target = (*procsup.Tree)(nil)

// start runs a test child as an agent and returns its tree.
func start(t *testing.T, mode string, args ...string) (*procsup.Tree, *testchild.Child) {
	t.Helper()
	c := testchild.Start(t, rt, mode, procsup.Spec{}, args...)
	return procsup.NewTree(rt, c.P, procsup.TreeOptions{AgentID: "ladder", Exclusive: true}), c
}

func steps(r escalate.Result) []string {
	var names []string
	for _, s := range r.Steps {
		names = append(names, s.Name)
	}
	return names
}

func plan() escalate.Plan {
	return escalate.Plan{CoopSignal: syscall.SIGINT, CoopGrace: 300 * time.Millisecond, TermGrace: 300 * time.Millisecond}
}

// An agent spinning in pure CPU code, ignoring SIGINT and SIGTERM, goes
// through the whole ladder and is reaped.
func TestWedgedAgentReachesSIGKILL(t *testing.T) {
	tree, c := start(t, "spin")
	var seen []string
	p := plan()
	p.OnStep = func(s escalate.Step) { seen = append(seen, s.Name) }
	began := time.Now()
	res := escalate.Run(tree, p)
	took := time.Since(began)

	require.Equal(t, escalate.StageSIGKILL, res.Reached)
	require.True(t, res.Empty)
	require.Equal(t, []string{escalate.StepCoopSignal, escalate.StepCoopWait, escalate.StepSIGTERM,
		escalate.StepTermWait, escalate.StepSIGKILL, escalate.StepMainExited, escalate.StepReaped}, steps(res))
	require.Equal(t, steps(res), seen, "OnStep sees every step as it is recorded")
	require.True(t, c.P.Status().Signaled)
	require.Equal(t, syscall.SIGKILL, c.P.Status().Signal)
	require.GreaterOrEqual(t, took, 600*time.Millisecond, "both graces were waited")
	require.Less(t, took, 10*time.Second)
	for _, s := range res.Steps {
		require.False(t, s.At.IsZero())
	}
	require.Equal(t, "grace_elapsed", res.Steps[1].Detail["ended_by"])
}

// An agent that handles the cooperative signal exits in the cooperative
// stage with its own status, and nothing else is sent.
func TestCooperativeExit(t *testing.T) {
	tree, c := start(t, "exit-on-int")
	p := plan()
	p.CoopGrace = 10 * time.Second
	began := time.Now()
	res := escalate.Run(tree, p)
	require.Equal(t, escalate.StageCooperative, res.Reached)
	require.True(t, res.Empty)
	require.Equal(t, 3, c.P.Status().Code)
	require.NotContains(t, steps(res), escalate.StepSIGTERM)
	require.Less(t, time.Since(began), 5*time.Second, "left the grace early when the main process exited")
}

func TestSIGTERMStage(t *testing.T) {
	tree, c := start(t, "exit-on-term")
	p := plan()
	p.TermGrace = 10 * time.Second
	res := escalate.Run(tree, p)
	require.Equal(t, escalate.StageSIGTERM, res.Reached)
	require.Equal(t, 4, c.P.Status().Code)
	require.NotContains(t, steps(res), escalate.StepSIGKILL)
}

// "Already exited" is success: nothing is sent.
func TestAlreadyExited(t *testing.T) {
	p, err := rt.Start(testchild.Spec("exit", "0"))
	require.NoError(t, err)
	<-p.Done()
	tree := procsup.NewTree(rt, p, procsup.TreeOptions{Exclusive: true})
	require.Eventually(t, tree.Empty, 10*time.Second, time.Millisecond)
	res := escalate.Run(tree, plan())
	require.Equal(t, escalate.StageNone, res.Reached)
	require.True(t, res.Empty)
	require.Empty(t, res.Steps)
}

// Without a cooperative signal and nobody bound to hear a directive, the
// cooperative stage is skipped.
func TestNobodyToHearSkipsCooperative(t *testing.T) {
	tree, _ := start(t, "exit-on-term")
	p := plan()
	p.CoopSignal = 0
	p.Directive = func() int { return 0 }
	res := escalate.Run(tree, p)
	require.Equal(t, escalate.StepSIGTERM, res.Steps[0].Name)
	require.Equal(t, escalate.StageSIGTERM, res.Reached)
}

// A directive heard by a client is the cooperative stage on its own.
func TestDirectiveAlone(t *testing.T) {
	tree, _ := start(t, "ignore-term")
	p := plan()
	p.CoopSignal = 0
	p.Directive = func() int { return 2 }
	res := escalate.Run(tree, p)
	require.Equal(t, escalate.StepDirective, res.Steps[0].Name)
	require.Equal(t, 2, res.Steps[0].Detail["clients"])
	require.Equal(t, escalate.StageSIGKILL, res.Reached)
}

// Last words: the announced dump signal goes first, then the dump wait.
func TestDumpSignalFirst(t *testing.T) {
	tree, _ := start(t, "exit-on-int")
	p := plan()
	p.DumpSignal, p.DumpWait = syscall.SIGWINCH, 100*time.Millisecond
	p.Dump = func() error { return tree.SignalMain(syscall.SIGWINCH) }
	res := escalate.Run(tree, p)
	require.Equal(t, escalate.StepDumpSignal, res.Steps[0].Name)
	require.Equal(t, "SIGWINCH", res.Steps[0].Detail["signal"])
	require.GreaterOrEqual(t, res.Steps[0].Duration, 100*time.Millisecond)
	require.Equal(t, escalate.StageCooperative, res.Reached)
}

// A hurry (the second Ctrl-C) skips every grace straight to SIGKILL.
func TestHurry(t *testing.T) {
	t.Run("before", func(t *testing.T) {
		tree, _ := start(t, "spin")
		hurry := make(chan struct{})
		close(hurry)
		p := plan()
		p.CoopGrace, p.TermGrace, p.Hurry = time.Hour, time.Hour, hurry
		res := escalate.Run(tree, p)
		require.Equal(t, escalate.StepSIGKILL, res.Steps[0].Name)
		require.Equal(t, escalate.StageSIGKILL, res.Reached)
		require.True(t, res.Empty)
	})
	t.Run("during cooperative grace", func(t *testing.T) {
		tree, _ := start(t, "spin")
		hurry := make(chan struct{})
		p := plan()
		p.CoopGrace, p.TermGrace, p.Hurry = time.Hour, time.Hour, hurry
		p.OnStep = func(s escalate.Step) {
			if s.Name == escalate.StepCoopSignal {
				close(hurry)
			}
		}
		res := escalate.Run(tree, p)
		require.Equal(t, escalate.StageSIGKILL, res.Reached)
		require.Equal(t, "hurry", res.Steps[1].Detail["ended_by"])
		require.True(t, res.Empty)
	})
}

// Descendants left by a main process that exited get SIGTERM (the
// "hang" children of the fork tree die of it) without a cooperative stage.
func TestSurvivorsOfExitedMain(t *testing.T) {
	tree, c := start(t, "fork-tree", "3")
	require.NoError(t, c.P.Signal(syscall.SIGKILL))
	<-c.P.Done()
	res := escalate.Run(tree, escalate.Plan{CoopSignal: syscall.SIGINT, TermGrace: 10 * time.Second})
	require.Equal(t, escalate.StageSIGTERM, res.Reached)
	require.Equal(t, escalate.StepSIGTERM, res.Steps[0].Name, "no cooperative stage: the main process is gone")
	require.Equal(t, 3, res.Steps[0].Detail["procs"])
	require.True(t, res.Empty)
	for _, pid := range c.PIDs {
		require.False(t, testchild.Exists(pid))
	}
}
