// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/landlock"
)

// confinement is the Landlock domain agent a runs in, on a kernel of
// Landlock ABI abi: its signals scoped wherever the kernel can scope them,
// so that an agent of our own user cannot stop, kill or trace us or the
// keeper (without that ABI it runs as before: status and certificate say
// "none").
func confinement(a *config.Agent, abi int) (landlock.Ruleset, error) {
	return landlock.Ruleset{ScopeSignals: abi >= landlock.SignalsABI}, nil
}
