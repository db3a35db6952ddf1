// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/fdreserve"
	"github.com/hermeskill/hermeskilld/internal/landlock"
	"github.com/hermeskill/hermeskilld/internal/procfs"
)

// Runtime starts and reaps children. There is one per process.
type Runtime struct {
	reaper       *reaper
	pid1         bool
	pollWait     bool
	samplerFiles int
	fs           procfs.FS
	scans        *scanner

	mu      sync.Mutex
	helpers map[int]bool // live children started with Spec.Helper

	landlockABI int
}

// Options configure a Runtime.
type Options struct {
	// OnOrphan, when set, sees every orphan reaped.
	OnOrphan func(pid int, status unix.WaitStatus)
	// PollWait waits for each child's exit on its pidfd through the
	// netpoller instead of a thread blocked in waitid(2): no thread per
	// child (the daemon, with hundreds of agents), at the price of a
	// netpoller wake-up (a fraction of a millisecond) before the reap.
	PollWait bool
	// SamplerFiles bounds the /proc/PID/stat files each tree's kernel
	// checks keep open between samples (procfs.NewSampler); 0 means
	// procfs.DefaultSamplerFiles. A daemon of many agents keeps a few
	// per agent, so that what an agent holds is bounded (its descriptor
	// budget).
	SamplerFiles int
}

// NewRuntime makes this process a child subreaper (prctl(2)
// PR_SET_CHILD_SUBREAPER: orphaned descendants are reparented to us instead
// of init, so they stay in reach and get reaped) and starts the reaper.
func NewRuntime(opts Options) (*Runtime, error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, os.NewSyscallError("prctl PR_SET_CHILD_SUBREAPER", err)
	}
	spawner() // start the forking thread now, while the caller sets up
	// Descriptors for the kill path and the record, held before any agent
	// starts (nothing an agent does can then take them all).
	_ = fdreserve.Hold()
	fs := procfs.Default()
	return &Runtime{reaper: newReaper(opts.OnOrphan), pid1: os.Getpid() == 1, pollWait: opts.PollWait,
		samplerFiles: opts.SamplerFiles, fs: fs, scans: newScanner(fs), helpers: make(map[int]bool), landlockABI: landlock.ABI()}, nil
}

// LandlockABI is the kernel's Landlock ABI version, 0 without Landlock
// (package landlock): what Spec.Landlock can ask for.
func (rt *Runtime) LandlockABI() int { return rt.landlockABI }

// Close stops the reaper (once; later calls return at once). Children
// still running are not touched.
func (rt *Runtime) Close() { rt.reaper.close() }

// IsPID1 reports whether we are a PID namespace's init.
func (rt *Runtime) IsPID1() bool { return rt.pid1 }

// OrphansReaped counts orphans reaped so far.
func (rt *Runtime) OrphansReaped() uint64 { return rt.reaper.orphans.Load() }

// HasChildren reports whether we have any child left, running or zombie,
// other than our helpers.
func (rt *Runtime) HasChildren() bool {
	if !hasChildren() {
		return false
	}
	rt.mu.Lock()
	helpers := len(rt.helpers)
	rt.mu.Unlock()
	if helpers == 0 {
		return true
	}
	// A helper is a child too: look for any other. (The kernel lists a
	// task's children only with CONFIG_PROC_CHILDREN; the scan of /proc
	// works everywhere.)
	snap, err := rt.scans.Scan()
	if err != nil {
		return true // fail closed: the tree is not known to be empty
	}
	self := os.Getpid()
	for pid, st := range snap {
		if st.PPID == self && !rt.IsHelper(pid) {
			return true
		}
	}
	return false
}

// hasZombie reports whether a child of ours other than a helper has
// exited and is not reaped yet. Cheaper than HasChildren (no scan of /proc)
// but blind to live children; when the zombie the kernel names is a
// helper's, it asks HasChildren.
func (rt *Runtime) hasZombie() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if err != nil {
		return false // ECHILD: no child at all
	}
	pid := siginfoPID(&info)
	if pid == 0 {
		return false // children, none exited
	}
	if !rt.IsHelper(pid) {
		return true
	}
	return rt.HasChildren()
}

// IsHelper reports whether pid is a live child started with Spec.Helper.
func (rt *Runtime) IsHelper(pid int) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.helpers[pid]
}

// Start runs spec in its own process group, with PR_SET_PDEATHSIG=SIGKILL,
// and starts the one goroutine that waits on it.
func (rt *Runtime) Start(spec Spec) (*Process, error) {
	if len(spec.Argv) == 0 {
		return nil, &StartError{Code: 127, Err: errors.New("empty command")}
	}
	path := spec.Path
	if path == "" {
		path = spec.Argv[0]
	}
	if filepath.Base(path) == path {
		var err error
		if path, err = lookPath(path); err != nil {
			return nil, err
		}
	}
	files := []*os.File{spec.Stdin, spec.Stdout, spec.Stderr}
	var devnull *os.File
	for i, f := range files {
		if f != nil {
			continue
		}
		if devnull == nil {
			var err error
			if devnull, err = os.OpenFile(os.DevNull, os.O_RDWR, 0); err != nil {
				return nil, err
			}
			defer devnull.Close()
		}
		files[i] = devnull
	}
	sys := &syscall.SysProcAttr{
		// Its own process group: signals to the group reach the agent
		// and its children, not us; a terminal's Ctrl-C reaches us, or
		// only the agent when it is given the terminal (Foreground).
		Setpgid: true,
		// If we die (even by SIGKILL) the agent dies too. Go's fork code
		// re-checks getppid() after the prctl, closing the race with a
		// parent that died during the fork.
		Pdeathsig:  syscall.SIGKILL,
		Credential: spec.Credential,
	}
	if spec.Foreground != nil && !spec.Helper {
		// Still its own group (Foreground implies Setpgid), now the
		// terminal's foreground one. Ctty is our descriptor: the ioctl
		// runs before the child's descriptors are rearranged.
		sys.Foreground, sys.Ctty = true, int(spec.Foreground.Fd())
	}
	if spec.Helper {
		sys.Setpgid, sys.Setsid, sys.Pdeathsig = false, true, 0
	}
	if spec.CgroupFD > 0 {
		sys.UseCgroupFD, sys.CgroupFD = true, spec.CgroupFD
	}
	pidfd := -1
	if rt.pollWait {
		// Our own pidfd, to wait on in the netpoller. os.Process keeps a
		// duplicate of it, released below: one pidfd per child.
		sys.PidFD = &pidfd
	}
	exe, argv := path, spec.Argv
	var stage, stageW *os.File
	if spec.Landlock.Restricts() && !spec.Helper {
		var err error
		if exe, argv, stage, stageW, err = rt.confined(spec.Landlock, path, spec.Argv); err != nil {
			return nil, err
		}
		defer stage.Close()
		defer stageW.Close()
		files = append(files, stageW) // the stage's descriptor 3
	}
	attr := &os.ProcAttr{Dir: spec.Dir, Env: spec.Env, Files: files, Sys: sys}

	rt.reaper.mu.Lock()
	started := time.Now()
	p, err := startProcess(exe, argv, attr, spec.NetNS)
	if err != nil {
		rt.reaper.mu.Unlock()
		if stage != nil {
			return nil, &ConfineError{fmt.Errorf("the exec stage: %w", err)}
		}
		return nil, startError(spec.Argv[0], err)
	}
	rt.reaper.manageLocked(p.Pid)
	rt.reaper.mu.Unlock()
	runtime.KeepAlive(spec.Foreground)

	proc := &Process{proc: p, pid: p.Pid, started: started, done: make(chan struct{})}
	if pidfd >= 0 {
		if f, err := newPidfdFile(pidfd); err == nil {
			// The child is ours to wait on and signal through this pidfd
			// alone: os.Process's duplicate goes (Release closes it).
			_ = p.Release()
			proc.proc, proc.pidfd = nil, f
		}
		// Otherwise (fcntl failed: it closed ours) os.Process waits on
		// its own, as without PollWait.
	}
	if spec.Helper {
		rt.mu.Lock()
		rt.helpers[p.Pid] = true
		rt.mu.Unlock()
		proc.reaped = func() {
			rt.mu.Lock()
			delete(rt.helpers, p.Pid)
			rt.mu.Unlock()
		}
	}
	go proc.wait(rt.reaper)
	if stage != nil {
		stageW.Close() // ours: end of file once the stage's copy closes
		if err := stageResult(stage, spec.Argv[0], path); err != nil {
			// Gone before we return, as a failed fork/exec is: its
			// process group and cgroup are empty again.
			_ = proc.Signal(syscall.SIGKILL)
			<-proc.Done()
			return nil, err
		}
	}
	return proc, nil
}
