// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package keeper

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/cgroup"
	"github.com/hermeskill/hermeskilld/internal/procfs"
	"github.com/hermeskill/hermeskilld/internal/procsup"
)

// envName, set to envValue, makes Main run the keeper in a process.
const (
	envName  = "HERMESKILL_KEEPER"
	envValue = "1"
)

// selfExe is our own binary, even after it was replaced on disk (an
// upgrade): execve(2) of /proc/self/exe runs the file we were started from.
const selfExe = "/proc/self/exe"

// Bounds of what hermeskilld holds for a keeper that does not read.
const (
	// maxPending is how many bytes of messages may wait for the keeper;
	// past it, the processes seen in trees are no longer sent (runs and
	// groups still are).
	maxPending = 1 << 20
	// maxMembers is how many processes of one run are replayed to a
	// restarted keeper.
	maxMembers = 4096
	// restartDelay paces restarts of a keeper that keeps dying.
	restartDelay = time.Second
	// closeWait bounds how long Close waits for the keeper to exit.
	closeWait = 5 * time.Second
	// startWait bounds a keeper's start, from fork to readyLine (tens of
	// milliseconds on a loaded host).
	startWait = 10 * time.Second
	// stoppedCheck is how often the keeper is checked for being stopped.
	stoppedCheck = 100 * time.Millisecond
)

// Options configure Start.
type Options struct {
	Runtime *procsup.Runtime
	// Cgroups are reaped should we die; nil without cgroup containment.
	Cgroups *cgroup.Manager
	// JournalDir, when set, receives the keeper's record of what it
	// killed should we die (package runjournal).
	JournalDir string
	Log        *zap.Logger
	// Exe is the binary to run as the keeper; our own when empty. It must
	// call Main first thing.
	Exe string
	// Stderr receives the keeper's report of what it killed; nil is
	// ReportTo(os.Stderr).
	Stderr *os.File
}

// Keeper is hermeskilld's side of the keeper process: it starts the
// process, tells it what to kill, restarts it if it dies, and disarms it
// on a clean exit. Its methods are safe for concurrent use; a nil Keeper
// guards nothing.
type Keeper struct {
	o   Options
	log *zap.Logger

	// wmu is held while writing to w: one writer at a time, so lines
	// reach the keeper in the order they were queued. Taken before mu.
	wmu     sync.Mutex
	mu      sync.Mutex
	w       *os.File // write end of the pipe to the live keeper; nil while none
	proc    *procsup.Process
	pending []byte
	kick    chan struct{}
	runs    map[uint64]*Run
	// unproven counts the agents whose trees could not be proven gone
	// (see Unproven); with runs, what keeps Close from disarming.
	unproven int
	next     uint64
	closed   bool
	starts   int
	key      string // the live keeper's: every line to it starts with it

	first    chan struct{} // closed once the first keeper process is forked, or failed to be
	firstErr error         // why it failed; set before first is closed
	up       chan struct{} // closed once the first keeper process is ready, or failed to be
	upErr    error         // why it failed; set before up is closed

	stop chan struct{}
	done chan struct{}
}

// Start starts a keeper process in the background, so that the caller's
// own preparations overlap with it. The caller starts no agent before
// Forked (for an agent that cannot reach the keeper's descriptors) or
// Ready returns nil.
func Start(o Options) (*Keeper, error) {
	if o.Runtime == nil {
		return nil, errors.New("keeper: no runtime")
	}
	k := &Keeper{o: o, log: o.Log, kick: make(chan struct{}, 1), runs: make(map[uint64]*Run),
		first: make(chan struct{}), up: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	if k.log == nil {
		k.log = zap.NewNop()
	}
	go func() {
		defer close(k.done)
		proc, ar, err := k.fork()
		k.firstErr = err
		close(k.first)
		if err != nil {
			k.upErr = err
			close(k.up)
			return
		}
		k.upErr = k.awaitUp(proc, ar)
		close(k.up)
		if k.upErr != nil {
			return
		}
		select {
		case <-k.stop: // closed while it started
			return
		default:
		}
		k.loop()
	}()
	return k, nil
}

// Forked waits for the keeper process to exist (forked, not yet
// running: its own start takes milliseconds) and to have been written
// everything it was told so far. From then on a SIGKILL of hermeskilld
// leaves no agent process behind: what the keeper must kill is in its
// pipe before the agent's fork, and the keeper kills it once it runs,
// hermeskilld gone or not. What Forked does not wait for is the keeper
// becoming undumpable: until then an agent of our user could open its
// pipe through /proc. Start an agent after Forked only where it cannot
// (a Landlock domain: ptrace access, /proc/PID/fd included, to anything
// outside the domain is refused), and watch Ready then: an agent started
// before the keeper failed must be killed.
func (k *Keeper) Forked() error {
	if k == nil {
		return nil
	}
	<-k.first
	if k.firstErr != nil {
		return k.firstErr
	}
	return k.flush(true)
}

// Ready waits for the keeper process to be running and to have been
// written everything it was told so far (the cgroups, Guard's runs), and
// returns the error that kept it from that. Until it returns nil, a
// SIGKILL of hermeskilld would leave an agent's processes behind: start
// none before. A keeper that died and is not running again yet is an
// error: an agent started then would be guarded by nobody.
func (k *Keeper) Ready() error {
	if err := k.Up(); err != nil {
		return err
	}
	return k.flush(true)
}

// Up waits for the first keeper process to be ready, and returns the
// error that kept it from that. After Forked, it says whether an agent
// already started is guarded from now on; a keeper that dies later is
// restarted (and Forked and Ready fail meanwhile).
func (k *Keeper) Up() error {
	if k == nil {
		return nil
	}
	<-k.up
	return k.upErr
}

// flush writes everything queued to the live keeper, in order, and
// returns once the pipe holds it. A line only queued when we are
// SIGKILLed never reaches the keeper, so what must be known before a fork
// is flushed by the caller (Ready, Spawned) rather than left to the loop.
// With no keeper running, nothing is written (a new one is told the whole
// state when it starts); need makes that an error. A write that fails
// (a keeper that died, or one that read nothing for closeWait) puts back
// what it did not write, unless the keeper was replaced meanwhile.
func (k *Keeper) flush(need bool) error {
	k.wmu.Lock()
	defer k.wmu.Unlock()
	k.mu.Lock()
	w, buf := k.w, k.pending
	if w == nil {
		k.mu.Unlock()
		if need {
			return errors.New("keeper: none running (it died and is being restarted)")
		}
		return nil
	}
	k.pending = nil
	k.mu.Unlock()
	if len(buf) == 0 {
		return nil
	}
	_ = w.SetWriteDeadline(time.Now().Add(closeWait))
	n, err := w.Write(buf)
	if err == nil {
		return nil
	}
	k.mu.Lock()
	if k.w == w {
		k.pending = append(buf[n:], k.pending...)
	}
	k.mu.Unlock()
	return fmt.Errorf("keeper pid %d: %w", k.PID(), err)
}

// PID is the live keeper's pid, 0 while there is none.
func (k *Keeper) PID() int {
	<-k.first
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.proc == nil {
		return 0
	}
	return k.proc.PID()
}

// spawn starts a keeper process, writes it everything it must know (a
// SIGKILL of ours the next moment leaves it knowing every run), and
// waits for it to be ready.
func (k *Keeper) spawn() error {
	proc, ar, err := k.fork()
	if err != nil {
		return err
	}
	_ = k.flush(false) // a failure is the loop's to retry, or the next keeper's
	return k.awaitUp(proc, ar)
}

// fork starts a keeper process, makes it the live one and queues
// everything it must know; awaitUp waits for it to be ready (ar is its
// stdout).
//
// The key, the cgroups and the journal are in the pipe before the keeper
// exists: the key is then the first line the keeper reads whoever else
// opened the pipe later, and should we die before the keeper even runs,
// it still learns what to kill (and reads end of file). The runs, of any
// length, are queued for flush: the pipe holds 64 KiB, and nobody reads
// it before the fork.
func (k *Keeper) fork() (*procsup.Process, *os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("keeper: %w", err)
	}
	defer r.Close()
	ar, aw, err := os.Pipe()
	if err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("keeper: %w", err)
	}
	key := newKey()
	head := "key " + key + "\n"
	if cg := k.o.Cgroups; cg != nil {
		o := cg.Owner()
		head += fmt.Sprintf("%s cgroup %s %d %d %d\n", key, strconv.Quote(cg.Base()), o.PID, o.Start, o.PIDNS)
	}
	if k.o.JournalDir != "" {
		head += fmt.Sprintf("%s journal %s\n", key, strconv.Quote(k.o.JournalDir))
	}
	if _, err := w.WriteString(head); err != nil {
		w.Close()
		ar.Close()
		aw.Close()
		return nil, nil, fmt.Errorf("keeper: %w", err)
	}
	exe := k.o.Exe
	if exe == "" {
		exe = selfExe
	}
	stderr := k.o.Stderr
	if stderr == nil {
		stderr = ReportTo(os.Stderr)
	}
	proc, err := k.o.Runtime.Start(procsup.Spec{
		Path:   exe,
		Argv:   []string{"hermeskilld", "keeper", "--for", strconv.Itoa(os.Getpid())},
		Env:    keeperEnv(os.Environ()),
		Stdin:  r,
		Stdout: aw,
		Stderr: stderr,
		Helper: true,
	})
	aw.Close()
	if err != nil {
		w.Close()
		ar.Close()
		return nil, nil, fmt.Errorf("keeper: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.w, k.proc = w, proc
	k.starts++
	// A new key for each keeper process: what comes without it is not
	// from us.
	k.key = key
	k.pending = k.pending[:0]
	for _, run := range k.runs {
		run.replayLocked()
	}
	return proc, ar, nil
}

// awaitUp waits for the keeper proc to be ready: it then runs, and
// nobody but root can open its descriptors. One that is not ready is
// killed and is the live one no more.
func (k *Keeper) awaitUp(proc *procsup.Process, ar *os.File) error {
	err := awaitReady(ar)
	ar.Close()
	if err == nil {
		return nil
	}
	_ = proc.Signal(syscall.SIGKILL)
	k.mu.Lock()
	if k.proc == proc {
		if k.w != nil {
			k.w.Close()
		}
		k.w = nil
	}
	k.mu.Unlock()
	return fmt.Errorf("keeper pid %d: %w", proc.PID(), err)
}

// readyLine is what a keeper writes to its stdout once undumpable.
const readyLine = "ready\n"

// awaitReady reads the keeper's readyLine from r, within startWait.
func awaitReady(r *os.File) error {
	_ = r.SetReadDeadline(time.Now().Add(startWait))
	buf := make([]byte, len(readyLine))
	if _, err := io.ReadFull(r, buf); err != nil {
		return fmt.Errorf("not ready: %w", err)
	}
	if string(buf) != readyLine {
		return fmt.Errorf("not ready: it wrote %q", buf)
	}
	return nil
}

// newKey is 128 random bits, in hex.
func newKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// ReportTo returns f if the keeper may hold it for its report, nil (the
// keeper then reports nowhere) if f is a pipe: whoever reads our output
// through a pipe waits for every writer to close it, and a keeper that
// outlives our clean exit by the moments it takes to read its disarm
// would delay them. A terminal, a file or a socket (systemd's journal) is
// kept.
func ReportTo(f *os.File) *os.File {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeNamedPipe != 0 {
		return nil
	}
	return f
}

// keeperEnv is our environment for the keeper: without what describes our
// own relation to systemd, plus the variable that makes it a keeper.
func keeperEnv(base []string) []string {
	env := make([]string, 0, len(base)+1)
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if k == envName || procsup.OwnSupervisorVar(k) {
			continue
		}
		env = append(env, kv)
	}
	return append(env, envName+"="+envValue)
}

// queueLocked appends a message for the keeper; k.mu is held.
func (k *Keeper) queueLocked(line string) {
	k.pending = append(k.pending, k.key...)
	k.pending = append(k.pending, ' ')
	k.pending = append(k.pending, line...)
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// loop writes queued messages to the keeper (those no fork waits for:
// the processes seen in trees, the runs that ended) and restarts a keeper
// that died. Ready and Spawned write through the same flush.
func (k *Keeper) loop() {
	check := time.NewTicker(stoppedCheck)
	defer check.Stop()
	for {
		k.mu.Lock()
		proc := k.proc
		k.mu.Unlock()
		select {
		case <-k.stop:
			return
		case <-proc.Done():
			k.restart(proc)
			continue
		case <-check.C:
			k.replaceIfStopped(proc)
			continue
		case <-k.kick:
		}
		if loopHook != nil && !loopHook() {
			continue
		}
		// A keeper that died meanwhile fails it with EPIPE, and Done
		// says so; one that reads nothing for closeWait keeps what it
		// was not written, tried again at once.
		if err := k.flush(false); err != nil && !errors.Is(err, syscall.EPIPE) {
			select {
			case k.kick <- struct{}{}:
			default:
			}
		}
	}
}

// replaceIfStopped kills a keeper that is stopped (SIGSTOP, which it
// cannot ignore, from a process of our user, or a tracer): stopped, it
// would kill nothing should we die. The loop then starts another, told
// everything.
func (k *Keeper) replaceIfStopped(proc *procsup.Process) {
	st, err := procfs.Default().Stat(proc.PID())
	if err != nil || (st.State != 'T' && st.State != 't') {
		return
	}
	k.log.Error("the keeper was stopped (SIGSTOP or a tracer); killing it and starting another",
		zap.Int("pid", proc.PID()), zap.String("state", string(st.State)))
	_ = proc.Signal(syscall.SIGKILL)
}

// loopHook, when set (by tests), runs before each of the loop's writes;
// false skips the write.
var loopHook func() bool

// restart replaces a keeper that died while we run.
func (k *Keeper) restart(dead *procsup.Process) {
	k.mu.Lock()
	if k.w != nil {
		k.w.Close()
		k.w = nil
	}
	k.mu.Unlock()
	k.log.Error("the keeper died; starting another (until it runs, agents' processes would outlive a SIGKILL of hermeskilld)",
		zap.Int("pid", dead.PID()), zap.Stringer("status", dead.Status()))
	for {
		err := k.spawn()
		if err == nil {
			return
		}
		k.log.Error("keeper not restarted", zap.Error(err))
		select {
		case <-k.stop:
			return
		case <-time.After(restartDelay):
		}
	}
}

// Close disarms the keeper: it exits, without killing anything, once it
// reads the disarm (Close does not wait for that: a keeper still starting
// would delay our exit). Call it once every agent is gone, on a clean
// exit. A keeper that cannot be disarmed in time (stopped, wedged) is
// killed: with no agent left its work is moot.
//
// While a run has not ended or an agent's tree is Unproven, Close does
// not disarm: it closes the pipe as our death would, the keeper kills
// what is left by its own means, and the error says so.
func (k *Keeper) Close() error {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil
	}
	k.closed = true
	proc := k.proc
	left := len(k.runs) + k.unproven
	k.mu.Unlock()
	close(k.stop)
	timer := time.NewTimer(closeWait)
	defer timer.Stop()
	select {
	case <-k.done:
	case <-k.started():
		// The first keeper process is not running yet: not waited for.
		// What is queued, and the disarm, go into its pipe below; it
		// reads them once it runs (an agent started after Forked is
		// gone by now).
	case <-timer.C:
		// The writer is blocked on a keeper that does not read.
		k.mu.Lock()
		proc = k.proc
		if proc != nil && left > 0 {
			// Its work is not moot: close the pipe under the blocked
			// write (which fails), so that it kills once it reads.
			k.w.Close()
			k.w = nil
		}
		k.mu.Unlock()
		if proc != nil && left > 0 {
			<-k.done
			return k.notDisarmed(proc, left)
		}
		if proc != nil {
			_ = proc.Signal(syscall.SIGKILL)
			<-k.done
			return fmt.Errorf("disarm keeper: pid %d did not read its pipe for %s; killed it", proc.PID(), closeWait)
		}
		<-k.done // the keeper was not up then, and is now
	}
	k.wmu.Lock() // after any Spawned still writing
	defer k.wmu.Unlock()
	k.mu.Lock()
	w, pending := k.w, k.pending
	if left == 0 {
		pending = append(pending, k.key+" disarm\n"...)
	}
	proc = k.proc
	k.w = nil
	k.mu.Unlock()
	if w == nil {
		return nil // no keeper: it died and could not be restarted
	}
	_ = w.SetWriteDeadline(time.Now().Add(closeWait))
	_, err := w.Write(pending)
	w.Close()
	if left > 0 {
		return k.notDisarmed(proc, left)
	}
	if err != nil {
		_ = proc.Signal(syscall.SIGKILL)
		return fmt.Errorf("disarm keeper pid %d: %w; killed it", proc.PID(), err)
	}
	return nil
}

// started is closed once the first keeper process is forked and not up
// yet; never closed otherwise.
func (k *Keeper) started() <-chan struct{} {
	select {
	case <-k.up:
		return nil
	case <-k.first:
		if k.firstErr != nil {
			return nil
		}
		return k.first
	default:
		return nil
	}
}

func (k *Keeper) notDisarmed(proc *procsup.Process, left int) error {
	return fmt.Errorf("keeper pid %d not disarmed: %d agent trees not proven gone; it kills what is left of them", proc.PID(), left)
}

// Unproven records that an agent's tree could not be proven gone when
// its run ended (its survivors, or whether it has any, are not known):
// the keeper is then never disarmed, and Close leaves the kill to it.
func (k *Keeper) Unproven() {
	if k == nil {
		return
	}
	k.mu.Lock()
	k.unproven++
	k.mu.Unlock()
}

// abandon closes the pipe as our death would: without disarming, and
// without writing what is still queued (a SIGKILL writes nothing more).
// Tests use it to play hermeskilld's SIGKILL.
func (k *Keeper) abandon() {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	close(k.stop)
	<-k.done
	k.wmu.Lock()
	defer k.wmu.Unlock()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.w.Close()
	k.w = nil
}

// Run is one agent run the keeper guards (process-group containment; a
// cgroup is guarded as a whole). A nil Run guards nothing.
type Run struct {
	k       *Keeper
	n       uint64
	marker  string
	pgid    int
	start   uint64
	members map[int]uint64
}

// Guard starts guarding a run before its main process is started: its
// processes carry key=value in their environment (the agent's heartbeat
// socket). Call Ready after it and before the fork: Ready makes sure the
// keeper has been written the run.
func (k *Keeper) Guard(key, value string) *Run {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.next++
	r := &Run{k: k, n: k.next, marker: key + "=" + value, members: make(map[int]uint64)}
	k.runs[r.n] = r
	k.queueLocked(fmt.Sprintf("run %d %s\n", r.n, strconv.Quote(r.marker)))
	return r
}

// Spawned records the run's main process: its pid is the process group's id.
func (r *Run) Spawned(pid int, start uint64) {
	if r == nil {
		return
	}
	r.k.mu.Lock()
	r.pgid, r.start = pid, start
	r.k.queueLocked(fmt.Sprintf("group %d %d %d\n", r.n, pid, start))
	r.k.mu.Unlock()
	// Written now, not by the loop: the keeper kills the group by it
	// should we die the next moment. A failure is the loop's to retry
	// (or the restarted keeper's, told everything).
	_ = r.k.flush(false)
}

// Member records a process seen in the run's tree.
func (r *Run) Member(pid int, start uint64) {
	if r == nil {
		return
	}
	r.k.mu.Lock()
	defer r.k.mu.Unlock()
	if len(r.members) < maxMembers {
		r.members[pid] = start
	}
	if len(r.k.pending) < maxPending {
		r.k.queueLocked(fmt.Sprintf("pid %d %d %d\n", r.n, pid, start))
	}
}

// End stops guarding the run: its processes are gone.
func (r *Run) End() {
	if r == nil {
		return
	}
	r.k.mu.Lock()
	defer r.k.mu.Unlock()
	delete(r.k.runs, r.n)
	r.k.queueLocked(fmt.Sprintf("end %d\n", r.n))
}

// replayLocked tells a new keeper about the run; k.mu is held.
func (r *Run) replayLocked() {
	r.k.queueLocked(fmt.Sprintf("run %d %s\n", r.n, strconv.Quote(r.marker)))
	if r.pgid > 0 {
		r.k.queueLocked(fmt.Sprintf("group %d %d %d\n", r.n, r.pgid, r.start))
	}
	for pid, start := range r.members {
		r.k.queueLocked(fmt.Sprintf("pid %d %d %d\n", r.n, pid, start))
	}
}
