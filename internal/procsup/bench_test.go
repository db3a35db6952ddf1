// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup_test

import (
	"testing"

	"github.com/hermeskill/hermeskilld/internal/landlock"
	"github.com/hermeskill/hermeskilld/internal/procsup"
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
