// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup

import (
	"fmt"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not
// the process (prctl(2): "the parent ... is considered to be the thread that
// created this process"). The Go runtime may start a child from any thread
// and terminates threads whose goroutine exits while locked to them. So
// every child is forked from one goroutine locked to its thread for the
// life of the process: that thread ends only when the process does, and the
// parent-death signal then means exactly "hermeskilld died".

type spawnReq struct {
	argv0 string
	argv  []string
	attr  *os.ProcAttr
	netns int // > 0: fork inside this network namespace
	reply chan spawnResult
}

type spawnResult struct {
	p   *os.Process
	err error
}

var (
	spawnOnce sync.Once
	spawnCh   chan spawnReq
)

func spawner() chan spawnReq {
	spawnOnce.Do(func() {
		spawnCh = make(chan spawnReq)
		go func() {
			runtime.LockOSThread()
			// Never unlocked and never returns: see above.
			home, homeErr := os.Open("/proc/thread-self/ns/net")
			var stuck error // the thread could not return to our namespace
			for req := range spawnCh {
				switch {
				case stuck != nil:
					// Any child would be born in an agent's namespace.
					req.reply <- spawnResult{nil, fmt.Errorf("the forking thread is stuck in an agent's network namespace: %w", stuck)}
				case req.netns <= 0:
					p, err := os.StartProcess(req.argv0, req.argv, req.attr)
					req.reply <- spawnResult{p, err}
				case homeErr != nil:
					req.reply <- spawnResult{nil, fmt.Errorf("no fork in another network namespace: %w", homeErr)}
				default:
					req.reply <- forkIn(req)
					if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
						stuck = os.NewSyscallError("setns back", err)
					}
				}
			}
		}()
	})
	return spawnCh
}

// forkIn forks req inside its network namespace: a child is born in its
// forking thread's namespace (setns(2): the namespace is the thread's),
// so the spawner thread enters it for the fork; the caller returns it.
func forkIn(req spawnReq) spawnResult {
	if err := unix.Setns(req.netns, unix.CLONE_NEWNET); err != nil {
		return spawnResult{nil, os.NewSyscallError("setns", err)}
	}
	p, err := os.StartProcess(req.argv0, req.argv, req.attr)
	return spawnResult{p, err}
}

// startProcess forks on the spawner thread, inside network namespace
// netns when it is > 0.
func startProcess(argv0 string, argv []string, attr *os.ProcAttr, netns int) (*os.Process, error) {
	reply := make(chan spawnResult, 1)
	spawner() <- spawnReq{argv0: argv0, argv: argv, attr: attr, netns: netns, reply: reply}
	r := <-reply
	return r.p, r.err
}
