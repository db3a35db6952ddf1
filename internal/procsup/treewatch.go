// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/hermeskill/hermeskilld/internal/cgroup"
	"github.com/hermeskill/hermeskilld/internal/procfs"
)

// WaitEmpty returns a channel closed once Empty reports true; stop
// releases the watcher. With a cgroup the wait is event-driven
// (cgroup.events "populated 0"), then the main process's reaping; without,
// the tree is re-checked on a short backoff.
func (t *Tree) WaitEmpty() (<-chan struct{}, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if t.cg != nil {
			if t.cg.WaitEmpty(ctx) != nil {
				return
			}
			select {
			case <-t.main.Done():
			case <-ctx.Done():
				return
			}
		}
		t.pollEmpty(ctx)
	}()
	return done, func() { cancel(); <-done }
}

// pollEmpty re-checks Empty, 1 ms apart at first, then backing off to
// 20 ms. Returns when empty or on ctx.
func (t *Tree) pollEmpty(ctx context.Context) {
	delay := time.Millisecond
	if !t.exclusive && t.cg == nil {
		delay = 5 * time.Millisecond // a full /proc scan per check
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.main.Done():
		case <-timer.C:
		}
		if t.Empty() {
			return
		}
		if time.Since(start) > 50*time.Millisecond && delay < 20*time.Millisecond {
			delay *= 2
		}
		timer.Reset(delay)
	}
}

// autopsyFreeze bounds how long the autopsy may wait for a freeze.
const autopsyFreeze = 100 * time.Millisecond

// Snapshot records every process of the tree for the certificate's
// process_tree. With freeze and a cgroup the tree is frozen for the moment
// of the snapshot, so it is consistent (nothing forks or exits in
// between), and it stays frozen until the caller calls thaw (idempotent;
// a no-op when nothing was frozen). freeze=false never freezes (shadow
// mode must not touch the agent).
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
func (t *Tree) Snapshot(cmdlineMax int, freeze bool) (procs []procfs.Proc, thaw func()) {
	// A frozen process reads as sleeping: its state is taken before the
	// freeze, so the autopsy shows what was running (R), blocked (D) or
	// stopped (T) when the decision fell.
	type seen struct {
		state byte
		start uint64
	}
	thaw = func() {}
	before := map[int]seen{}
	if t.cg != nil && freeze {
		if pids, err := t.cg.PIDs(); err == nil {
			for _, pid := range pids {
				if st, err := t.fs.Stat(pid); err == nil {
					before[pid] = seen{st.State, st.StartTimeTicks}
				}
			}
		}
		wait := t.freezeWait
		if wait <= 0 {
			wait = autopsyFreeze
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		err := t.cg.Freeze(ctx)
		cancel()
		// Thawed whatever Freeze returned: a freeze that timed out has
		// still set cgroup.freeze, and a frozen agent could act on no
		// signal of the ladder but SIGKILL.
		if !errors.Is(err, cgroup.ErrFreezeUnsupported) {
			var once sync.Once
			thaw = func() { once.Do(func() { _ = t.cg.Thaw() }) }
		}
	}
	pids := t.allPIDs()
	for _, pid := range pids {
		if p, err := t.fs.Proc(pid, cmdlineMax); err == nil {
			if b, ok := before[pid]; ok && b.start == p.StartTimeTicks {
				p.State = string(b.state)
			}
			procs = append(procs, p)
		}
	}
	return procs, thaw
}

// allPIDs is every process of the tree including zombies (an autopsy
// shows them), sorted.
func (t *Tree) allPIDs() []int {
	set := make(map[int]bool)
	if m, err := t.members(); err == nil {
		for pid := range m {
			set[pid] = true
		}
	}
	if !t.mainReaped() {
		set[t.main.PID()] = true
	}
	// Zombie children of tree members are not in cgroup.procs; show them.
	if snap, err := t.scan(); err == nil {
		for pid, st := range snap {
			if st.State == 'Z' && set[st.PPID] {
				set[pid] = true
			}
		}
	}
	pids := make([]int, 0, len(set))
	for pid := range set {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	return pids
}

// Survivors lists what is left of the tree (after a bounded wait failed).
func (t *Tree) Survivors(cmdlineMax int) []procfs.Proc {
	var out []procfs.Proc
	for _, pid := range t.allPIDs() {
		if p, err := t.fs.Proc(pid, cmdlineMax); err == nil {
			out = append(out, p)
		}
	}
	return out
}
