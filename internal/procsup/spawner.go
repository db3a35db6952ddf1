// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup

import (
	"os"
	"runtime"
	"sync"
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
			for req := range spawnCh {
				p, err := os.StartProcess(req.argv0, req.argv, req.attr)
				req.reply <- spawnResult{p, err}
			}
		}()
	})
	return spawnCh
}

// startProcess forks on the spawner thread.
func startProcess(argv0 string, argv []string, attr *os.ProcAttr) (*os.Process, error) {
	reply := make(chan spawnResult, 1)
	spawner() <- spawnReq{argv0: argv0, argv: argv, attr: attr, reply: reply}
	r := <-reply
	return r.p, r.err
}
