// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// execWait bounds awaitExec: the end of an execve(2) past its point of no
// return, microseconds unless the host is thrashing.
const execWait = 5 * time.Second

// awaitExec waits until the execve(2) that made p its command has
// finished. Start learns of the exec when a close-on-exec descriptor
// closes (Go's own pipe, or the exec stage's descriptor 3), and the kernel
// closes those early in execve(2), right after the new, still empty
// address space replaces the old; the program is mapped and its arguments
// put in place after. In between /proc/PID/cmdline is empty: a run
// reported as started (running in ps, with its pid) would be a process
// that no tool can tell by its command. The argument area is the last
// thing set up (create_elf_tables in fs/binfmt_elf.c), so a cmdline that
// reads is the agent's own command in place. A process that exits
// meanwhile ends the wait too, and so does execWait: the process exists
// and is past its exec.
func (rt *Runtime) awaitExec(p *Process) {
	path := filepath.Join(rt.fs.Root, strconv.Itoa(p.pid), "cmdline")
	deadline := time.Now().Add(execWait)
	for pause := 20 * time.Microsecond; ; pause = min(2*pause, 10*time.Millisecond) {
		if cmdlineSet(path) || time.Now().After(deadline) {
			return
		}
		t := time.NewTimer(pause)
		select {
		case <-p.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// cmdlineSet reports whether the cmdline file at path has a byte, or
// cannot be read (the process is gone: nothing to wait for).
func cmdlineSet(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return true
	}
	defer f.Close()
	var b [1]byte
	n, err := f.Read(b[:])
	return n > 0 || err != nil && !errors.Is(err, io.EOF)
}
