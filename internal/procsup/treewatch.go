// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hermeskill/hermeskilld/internal/fdreserve"
	"github.com/hermeskill/hermeskilld/internal/procfs"
)

// WaitEmpty returns a channel closed once Empty reports true, and only
// then; stop releases the watcher (the channel stays open). With a cgroup
// the wait is event-driven (cgroup.events "populated 0"), then the main
// process's reaping; without, or when the event wait fails (no descriptor
// for the inotify watch, say), the tree is re-checked on a short backoff:
// a failed wait proves nothing, so it is never read as empty.
func (t *Tree) WaitEmpty() (<-chan struct{}, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		if t.cg != nil && t.cg.WaitEmpty(ctx) == nil {
			select {
			case <-t.main.Done():
			case <-ctx.Done():
				return
			}
		}
		if t.pollEmpty(ctx) {
			close(done)
		}
	}()
	return done, func() { cancel(); <-exited }
}

// pollEmpty re-checks Empty, 1 ms apart at first, then backing off to
// 20 ms. It reports true once empty, false on ctx.
func (t *Tree) pollEmpty(ctx context.Context) bool {
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
			return false
		case <-t.main.Done():
		case <-timer.C:
		}
		if t.Empty() {
			return true
		}
		if time.Since(start) > 50*time.Millisecond && delay < 20*time.Millisecond {
			delay *= 2
		}
		timer.Reset(delay)
	}
}

// allPIDs is every process of the tree including zombies (an autopsy
// shows them), sorted. The error says the list could not be made whole:
// the tree's members could not be listed (what is returned is then the
// main process at most).
func (t *Tree) allPIDs() ([]int, error) {
	set := make(map[int]bool)
	m, err := t.members()
	for pid := range m {
		set[pid] = true
	}
	if !t.mainReaped() {
		set[t.main.PID()] = true
	}
	// Zombie children of tree members are not in cgroup.procs; show them.
	if snap, serr := t.scan(); serr == nil {
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
	return pids, err
}

// Survivors lists what is left of the tree (after a bounded wait failed).
// A non-nil error says the list is not known to be whole: the tree could
// not be listed, or a process in it could not be read (it is listed by
// pid alone, state "?"). It is never a reason to think the tree empty.
func (t *Tree) Survivors(cmdlineMax int) ([]procfs.Proc, error) {
	var pids []int
	err := fdreserve.Do(func() (err error) { pids, err = t.allPIDs(); return err })
	var out []procfs.Proc
	for _, pid := range pids {
		p, perr := t.fs.Proc(pid, cmdlineMax)
		switch {
		case perr == nil:
			out = append(out, p)
		case errors.Is(perr, procfs.ErrNoProcess):
			// gone since the list was made
		default:
			out = append(out, procfs.Proc{PID: pid, State: "?"})
			err = errors.Join(err, fmt.Errorf("pid %d: %w", pid, perr))
		}
	}
	if err != nil {
		err = fmt.Errorf("survivors not known: %w", err)
	}
	return out, err
}
