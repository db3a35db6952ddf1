// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/cgroup"
	"github.com/hermeskill/hermeskilld/internal/fdreserve"
	"github.com/hermeskill/hermeskilld/internal/procfs"
)

// Containment modes.
const (
	ModeCgroup = "cgroup"
	ModePgroup = "pgroup"
)

// Tree is one agent's process tree: its main process and every descendant.
// With a cgroup it is the cgroup's members; without, it is every
// descendant of the main process found in /proc — so a grandchild that
// called setsid() is still found — plus orphans reparented to us that
// belong to this agent. Membership is never granted by process group id
// alone: any process of the agent's session may join the agent's group
// with setpgid(2), whereas descent from the main process cannot be faked.
type Tree struct {
	rt        *Runtime
	main      *Process
	mainStart uint64
	id        string
	cg        *cgroup.Group
	fs        procfs.FS
	self      int
	// exclusive: this runtime supervises only this agent, so every child
	// of ours but our helpers is the agent's (supervise). The daemon
	// shares its children among agents and attributes orphans instead.
	exclusive bool
	onMember  func(pid int, start uint64)

	freezeWait time.Duration // bounds the autopsy's freeze; 0: autopsyFreeze
	sample     sampling      // owned by the sampling goroutine
	noMemory   bool          // the cgroup has no memory.current

	mu     sync.Mutex
	known  map[int]uint64 // pid -> start time of every process seen in the tree
	killed map[int]uint64 // live processes the ladder signalled
	frozen string         // how Freeze froze the tree (FrozenCgroup, FrozenSIGSTOP); "": not frozen
}

// TreeOptions configures NewTree.
type TreeOptions struct {
	AgentID   string
	Cgroup    *cgroup.Group // nil: process-group containment
	Exclusive bool
	FS        procfs.FS // zero: /proc
	// OnMember, when set, learns each process found in the tree for the
	// first time (process-group containment only: a cgroup needs no
	// list). The keeper uses it to find them should we die.
	OnMember func(pid int, start uint64)
}

// NewTree tracks the tree rooted at main.
func NewTree(rt *Runtime, main *Process, o TreeOptions) *Tree {
	fs := o.FS
	if fs.Root == "" {
		fs = procfs.Default()
	}
	t := &Tree{rt: rt, main: main, id: o.AgentID, cg: o.Cgroup, fs: fs, self: os.Getpid(),
		exclusive: o.Exclusive, onMember: o.OnMember, known: make(map[int]uint64), killed: make(map[int]uint64)}
	// Until reaped, the main process (even a zombie) keeps its /proc entry.
	if st, err := fs.Stat(main.PID()); err == nil {
		t.mainStart = st.StartTimeTicks
		t.known[main.PID()] = st.StartTimeTicks
	}
	return t
}

// Mode is "cgroup" or "pgroup".
func (t *Tree) Mode() string {
	if t.cg != nil {
		return ModeCgroup
	}
	return ModePgroup
}

// Main is the main process.
func (t *Tree) Main() *Process { return t.main }

// MainStartTicks is the main process's start time (proc(5) stat field
// 22), 0 when it could not be read: with its pid, the main process's
// identity, and the identity of the agent's process group.
func (t *Tree) MainStartTicks() uint64 { return t.mainStart }

// Cgroup is the agent's cgroup, nil in process-group mode.
func (t *Tree) Cgroup() *cgroup.Group { return t.cg }

// MainExited is closed once the main process has been reaped.
func (t *Tree) MainExited() <-chan struct{} { return t.main.Done() }

func (t *Tree) mainReaped() bool {
	select {
	case <-t.main.Done():
		return true
	default:
		return false
	}
}

// SignalMain signals the main process through its pidfd.
func (t *Tree) SignalMain(sig syscall.Signal) error { return t.main.Signal(sig) }

// Contains reports whether pid is in the tree. It returns an error
// matching procfs.ErrNoProcess when pid does not exist (any more).
func (t *Tree) Contains(pid int) (bool, error) {
	if t.cg != nil {
		ok, err := t.cg.Contains(pid)
		if err == nil && !ok {
			// Not in the cgroup, or gone: only the latter is unverifiable.
			if _, serr := t.fs.Stat(pid); errors.Is(serr, procfs.ErrNoProcess) {
				return false, serr
			}
		}
		return ok, err
	}
	return t.containsPgroup(pid)
}

// containsPgroup walks pid's ancestry: a member is the main process, a
// process seen in the tree before, or descends from one of those or from
// an orphan of ours attributed to this agent.
func (t *Tree) containsPgroup(pid int) (bool, error) {
	mainPID := t.main.PID()
	for i := 0; i < 128 && pid > 0; i++ {
		st, err := t.fs.Stat(pid)
		if err != nil {
			if i == 0 {
				return false, err
			}
			return false, nil // an ancestor vanished mid-walk: be strict
		}
		if t.memberStat(pid, st, mainPID) {
			return true, nil
		}
		if st.PPID == t.self {
			return t.attribute(pid, st), nil
		}
		pid = st.PPID
	}
	return false, nil
}

func (t *Tree) memberStat(pid int, st procfs.Stat, mainPID int) bool {
	if pid == mainPID && st.StartTimeTicks == t.mainStart {
		return true
	}
	t.mu.Lock()
	start, ok := t.known[pid]
	t.mu.Unlock()
	return ok && start == st.StartTimeTicks
}

// attribute decides whether a direct child of ours (other than the main
// process) is this agent's orphan.
func (t *Tree) attribute(pid int, st procfs.Stat) bool {
	if pid == t.main.PID() {
		return st.StartTimeTicks == t.mainStart
	}
	if t.rt.IsHelper(pid) {
		return false // ours (the keeper), never the agent's
	}
	if t.exclusive {
		return true
	}
	// The daemon: the orphan's environment names its agent (inherited
	// from the agent's environment; used for attribution only, never
	// stored). A process that rewrote its environment is missed here but
	// not by a cgroup.
	v, ok, err := t.fs.EnvironValue(pid, EnvAgentID)
	return err == nil && ok && v == t.id
}

// members lists the live processes of the tree (zombies excluded) with
// their start times, and remembers them.
func (t *Tree) members() (map[int]uint64, error) {
	stats, err := t.memberStats()
	if err != nil {
		return nil, err
	}
	out := make(map[int]uint64, len(stats))
	for pid, st := range stats {
		out[pid] = st.StartTimeTicks
	}
	return out, nil
}

// memberStats is members with each process's stat.
func (t *Tree) memberStats() (map[int]procfs.Stat, error) {
	if t.cg != nil {
		pids, err := t.cg.PIDs()
		if err != nil {
			return nil, err
		}
		out := make(map[int]procfs.Stat, len(pids))
		for _, pid := range pids {
			if st, err := t.fs.Stat(pid); err == nil && st.State != 'Z' {
				out[pid] = st
			}
		}
		return out, nil
	}
	snap, err := t.scan()
	if err != nil {
		return nil, err
	}
	mainPID := t.main.PID()
	var roots []int
	for pid, st := range snap {
		if t.memberStat(pid, st, mainPID) || (st.PPID == t.self && t.attribute(pid, st)) {
			roots = append(roots, pid)
		}
	}
	out := make(map[int]procfs.Stat)
	for _, pid := range snap.Descendants(roots...) {
		if st := snap[pid]; st.State != 'Z' {
			out[pid] = st
		}
	}
	var fresh []int
	t.mu.Lock()
	for pid, st := range out {
		if prev, ok := t.known[pid]; !ok || prev != st.StartTimeTicks {
			t.known[pid] = st.StartTimeTicks
			fresh = append(fresh, pid)
		}
	}
	t.mu.Unlock()
	if t.onMember != nil {
		for _, pid := range fresh {
			t.onMember(pid, out[pid].StartTimeTicks)
		}
	}
	return out, nil
}

// PIDs lists the live processes of the tree, sorted.
func (t *Tree) PIDs() ([]int, error) {
	m, err := t.members()
	if err != nil {
		return nil, err
	}
	pids := make([]int, 0, len(m))
	for pid := range m {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	return pids, nil
}

// SignalTree sends sig to every live process of the tree and reports how
// many it reached. Each is signalled through a pidfd after checking its
// start time, so a recycled pid is never hit. Without a cgroup the
// agent's process group is first signalled in one call (see signalGroup):
// under a fork bomb, the processes forked while the tree is listed get
// the signal too, and one pass over a growing tree stays short.
func (t *Tree) SignalTree(sig syscall.Signal) (int, error) {
	group := t.signalGroup(sig)
	m, err := t.memberStats()
	if err != nil {
		return 0, err
	}
	n := 0
	began := time.Now()
	var failed error
	for pid, st := range m {
		if group && st.PGID == t.main.PID() {
			n++ // reached by the group signal
			continue
		}
		if time.Since(began) > signalBound {
			break // a tree this big gets SIGKILL (cgroup.kill or KillTree's passes) soon enough
		}
		ok, err := t.signalPID(pid, st.StartTimeTicks, sig)
		if ok {
			n++
		}
		if err != nil && failed == nil {
			failed = err
		}
	}
	if sig == syscall.SIGTERM || sig == syscall.SIGKILL {
		kill := make(map[int]uint64, len(m))
		for pid, st := range m {
			kill[pid] = st.StartTimeTicks
		}
		t.noteKilled(kill)
	}
	return n, failed
}

// signalBound bounds SignalTree's one-by-one signals: a step of the
// ladder must not take long however big the tree.
const signalBound = 250 * time.Millisecond

// signalGroup signals the agent's process group (its id is the main
// process's pid) in one kill(2), where that is safe: only while the main
// process is not reaped. Until then its pid, hence the group's id, cannot
// be given to another process; once reaped, a new process could get that
// pid and lead a group of its own. (A process of the agent's session that
// joined the group with setpgid(2) gets the signal too: it put itself in
// the group of an agent being stopped.) It reports whether it signalled.
func (t *Tree) signalGroup(sig syscall.Signal) bool {
	if t.cg != nil || t.mainReaped() {
		return false
	}
	return unix.Kill(-t.main.PID(), sig) == nil
}

func (t *Tree) noteKilled(m map[int]uint64) {
	t.mu.Lock()
	for pid, start := range m {
		t.killed[pid] = start
	}
	t.mu.Unlock()
}

// SignalPID signals one process of the tree (the one that announced a
// DUMP_SIGNAL, say); a pid outside the tree is refused.
func (t *Tree) SignalPID(pid int, sig syscall.Signal) error {
	st, err := t.fs.Stat(pid)
	if err != nil {
		return err
	}
	if in, err := t.Contains(pid); err != nil || !in {
		return fmt.Errorf("pid %d: %w", pid, ErrNotInTree)
	}
	ok, err := t.signalPID(pid, st.StartTimeTicks, sig)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("pid %d: %w", pid, procfs.ErrNoProcess)
	}
	return nil
}

// ErrNotInTree: a pid asked to be signalled is not the agent's.
var ErrNotInTree = errors.New("not in the agent's process tree")

// signalPID signals pid if it is still the process that started at start.
// It reports whether it signalled; the error says it could not tell (no
// descriptor for the pidfd or for /proc, say): a process gone or
// recycled is no error.
func (t *Tree) signalPID(pid int, start uint64, sig syscall.Signal) (ok bool, err error) {
	// Two descriptors (the pidfd, the stat file) at once: on the reserve
	// when the table is full.
	err = fdreserve.Do(func() (err error) { ok, err = t.signalPIDOnce(pid, start, sig); return err })
	return ok, err
}

func (t *Tree) signalPIDOnce(pid int, start uint64, sig syscall.Signal) (bool, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return false, nil // gone already
	}
	if err != nil {
		return false, fmt.Errorf("pid %d: %w", pid, os.NewSyscallError("pidfd_open", err))
	}
	defer unix.Close(fd)
	// The pidfd pins whatever process has the pid now; the start time
	// proves it is the one we saw in the tree.
	st, err := t.fs.Stat(pid)
	switch {
	case errors.Is(err, procfs.ErrNoProcess):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("pid %d: %w", pid, err)
	case st.StartTimeTicks != start:
		return false, nil // recycled
	}
	err = unix.PidfdSendSignal(fd, sig, nil, 0)
	if errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pid %d: %w", pid, os.NewSyscallError("pidfd_send_signal", err))
	}
	return true, nil
}

// killPasses bounds the process-group kill loop against a fork bomb.
const killPasses = 100

// KillTree SIGKILLs every process of the tree: cgroup.kill with a cgroup,
// otherwise repeated passes over the tree until a pass finds nobody alive
// (a fork bomb's new children are found by the next pass; killed
// processes cannot fork any more).
func (t *Tree) KillTree() (int, string, error) {
	if t.cg != nil {
		// The list is for the count and the record only: cgroup.kill
		// needs none, so it is read in one pass before the kill and each
		// process's start time after it (the forensics never delay the
		// kill; a dying process keeps its stat until reaped, and one
		// already gone is recorded without).
		var pids []int
		_ = fdreserve.Do(func() (err error) { pids, err = t.cg.PIDs(); return err })
		err := fdreserve.Do(t.cg.Kill)
		m := make(map[int]uint64, len(pids))
		for _, pid := range pids {
			var start uint64
			if st, serr := t.fs.Stat(pid); serr == nil {
				start = st.StartTimeTicks
			}
			m[pid] = start
		}
		t.noteKilled(m)
		return len(pids), "cgroup.kill", err
	}
	seen := make(map[int]uint64)
	var failed error
	for pass := 0; pass < killPasses; pass++ {
		var m map[int]procfs.Stat
		err := fdreserve.Do(func() (err error) { m, err = t.memberStats(); return err })
		if err != nil {
			// The tree could not be listed (no descriptor for /proc, say).
			// The process group still dies, in one call that needs no
			// descriptor; the members outside it are unknown: try again,
			// and a step that cannot prove what it did is a failure.
			t.signalGroup(unix.SIGKILL)
			failed = err
			time.Sleep(killRetry)
			continue
		}
		// The whole process group in one call, cheap and immediate; the
		// rest one by one.
		group := t.signalGroup(unix.SIGKILL)
		fresh, passErr := 0, error(nil)
		for pid, st := range m {
			if prev, ok := seen[pid]; ok && prev == st.StartTimeTicks {
				continue // signalled already; dying
			}
			if !group || st.PGID != t.main.PID() {
				if _, err := t.signalPID(pid, st.StartTimeTicks, syscall.SIGKILL); err != nil {
					passErr = err // not seen: the next pass tries again
					continue
				}
			}
			seen[pid] = st.StartTimeTicks
			fresh++
		}
		failed = passErr
		if fresh == 0 && passErr == nil {
			break // a whole pass found nobody new alive
		}
		if passErr != nil {
			time.Sleep(killRetry)
		}
	}
	t.noteKilled(seen)
	if failed != nil {
		return len(seen), "signal", fmt.Errorf("not every process could be signalled: %w", failed)
	}
	return len(seen), "signal", nil
}

// killRetry spaces KillTree's passes after one failed.
const killRetry = 5 * time.Millisecond

// Empty reports whether the main process is reaped and nothing of the
// tree is left, zombies included.
func (t *Tree) Empty() bool {
	if !t.mainReaped() {
		return false
	}
	if t.cg != nil {
		// A live process of the agent is in its cgroup; one that exited
		// has left it, and if it was ours (an orphan reparented to us) the
		// reaper is about to collect it: wait for that, so what we report
		// reaped is reaped. No scan of /proc: this runs at every exit.
		populated, err := t.cg.Populated()
		if err != nil || populated {
			return false
		}
		return !t.exclusive || !t.rt.hasZombie()
	}
	if t.exclusive && t.rt.HasChildren() {
		return false // a child of ours: alive, or a zombie not reaped yet
	}
	if t.exclusive {
		return true // every descendant of the agent is a descendant of ours
	}
	m, err := t.members()
	return err == nil && len(m) == 0
}

// Killed is how many distinct live processes the ladder signalled with
// SIGTERM or SIGKILL.
func (t *Tree) Killed() map[int]uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[int]uint64, len(t.killed))
	for k, v := range t.killed {
		out[k] = v
	}
	return out
}

// Close releases what sampling held and the cgroup (removing it; it must
// be empty). Call it once nothing samples any more.
func (t *Tree) Close() error {
	t.sample.close()
	if t.cg == nil {
		return nil
	}
	return t.cg.Remove()
}

// scan is a snapshot of every process, shared with the runtime's other
// trees when they read the same /proc.
func (t *Tree) scan() (procfs.Snapshot, error) {
	if t.rt != nil && t.rt.scans != nil && t.rt.fs == t.fs {
		return t.rt.scans.Scan()
	}
	return t.fs.Scan()
}
