// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup_test

import (
	"testing"

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
