// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package keeper

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/cgroup"
	"github.com/hermeskill/hermeskilld/internal/procfs"
	"github.com/hermeskill/hermeskilld/internal/runjournal"
)

// Main runs the keeper and exits when this process was started as one
// (Start sets its environment and its arguments); it returns at once
// otherwise. main, and the TestMain of every test binary that starts a
// keeper, call it first.
//
// The variable alone does not make a keeper: one inherited or set by
// mistake (HERMESKILL_KEEPER=1 hermeskilld supervise -- …) would turn
// supervise into a keeper that never runs the command and exits 0. It is
// removed, and hermeskilld goes on as asked.
func Main() {
	if os.Getenv(envName) == "" {
		return
	}
	owner, ok := keeperArgs(os.Args)
	if os.Getenv(envName) != envValue || !ok {
		os.Unsetenv(envName)
		return
	}
	os.Unsetenv(envName)
	// hermeskilld starts a confined agent without waiting for us to run,
	// and may have died since: we are then another's child (its
	// subreaper's, or init's), and what its pipe says is all there is to
	// go by (its pid may be another process's already).
	alive := owner == os.Getppid()
	// Signals meant for hermeskilld or its terminal are not ours: only a
	// disarm or the end of the pipe ends a keeper. Ignored before the
	// ready line, whose write fails with EPIPE (SIGPIPE, fatal on our
	// stdout) when hermeskilld is gone already.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE,
		syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGUSR1, syscall.SIGUSR2)
	// Nobody but root may open our descriptors (the pipe from hermeskilld)
	// through /proc, nor ptrace us: not even an agent of our user.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	// Until this line, hermeskilld starts no unconfined agent.
	_, _ = os.Stdout.WriteString(readyLine)
	os.Exit(serve(os.Stdin, os.Stderr, owner, alive))
}

// keeperArgs reports whether args are those Start gives a keeper, and
// the pid of the hermeskilld they name.
func keeperArgs(args []string) (int, bool) {
	if len(args) != 4 || args[1] != "keeper" || args[2] != "--for" {
		return 0, false
	}
	pid, err := strconv.Atoi(args[3])
	if err != nil || pid <= 0 || strconv.Itoa(pid) != args[3] {
		return 0, false
	}
	return pid, true
}

// Bounds of the kill after hermeskilld died.
const (
	killPasses = 100
	killBound  = 2 * time.Second
)

// watch is what one run's processes can be found by.
type watch struct {
	key, value string // environment entry every process of the run inherits
	pgid       int    // the run's process group (its main process's pid)
	pgidStart  uint64 // the main process's start time
	pids       map[int]uint64
}

// state is what the keeper was told.
type state struct {
	journal string // where the record of the kill goes; "" for none
	cgroups []cgroupWatch
	runs    map[uint64]*watch
	since   uint64 // hermeskilld's start time
}

type cgroupWatch struct {
	base  string
	owner cgroup.Owner
}

// drainWait is how long the keeper reads on after hermeskilld's exit was
// seen, for what hermeskilld wrote before it (a disarm on a clean exit):
// a pipe that still has a writer then is held by someone else.
const drainWait = 200 * time.Millisecond

// serve reads messages until a disarm (exit quietly) or hermeskilld's end
// — the end of the pipe, or its exit seen on a pidfd, whichever comes
// first: whoever else holds a write end of the pipe cannot keep us waiting
// (fail closed: kill what it supervised). owner is hermeskilld's pid;
// alive, that it was still our parent as we began (else it died before
// we ran, and the pipe's end is all we go by).
//
// The first line is the key ("key HEX"); every later line is "HEX
// MESSAGE", and a line without the key is reported and ignored: only
// hermeskilld, which chose the key and wrote it first, can disarm us, end
// a run or name a process to kill.
func serve(in io.Reader, report io.Writer, owner int, alive bool) int {
	fs := procfs.Default()
	st := &state{runs: make(map[uint64]*watch)}
	var gone <-chan struct{}
	if alive {
		// Every agent process started after hermeskilld: only those
		// have their environment read. Taken now, while hermeskilld
		// lives. (Gone, its pipe has no writer left: its end of file
		// comes once read.)
		st.since = startOf(fs, owner)
		gone = ownerExit(owner)
	}
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 0, 4096), 1<<16)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var drain <-chan time.Time
	var key string
	ignored := 0
read:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				break read
			}
			if key == "" {
				k, ok := strings.CutPrefix(line, "key ")
				if !ok || len(k) < 32 {
					ignored++
					continue
				}
				key = k
				continue
			}
			msg, ok := strings.CutPrefix(line, key+" ")
			if !ok {
				if ignored++; ignored <= 10 {
					fmt.Fprintf(report, "hermeskilld keeper: a message without hermeskilld's key, ignored\n")
				}
				continue
			}
			if msg == "disarm" {
				return 0
			}
			if err := st.apply(msg); err != nil {
				fmt.Fprintf(report, "hermeskilld keeper: %v\n", err)
			}
		case <-gone:
			gone = nil
			drain = time.After(drainWait)
		case <-drain:
			fmt.Fprintf(report, "hermeskilld keeper: hermeskilld (pid %d) exited but its pipe is still held open by another process\n", owner)
			break read
		}
	}
	// End of file, a read error, or hermeskilld's exit: either way
	// hermeskilld no longer speaks to us. Fail closed.
	began := time.Now()
	killed, removed, err := st.killAll(fs)
	if killed > 0 || len(removed) > 0 || err != nil {
		fmt.Fprintf(report, "hermeskilld keeper: hermeskilld (pid %d) is gone; killed %d process(es) of its agents and removed %d cgroup(s) in %s\n",
			owner, killed, len(removed), time.Since(began).Round(time.Millisecond))
	}
	// Recorded even when nothing was left to kill (the main processes
	// died by their parent-death signal first): each run is a death.
	if killed > 0 || len(removed) > 0 || len(st.runs) > 0 || err != nil {
		if jerr := st.record(owner, began, killed, removed, err); jerr != nil {
			fmt.Fprintf(report, "hermeskilld keeper: the kill not journalled: %v\n", jerr)
		}
	}
	if err != nil {
		fmt.Fprintf(report, "hermeskilld keeper: %v\n", err)
		return 1
	}
	return 0
}

// record journals the kill, for the next hermeskilld start to write each
// agent's certificate (package runjournal).
func (st *state) record(owner int, at time.Time, killed int, removed []string, err error) error {
	if st.journal == "" {
		return nil
	}
	k := &runjournal.Killed{At: at.UTC(), Owner: owner, Keeper: os.Getpid(), Processes: killed}
	for _, d := range removed {
		k.Cgroups = append(k.Cgroups, filepath.Base(d))
	}
	for _, w := range st.runs {
		k.Runs = append(k.Runs, w.key+"="+w.value)
	}
	if err != nil {
		k.Error = err.Error()
	}
	return runjournal.WriteKilled(st.journal, k)
}

// ownerExit is closed when pid exits, as a pidfd says; nil (never closed)
// where pidfds are not available, and then the pipe's end is all we go by.
func ownerExit(pid int) <-chan struct{} {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil
	}
	ch := make(chan struct{})
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, -1)
			if err == unix.EINTR {
				continue
			}
			if err != nil || n > 0 {
				close(ch)
				return
			}
		}
	}()
	return ch
}

var errBadMessage = errors.New("bad message")

// apply applies one message.
func (st *state) apply(line string) error {
	f := strings.Fields(line)
	bad := fmt.Errorf("%w: %q", errBadMessage, line)
	if len(f) == 0 {
		return bad
	}
	nums := func(from int) ([]uint64, bool) {
		var out []uint64
		for _, s := range f[from:] {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return nil, false
			}
			out = append(out, n)
		}
		return out, true
	}
	switch f[0] {
	case "journal":
		dir, err := strconv.Unquote(strings.TrimPrefix(line, "journal "))
		if err != nil || !filepath.IsAbs(dir) {
			return bad
		}
		st.journal = dir
	case "cgroup":
		if len(f) != 5 {
			return bad
		}
		base, err := strconv.Unquote(f[1])
		n, ok := nums(2)
		if err != nil || !ok {
			return bad
		}
		st.cgroups = append(st.cgroups, cgroupWatch{base, cgroup.Owner{PID: int(n[0]), Start: n[1], PIDNS: n[2]}})
	case "run":
		// The marker is quoted and may hold spaces: everything after N.
		parts := strings.SplitN(line, " ", 3)
		if len(parts) != 3 {
			return bad
		}
		n, err := strconv.ParseUint(parts[1], 10, 64)
		marker, qerr := strconv.Unquote(parts[2])
		key, value, ok := strings.Cut(marker, "=")
		if err != nil || qerr != nil || !ok || key == "" {
			return bad
		}
		st.runs[n] = &watch{key: key, value: value, pids: make(map[int]uint64)}
	case "group", "pid":
		n, ok := nums(1)
		if !ok || len(n) != 3 {
			return bad
		}
		w := st.runs[n[0]]
		if w == nil {
			return fmt.Errorf("%w: run %d unknown: %q", errBadMessage, n[0], line)
		}
		if f[0] == "group" {
			w.pgid, w.pgidStart = int(n[1]), n[2]
		} else {
			w.pids[int(n[1])] = n[2]
		}
	case "end":
		n, ok := nums(1)
		if !ok || len(n) != 1 {
			return bad
		}
		delete(st.runs, n[0])
	default:
		return bad
	}
	return nil
}

// killAll kills everything the keeper was told about: the cgroups first
// (one write each kills a whole tree), then the runs without a cgroup.
func (st *state) killAll(fs procfs.FS) (killed int, removed []string, err error) {
	type reaped struct {
		dirs []string
		err  error
	}
	done := make(chan reaped, 1)
	go func() {
		var r reaped
		var errs []error
		for _, cw := range st.cgroups {
			dirs, err := cgroup.ReapOwned(cw.base, cw.owner)
			r.dirs = append(r.dirs, dirs...)
			if err != nil {
				errs = append(errs, err)
			}
		}
		r.err = errors.Join(errs...)
		done <- r
	}()
	killed, kerr := st.killRuns(fs)
	r := <-done
	return killed, r.dirs, errors.Join(kerr, r.err)
}

// killRuns kills the processes of the runs in passes: the process groups
// in one call each, then every process that belongs to a run by group,
// by having been seen in its tree, or by its environment, with all their
// descendants, until a pass finds nobody not already killed.
func (st *state) killRuns(fs procfs.FS) (int, error) {
	if len(st.runs) == 0 {
		return 0, nil
	}
	self := os.Getpid()
	killed := make(map[int]uint64)
	deadline := time.Now().Add(killBound)
	for pass := 0; pass < killPasses && time.Now().Before(deadline); pass++ {
		snap, err := fs.Scan()
		if err != nil {
			return len(killed), fmt.Errorf("kill agents: %w", err)
		}
		groups := make(map[int]bool)
		for _, w := range st.runs {
			if w.pgid > 0 && groupIsRuns(snap, w) {
				groups[w.pgid] = true
				_ = unix.Kill(-w.pgid, unix.SIGKILL)
			}
		}
		var seeds []int
		for pid, ps := range snap {
			if pid == self || pid == 1 || ps.State == 'Z' {
				continue
			}
			if groups[ps.PGID] || st.owns(fs, pid, ps) {
				seeds = append(seeds, pid)
			}
		}
		fresh := 0
		for _, pid := range snap.Descendants(seeds...) {
			ps := snap[pid]
			if pid == self || ps.State == 'Z' {
				continue
			}
			if start, ok := killed[pid]; ok && start == ps.StartTimeTicks {
				continue // killed already, dying
			}
			if killPID(fs, pid, ps.StartTimeTicks) {
				killed[pid] = ps.StartTimeTicks
				fresh++
			}
		}
		if fresh == 0 {
			return len(killed), nil
		}
	}
	pids := make([]int, 0, len(killed))
	for pid := range killed {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	return len(killed), fmt.Errorf("kill agents: processes still appearing after %d passes (killed %v)", killPasses, pids)
}

// owns reports whether a process belongs to one of the runs by having
// been seen in its tree or by its environment (process groups are
// matched by the caller).
func (st *state) owns(fs procfs.FS, pid int, ps procfs.Stat) bool {
	for _, w := range st.runs {
		if start, ok := w.pids[pid]; ok && start == ps.StartTimeTicks {
			return true
		}
	}
	// Every agent process started after hermeskilld: older ones are never
	// read (and processes of other users cannot be, without root).
	if ps.StartTimeTicks < st.since {
		return false
	}
	for _, w := range st.runs {
		if v, ok, err := fs.EnvironValue(pid, w.key); err == nil && ok && v == w.value {
			return true
		}
	}
	return false
}

// groupIsRuns reports whether the process group id still means the run's
// group: a live process with that pid that leads a group must be its main
// process (same start time); any other would be a recycled pid leading a
// group of its own. A gone leader leaves the id to its remaining members.
func groupIsRuns(snap procfs.Snapshot, w *watch) bool {
	leader, ok := snap[w.pgid]
	return !ok || leader.StartTimeTicks == w.pgidStart || leader.PGID != w.pgid
}

// killPID sends SIGKILL to pid through a pidfd if it is still the process
// that started at start.
func killPID(fs procfs.FS, pid int, start uint64) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if ps, err := fs.Stat(pid); err != nil || ps.StartTimeTicks != start {
		return false
	}
	return unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil
}

// startOf is pid's start time, 0 when it cannot be read.
func startOf(fs procfs.FS, pid int) uint64 {
	ps, err := fs.Stat(pid)
	if err != nil {
		return 0
	}
	return ps.StartTimeTicks
}
