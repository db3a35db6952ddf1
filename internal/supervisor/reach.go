// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"fmt"
	"os"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/landlock"
)

// devices are writable beside an agent's writable paths, where they
// exist: what nearly every program writes to (output thrown away, its
// terminal, pseudo-terminals it opens).
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts"}

// confinement is the Landlock domain agent a runs in, on a kernel of
// Landlock ABI abi:
//   - its signals scoped wherever the kernel can scope them, so that an
//     agent of our own user cannot stop, kill or trace us or the keeper
//     (without that ABI it runs as before, and status and certificate say
//     so);
//   - with writable paths, writes confined beneath them and the devices;
//     a kernel without Landlock is an error: the agent is not started
//     with its files open.
func confinement(a *config.Agent, abi int) (landlock.Ruleset, error) {
	r := landlock.Ruleset{ScopeSignals: abi >= landlock.SignalsABI}
	if a.Writable == nil {
		return r, nil
	}
	if abi < landlock.FilesABI {
		return r, fmt.Errorf("writable: %w: the kernel has no Landlock (Linux 5.13 or later, with landlock in its lsm= list); the agent is not started with its files open",
			landlock.ErrUnsupported)
	}
	r.Writable = append([]string{}, a.Writable...)
	for _, d := range devices {
		if _, err := os.Stat(d); err == nil {
			r.Writable = append(r.Writable, d)
		}
	}
	return r, nil
}
