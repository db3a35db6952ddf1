// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup_test

import (
	"testing"

	"github.com/hermeskill/hermeskilld/internal/cgroup"
	"github.com/hermeskill/hermeskilld/internal/landlock"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/testchild"
)

// BenchmarkStartTrue: fork+exec of /bin/true through the runtime (the
// locked spawner thread, PDEATHSIG, own process group, pidfd wait) until
// it is reaped.
func BenchmarkStartTrue(b *testing.B) {
	for b.Loop() {
		p, err := rt.Start(procsup.Spec{Argv: []string{"/bin/true"}})
		if err != nil {
			b.Fatal(err)
		}
		<-p.Done()
	}
}

// BenchmarkTreeFreezeThaw: a pause's freeze and the resume's thaw of a
// tree of a main process and 3 children, by containment mode
// (cgroup.freeze, waiting for cgroup.events to say frozen; SIGSTOP and
// SIGCONT to every process).
func BenchmarkTreeFreezeThaw(b *testing.B) {
	modes := map[string]func(b *testing.B) (procsup.TreeOptions, procsup.Spec){
		"pgroup": func(*testing.B) (procsup.TreeOptions, procsup.Spec) {
			return procsup.TreeOptions{AgentID: "bench", Exclusive: true}, procsup.Spec{}
		},
		"cgroup": func(b *testing.B) (procsup.TreeOptions, procsup.Spec) {
			m, err := cgroup.Detect(cgroup.Options{})
			if err != nil {
				b.Skipf("no writable cgroup v2 hierarchy: %v", err)
			}
			g, err := m.Create("bench-freeze")
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = g.Remove() })
			return procsup.TreeOptions{AgentID: "bench", Cgroup: g, Exclusive: true}, procsup.Spec{CgroupFD: g.FD()}
		},
	}
	for _, name := range []string{"pgroup", "cgroup"} {
		b.Run(name, func(b *testing.B) {
			opts, spec := modes[name](b)
			c := testchild.Start(b, rt, "fork-tree", spec, "3")
			tree := procsup.NewTree(rt, c.P, opts)
			b.Cleanup(func() { _, _, _ = tree.KillTree() })
			for b.Loop() {
				if _, err := tree.Freeze(); err != nil {
					b.Fatal(err)
				}
				if err := tree.Thaw(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStartTrueConfined is BenchmarkStartTrue through the exec stage
// (the test binary, not hermeskilld's smaller one), its signals scoped by
// Landlock: the price of the confinement on every agent's start.
func BenchmarkStartTrueConfined(b *testing.B) {
	if rt.LandlockABI() < landlock.SignalsABI {
		b.Skipf("the kernel's Landlock ABI is %d: no signal scoping", rt.LandlockABI())
	}
	for b.Loop() {
		p, err := rt.Start(procsup.Spec{Argv: []string{"/bin/true"}, Landlock: landlock.Ruleset{ScopeSignals: true}})
		if err != nil {
			b.Fatal(err)
		}
		<-p.Done()
	}
}
