// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup

import (
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/landlock"
)

// A confined agent is forked, without the exec stage, from a thread of
// its own: landlock_restrict_self(2) confines the calling thread only, and
// a child is born with the credentials (the Landlock domain among them)
// of the thread that forks it (clone(2)). The thread confines itself,
// forks the agent, and then stays, parked, for the agent's whole life:
// PR_SET_PDEATHSIG fires when the forking thread exits (see spawner.go),
// so the agent's parent-death signal still means "hermeskilld died".
//
// The thread is never given back. Its goroutine stays locked to it and
// returns, still locked, once the agent is reaped: the Go runtime then
// ends the thread (runtime.LockOSThread) instead of running another
// goroutine on it. While it lives, threads the runtime would start from
// it are started by the runtime's template thread instead (a locked
// thread's state may be peculiar: the runtime never clones it), so no
// other thread inherits the domain. Signals the runtime sends between
// its own threads (preemption) are not scoped: Landlock lets a thread
// signal the threads of its own process.
//
// One thread per live agent: supervise's one agent, not the daemon's
// thousands, which go through the exec stage (Options.ExecStage).

// confinedThread is the thread an agent was forked from; release ends
// it, once the agent is reaped.
type confinedThread struct {
	tid  int
	done chan struct{}
}

func (t *confinedThread) release() { close(t.done) }

// forkConfined forks the agent from a new thread confined by r (on a
// kernel of Landlock ABI abi), inside network namespace netns when it is
// > 0. An error from the confinement is a *ConfineError (nothing was
// run); the fork's is os.StartProcess's.
func forkConfined(r landlock.Ruleset, abi int, argv0 string, argv []string, attr *os.ProcAttr, netns int) (*os.Process, *confinedThread, error) {
	t := &confinedThread{done: make(chan struct{})}
	reply := make(chan spawnResult, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: returning ends the thread, and its domain.
		t.tid = unix.Gettid()
		if netns > 0 {
			// A child is born in its forking thread's namespace; this
			// thread never returns to ours.
			if err := unix.Setns(netns, unix.CLONE_NEWNET); err != nil {
				reply <- spawnResult{nil, os.NewSyscallError("setns", err)}
				return
			}
		}
		if err := landlock.RestrictSelf(r, abi); err != nil {
			reply <- spawnResult{nil, &ConfineError{err}}
			return
		}
		p, err := os.StartProcess(argv0, argv, attr)
		reply <- spawnResult{p, err}
		if err != nil {
			return
		}
		<-t.done
	}()
	res := <-reply
	return res.p, t, res.err
}
