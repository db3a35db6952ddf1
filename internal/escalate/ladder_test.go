// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package escalate_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/cgroup"
	"github.com/hermeskill/hermeskilld/internal/escalate"
	"github.com/hermeskill/hermeskilld/internal/procfs"
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

// A stopped agent (SIGSTOP, Ctrl-Z, SIGTTOU) is continued at the
// cooperative stage: it hears the signal and exits in the grace, rather
// than spending all of it stopped.
func TestStoppedAgentHearsCooperativeStop(t *testing.T) {
	tree, c := start(t, "exit-on-int")
	require.NoError(t, c.P.Signal(syscall.SIGSTOP))
	require.Eventually(t, func() bool {
		st, err := procfs.Default().Stat(c.P.PID())
		return err == nil && st.State == 'T'
	}, 5*time.Second, time.Millisecond)
	p := plan()
	p.CoopGrace = 10 * time.Second
	began := time.Now()
	res := escalate.Run(tree, p)
	require.Equal(t, escalate.StageCooperative, res.Reached)
	require.Equal(t, 3, c.P.Status().Code, "it exited of its own SIGINT handler")
	took := time.Since(began)
	require.Less(t, took, 5*time.Second, "the grace was not spent stopped")
	t.Logf("the stopped agent exited of its SIGINT handler %s after the ladder began (grace 10 s)", took)
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

// A directive its client acknowledged withholds the cooperative signal:
// the agent, which would exit 3 on SIGINT, never gets one and is stopped
// by SIGTERM after the grace, counted from the directive.
func TestAcknowledgedDirectiveWithholdsSignal(t *testing.T) {
	tree, c := start(t, "exit-on-int")
	acked := make(chan struct{})
	p := plan()
	p.Acked, p.AckWait = acked, 5*time.Second
	p.Directive = func() int { close(acked); return 1 }
	res := escalate.Run(tree, p)
	require.NotContains(t, steps(res), escalate.StepCoopSignal)
	d := res.Steps[0]
	require.Equal(t, escalate.StepDirective, d.Name)
	require.Equal(t, true, d.Detail["acknowledged"])
	require.Equal(t, "SIGINT", d.Detail["withheld"])
	require.Equal(t, escalate.StageSIGTERM, res.Reached)
	require.NotEqual(t, 3, c.P.Status().Code, "no SIGINT reached it")
	term := res.Steps[slices.Index(steps(res), escalate.StepSIGTERM)]
	require.Less(t, term.At.Sub(d.At), 3*time.Second, "the grace counts from the directive, not from the acknowledgement's wait")
}

// Without an acknowledgement the signal follows the directive after
// AckWait, and the agent's handler runs as before.
func TestUnacknowledgedDirectiveGetsSignal(t *testing.T) {
	tree, c := start(t, "exit-on-int")
	p := plan()
	p.CoopGrace = 10 * time.Second
	p.Acked, p.AckWait = make(chan struct{}), 200*time.Millisecond
	p.Directive = func() int { return 1 }
	res := escalate.Run(tree, p)
	require.Equal(t, []string{escalate.StepDirective, escalate.StepCoopSignal}, steps(res)[:2])
	require.Equal(t, false, res.Steps[0].Detail["acknowledged"])
	require.Nil(t, res.Steps[0].Detail["withheld"])
	require.GreaterOrEqual(t, res.Steps[1].At.Sub(res.Steps[0].At), 200*time.Millisecond, "the signal waited for the acknowledgement")
	require.Equal(t, escalate.StageCooperative, res.Reached)
	require.Equal(t, 3, c.P.Status().Code)
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

// Release (the thaw of a tree held frozen for the autopsy) comes once,
// right after the first signal of the ladder and before its first wait,
// whichever stage that is.
func TestReleaseAfterFirstSignal(t *testing.T) {
	cases := []struct {
		name  string
		mode  string
		setup func(p *escalate.Plan, tree *procsup.Tree)
		after string // the step recorded just before Release
	}{
		{"cooperative signal", "exit-on-int", func(p *escalate.Plan, _ *procsup.Tree) {}, escalate.StepCoopSignal},
		{"dump signal", "exit-on-int", func(p *escalate.Plan, tree *procsup.Tree) {
			p.DumpSignal, p.DumpWait = syscall.SIGWINCH, 10*time.Millisecond
			p.Dump = func() error { return tree.SignalMain(syscall.SIGWINCH) }
		}, ""}, // released inside the dump step, before its wait
		{"sigterm", "exit-on-term", func(p *escalate.Plan, _ *procsup.Tree) { p.CoopSignal = 0 }, ""},
		{"hurried", "spin", func(p *escalate.Plan, _ *procsup.Tree) {
			h := make(chan struct{})
			close(h)
			p.Hurry = h
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tree, _ := start(t, tc.mode)
			p := plan()
			tc.setup(&p, tree)
			var seen []string
			releases, atRelease := 0, []string(nil)
			p.OnStep = func(s escalate.Step) { seen = append(seen, s.Name) }
			p.Release = func() { releases++; atRelease = append([]string(nil), seen...) }
			res := escalate.Run(tree, p)
			require.True(t, res.Empty)
			require.Equal(t, 1, releases, "released exactly once")
			if tc.after != "" {
				require.Equal(t, []string{tc.after}, atRelease)
			} else {
				require.Empty(t, atRelease, "released before the first step's record (its wait)")
			}
		})
	}
}

// With the tree held frozen by the autopsy, the cooperative signal is
// already pending when the ladder releases it: the thaw then delivers it
// in the same pass that ends the freeze, and a blocking call in the agent
// returns EINTR instead of being restarted behind the handler's back.
func TestCooperativeSignalPendingBeforeThaw(t *testing.T) {
	m, err := cgroup.Detect(cgroup.Options{})
	if errors.Is(err, cgroup.ErrUnavailable) {
		t.Skipf("needs a writable cgroup v2 hierarchy to freeze the tree: %v", err)
	}
	require.NoError(t, err)
	g, err := m.Create("ladder-thaw")
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Remove() })
	c := testchild.Start(t, rt, "exit-on-int", procsup.Spec{CgroupFD: g.FD()})
	tree := procsup.NewTree(rt, c.P, procsup.TreeOptions{AgentID: "ladder", Cgroup: g, Exclusive: true})

	_, thaw := tree.Snapshot(128, true)
	p := plan()
	p.CoopGrace = 10 * time.Second
	var pending string
	p.Release = func() {
		pending = shdPnd(t, c.P.PID())
		thaw()
	}
	res := escalate.Run(tree, p)
	require.Equal(t, escalate.StageCooperative, res.Reached)
	require.Equal(t, 3, c.P.Status().Code)
	mask, err := strconv.ParseUint(pending, 16, 64)
	require.NoError(t, err, "ShdPnd %q", pending)
	require.NotZero(t, mask&(1<<(syscall.SIGINT-1)), "SIGINT pending at release (ShdPnd %s)", pending)
}

// shdPnd is the process-wide pending signal mask of pid (proc(5)).
func shdPnd(t *testing.T, pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "ShdPnd:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no ShdPnd in /proc/%d/status", pid)
	return ""
}

// Revocation is the ladder's first step, before any signal, even hurried.
func TestRevokeFirst(t *testing.T) {
	tree, _ := start(t, "exit-on-int")
	hurry := make(chan struct{})
	close(hurry)
	p := plan()
	p.Hurry = hurry
	revoked := 0
	p.Revoke = func() map[string]any { revoked++; return map[string]any{"requests_in_flight": 1} }
	res := escalate.Run(tree, p)
	require.Equal(t, 1, revoked)
	require.Equal(t, escalate.StepRevoked, res.Steps[0].Name)
	require.Equal(t, 1, res.Steps[0].Detail["requests_in_flight"])
	require.Equal(t, escalate.StepSIGKILL, res.Steps[1].Name)
}

// Examine (the autopsy) follows the revocation's record and precedes the
// first signal, even hurried, even for a tree already empty.
func TestExamineAfterRevoke(t *testing.T) {
	t.Run("hurried", func(t *testing.T) {
		tree, _ := start(t, "exit-on-int")
		hurry := make(chan struct{})
		close(hurry)
		p := plan()
		p.Hurry = hurry
		var order []string
		p.Revoke = func() map[string]any { order = append(order, "revoke"); return nil }
		p.Examine = func() { order = append(order, "examine") }
		p.OnStep = func(s escalate.Step) { order = append(order, s.Name) }
		escalate.Run(tree, p)
		require.Equal(t, []string{"revoke", escalate.StepRevoked, "examine", escalate.StepSIGKILL}, order[:4])
	})
	t.Run("empty", func(t *testing.T) {
		p, err := rt.Start(testchild.Spec("exit", "0"))
		require.NoError(t, err)
		<-p.Done()
		tree := procsup.NewTree(rt, p, procsup.TreeOptions{Exclusive: true})
		require.Eventually(t, tree.Empty, 10*time.Second, time.Millisecond)
		examined := 0
		pl := plan()
		pl.Revoke = func() map[string]any { return nil }
		pl.Examine = func() { examined++ }
		res := escalate.Run(tree, pl)
		require.Equal(t, 1, examined)
		require.Equal(t, []string{escalate.StepRevoked}, steps(res))
	})
}

// In cgroup mode the tree is held frozen at the decision and the ladder's
// first signal goes out at once; the autopsy is read after it, before the
// thaw. It still shows every process that signal kills (the fork tree's
// children die of SIGTERM), the signal pending in each, and the signal
// takes effect only once the tree is released. The first signal here is
// SIGTERM (no cooperative stage), the case where the release once came
// before the signal.
func TestAutopsyReadAfterFirstSignalSeesTree(t *testing.T) {
	m, err := cgroup.Detect(cgroup.Options{})
	if errors.Is(err, cgroup.ErrUnavailable) {
		t.Skipf("needs a writable cgroup v2 hierarchy to freeze the tree: %v", err)
	}
	require.NoError(t, err)
	g, err := m.Create("ladder-held")
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Remove() })
	c := testchild.Start(t, rt, "fork-tree", procsup.Spec{CgroupFD: g.FD()}, "3")
	require.Len(t, c.PIDs, 3)
	tree := procsup.NewTree(rt, c.P, procsup.TreeOptions{AgentID: "ladder", Cgroup: g, Exclusive: true})

	var held *procsup.Autopsy
	var autopsy []procfs.Proc
	var order []string
	pending := map[int]string{}
	p := plan()
	p.CoopSignal = 0
	p.Hold = func() bool {
		order = append(order, "hold")
		held = tree.Hold(true)
		return held.Held()
	}
	p.Examine = func() {
		order = append(order, "examine")
		autopsy = held.Read(128)
		for _, pid := range c.PIDs {
			pending[pid] = shdPnd(t, pid)
		}
	}
	p.Release = func() { order = append(order, "release"); held.Thaw() }
	p.OnStep = func(s escalate.Step) { order = append(order, s.Name) }
	res := escalate.Run(tree, p)

	require.True(t, held.Held(), "a cgroup tree is held frozen")
	require.Equal(t, []string{"hold", "examine", "release", escalate.StepSIGTERM}, order[:4],
		"held, SIGTERM sent (recorded once the tree is released), autopsy, release")
	got := map[int]procfs.Proc{}
	for _, pr := range autopsy {
		got[pr.PID] = pr
	}
	require.Contains(t, got, c.P.PID())
	for _, pid := range c.PIDs {
		require.Contains(t, got, pid, "the autopsy shows the child SIGTERM kills")
		require.Equal(t, c.P.PID(), got[pid].PPID)
		require.NotEqual(t, "Z", got[pid].State, "not yet dead when the autopsy was read")
		mask, err := strconv.ParseUint(pending[pid], 16, 64)
		require.NoError(t, err, "ShdPnd %q", pending[pid])
		require.NotZero(t, mask&(1<<(syscall.SIGTERM-1)), "SIGTERM already pending in %d at the autopsy (ShdPnd %s)", pid, pending[pid])
	}
	require.Equal(t, escalate.StageSIGKILL, res.Reached, "the main process ignores SIGTERM")
	require.Equal(t, 4, res.Steps[0].Detail["procs"], "SIGTERM went to the main process and its 3 children")
	require.True(t, res.Empty)
	for _, pid := range c.PIDs {
		require.False(t, testchild.Exists(pid))
	}
}

// Hurried, SIGKILL is the first signal; a frozen process still dies of
// it, so the autopsy of a held tree is read before it.
func TestAutopsyBeforeSIGKILLOfHeldTree(t *testing.T) {
	m, err := cgroup.Detect(cgroup.Options{})
	if errors.Is(err, cgroup.ErrUnavailable) {
		t.Skipf("needs a writable cgroup v2 hierarchy to freeze the tree: %v", err)
	}
	require.NoError(t, err)
	g, err := m.Create("ladder-held-kill")
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Remove() })
	c := testchild.Start(t, rt, "fork-tree", procsup.Spec{CgroupFD: g.FD()}, "2")
	tree := procsup.NewTree(rt, c.P, procsup.TreeOptions{AgentID: "ladder", Cgroup: g, Exclusive: true})
	hurry := make(chan struct{})
	close(hurry)
	var held *procsup.Autopsy
	var autopsy []procfs.Proc
	var order []string
	p := plan()
	p.Hurry = hurry
	p.Hold = func() bool { held = tree.Hold(true); return held.Held() }
	p.Examine = func() { order = append(order, "examine"); autopsy = held.Read(128) }
	p.Release = func() { order = append(order, "release"); held.Thaw() }
	p.OnStep = func(s escalate.Step) { order = append(order, s.Name) }
	res := escalate.Run(tree, p)
	require.Equal(t, []string{"examine", "release", escalate.StepSIGKILL}, order[:3])
	require.Len(t, autopsy, 3, "the main process and its 2 children, alive at the autopsy")
	for _, pr := range autopsy {
		require.NotEqual(t, "Z", pr.State)
	}
	require.True(t, res.Empty)
}

// Sent to a held tree, the cooperative signal reaches the agent only at
// the release, after the autopsy: the cooperative grace counts from the
// release, so a slow autopsy takes nothing from the agent's grace.
func TestCoopGraceCountsFromRelease(t *testing.T) {
	tree, _ := start(t, "spin") // ignores SIGINT and SIGTERM
	const autopsy = 250 * time.Millisecond
	var released, sigterm time.Time
	p := plan()
	p.CoopGrace = 300 * time.Millisecond
	p.Hold = func() bool { return true }       // as a frozen cgroup reports
	p.Examine = func() { time.Sleep(autopsy) } // a slow autopsy, not a synchronisation
	p.Release = func() { released = time.Now() }
	p.OnStep = func(s escalate.Step) {
		if s.Name == escalate.StepSIGTERM {
			sigterm = s.At
		}
	}
	res := escalate.Run(tree, p)
	require.Equal(t, escalate.StageSIGKILL, res.Reached)
	require.False(t, released.IsZero())
	require.GreaterOrEqual(t, sigterm.Sub(released), p.CoopGrace,
		"SIGTERM a whole grace after the release (%s after it)", sigterm.Sub(released))
	require.Equal(t, escalate.StepCoopSignal, res.Steps[0].Name)
	require.GreaterOrEqual(t, sigterm.Sub(res.Steps[0].At), p.CoopGrace+autopsy,
		"the autopsy's time is not taken from the grace")
}
