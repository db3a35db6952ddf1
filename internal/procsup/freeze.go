// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/hermeskill/hermeskilld/internal/cgroup"
)

// How Freeze froze a tree.
const (
	FrozenCgroup  = "cgroup"  // cgroup.freeze: the kernel's freezer (cgroup v2, Linux >= 5.2)
	FrozenSIGSTOP = "sigstop" // SIGSTOP to every process of the tree
)

// pauseFreeze bounds how long Freeze waits for the cgroup to say it is
// frozen.
const pauseFreeze = 2 * time.Second

// Freeze stops every process of the tree until Thaw, for a pause: with a
// cgroup through cgroup.freeze, which nothing in the tree can notice or
// undo (cgroup-v2.rst: "the cgroup freezer … is invisible to the
// processes"); without one (or without cgroup.freeze, Linux < 5.2) by
// SIGSTOP to every process, which a parent of the agent's can see
// (waitid WSTOPPED) and a process with the same uid could undo with
// SIGCONT. It reports how it froze the tree; an error says the freeze may
// not be whole (the cgroup did not report frozen in time, a process could
// not be signalled) — what could be frozen is, and Thaw undoes it.
// Freezing a frozen tree changes nothing.
func (t *Tree) Freeze() (string, error) {
	t.mu.Lock()
	frozen := t.frozen
	t.mu.Unlock()
	if frozen != "" {
		return frozen, nil
	}
	if t.cg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), pauseFreeze)
		err := t.cg.Freeze(ctx)
		cancel()
		if !errors.Is(err, cgroup.ErrFreezeUnsupported) {
			// A freeze that timed out stays requested: Thaw lifts it.
			t.setFrozen(FrozenCgroup)
			return FrozenCgroup, err
		}
	}
	t.setFrozen(FrozenSIGSTOP)
	_, err := t.SignalTree(syscall.SIGSTOP)
	return FrozenSIGSTOP, err
}

// Thaw lets the tree Freeze froze run again: "0" to cgroup.freeze, or
// SIGCONT to every process. A tree not frozen is left alone.
func (t *Tree) Thaw() error {
	t.mu.Lock()
	frozen := t.frozen
	t.frozen = ""
	t.mu.Unlock()
	switch frozen {
	case FrozenCgroup:
		return t.cg.Thaw()
	case FrozenSIGSTOP:
		_, err := t.SignalTree(syscall.SIGCONT)
		return err
	}
	return nil
}

// Frozen is how the tree is frozen by Freeze, "" when it is not.
func (t *Tree) Frozen() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.frozen
}

func (t *Tree) setFrozen(how string) {
	t.mu.Lock()
	t.frozen = how
	t.mu.Unlock()
}
