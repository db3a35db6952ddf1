// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hermeskill/hermeskilld/internal/cgroup"
	"github.com/hermeskill/hermeskilld/internal/procfs"
)

// autopsyFreeze bounds how long the autopsy may wait for a freeze.
const autopsyFreeze = 100 * time.Millisecond

// Snapshot records every process of the tree for the certificate's
// process_tree. With freeze and a cgroup the tree is frozen for the moment
// of the snapshot, so it is consistent (nothing forks or exits in
// between), and it stays frozen until the caller calls thaw (idempotent;
// a no-op when nothing was frozen). freeze=false never freezes (shadow
// mode must not touch the agent). It is Hold followed by Autopsy.Read.
func (t *Tree) Snapshot(cmdlineMax int, freeze bool) (procs []procfs.Proc, thaw func()) {
	a := t.Hold(freeze)
	return a.Read(cmdlineMax), a.Thaw
}

// Autopsy is a tree held for its autopsy (Hold): frozen, when it could be,
// from the moment of the decision until Thaw, and read by Read while it is.
type Autopsy struct {
	t      *Tree
	before map[int]seen
	frozen bool
	thaw   sync.Once
}

// seen is a process's state and start time before the freeze.
type seen struct {
	state byte
	start uint64
}

// Hold holds the tree for its autopsy. With freeze and a cgroup it
// records each process's state (a frozen process reads as sleeping), then
// requests the freeze and returns without waiting for it: from then on a
// signal sent to the tree is taken by none of its processes before the
// thaw (cgroup.Group.RequestFreeze), so the ladder's first signal can be
// sent at once and the autopsy (Read) still sees the tree as the decision
// found it. Read waits for the freeze to be complete. Without a cgroup
// (or cgroup.freeze, Linux < 5.2), or freeze=false, nothing is held
// (Held reports false) and Read reads a running tree: the caller must
// read it before it signals.
//
// The caller sends its first signal while the tree is still frozen, then
// thaws it. A signal that arrives just after a thaw can be lost as an
// interruption: a frozen task sits in the kernel's signal handling on its
// way out of a blocking system call (the freezer traps it there as if for
// a signal); thawed with no signal pending, the kernel decides to restart
// that call transparently, and a signal that lands between that decision
// and the return to user space runs the agent's handler but no longer
// makes the call fail with EINTR. Python's time.sleep, socket reads and
// select then go on as if never interrupted, and the handler's
// KeyboardInterrupt waits for them. A signal already pending when the
// thaw comes is dequeued in the same pass that ends the freeze, before any
// restart is decided, and the call returns EINTR (signal(7),
// "Interruption of system call and library functions by signal handlers").
func (t *Tree) Hold(freeze bool) *Autopsy {
	a := &Autopsy{t: t}
	if t.cg == nil || !freeze {
		return a
	}
	a.before = map[int]seen{}
	if pids, err := t.cg.PIDs(); err == nil {
		for _, pid := range pids {
			if st, err := t.fs.Stat(pid); err == nil {
				a.before[pid] = seen{st.State, st.StartTimeTicks}
			}
		}
	}
	// Thawed whatever the write returned but "unsupported": a write that
	// failed half way may still have set cgroup.freeze, and a frozen
	// agent could act on no signal of the ladder but SIGKILL.
	a.frozen = !errors.Is(t.cg.RequestFreeze(), cgroup.ErrFreezeUnsupported)
	return a
}

// Held reports whether the tree is frozen until Thaw, so that a signal
// sent now reaches it only after Read.
func (a *Autopsy) Held() bool { return a.frozen }

// Read records every process of the tree (zombies included), once the
// freeze Hold requested is complete or its bound (100 ms) is over. A
// process frozen since Hold shows the state it had then: what was running
// (R), blocked (D) or stopped (T) when the decision fell.
func (a *Autopsy) Read(cmdlineMax int) (procs []procfs.Proc) {
	t := a.t
	if a.frozen {
		wait := t.freezeWait
		if wait <= 0 {
			wait = autopsyFreeze
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		_ = t.cg.WaitFrozen(ctx) // a freeze not complete in time: read what is there
		cancel()
	}
	pids, _ := t.allPIDs() // an autopsy shows what could be read
	for _, pid := range pids {
		if p, err := t.fs.Proc(pid, cmdlineMax); err == nil {
			if b, ok := a.before[pid]; ok && b.start == p.StartTimeTicks {
				p.State = string(b.state)
			}
			procs = append(procs, p)
		}
	}
	return procs
}

// Thaw lets the tree run again (idempotent; a no-op when nothing was
// frozen).
func (a *Autopsy) Thaw() {
	if a.frozen {
		a.thaw.Do(func() { _ = a.t.cg.Thaw() })
	}
}
