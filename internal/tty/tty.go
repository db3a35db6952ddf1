// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package tty gives an interactive agent its terminal. When supervise's
// stdin is its controlling terminal, the agent's process group (still its
// own group: containment uses it) is the terminal's foreground group for
// the agent's life, as a shell or tini makes a job's: what is typed
// reaches the agent, and so do the terminal's signals — Ctrl-C (SIGINT),
// Ctrl-\ (SIGQUIT), Ctrl-Z (SIGTSTP), window size changes (SIGWINCH) —
// which then never reach hermeskilld, so a Ctrl-C is the agent's to
// handle, not a manual kill. hermeskilld's own stops (its checks, a kill
// of hermeskilld from elsewhere) run the ladder as ever. After the agent
// is gone the terminal is given back: hermeskilld's group in the
// foreground again and the modes of the start (an agent killed in raw mode
// leaves a usable shell).
//
// Job control is a shell's, one level down, as sudo does for its command.
// When the agent stops — Ctrl-Z, or SIGTTIN/SIGTTOU for using the terminal
// from the background — hermeskilld takes the terminal back (keeping the
// agent's modes), restores the modes of the start and stops itself with
// the same signal (its whole process group, as an editor does on Ctrl-Z),
// so that the shell above sees the job stopped. Continued (fg, bg:
// SIGCONT), it continues the agent's group, first giving it the terminal
// and its modes again when hermeskilld is in the terminal's foreground.
// While hermeskilld is stopped its checks do not run; time keeps counting,
// so a heartbeat or progress timeout that passed meanwhile fires when it is
// continued. While hermeskilld kills the agent, a stop of the agent never
// stops hermeskilld: the ladder continues the agent. With no job control
// above hermeskilld (its process group is orphaned: it leads its session,
// is a container's PID 1, or it and the script that ran it have no parent
// in another group of their session) nothing could continue it: a stopped
// agent that holds the terminal is continued at once, with a warning (the
// kernel likewise discards a terminal's stop for an orphaned process
// group) — except after a SIGSTOP, someone's deliberate stop: hermeskilld
// then holds the terminal until the agent is continued.
//
// The terminal's foreground group and modes are changed with SIGTTOU
// blocked in the calling thread (tcsetpgrp(3) from a background group
// would otherwise stop hermeskilld); the agent is given the terminal
// before it execs (procsup.Spec.Foreground), so it never runs without it.
package tty

import (
	"errors"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/procfs"
	"github.com/hermeskill/hermeskilld/internal/procsup"
)

// Terminal is our controlling terminal, handed to one agent.
type Terminal struct {
	f     *os.File
	fd    int
	self  int           // our process group
	saved *unix.Termios // the modes at the start
	log   *zap.Logger

	mu    sync.Mutex
	agent *procsup.Process
	// stopping reports the agent is being killed (supervisor.Run.Stopping);
	// killing is set when a kill was asked for (Killing), before that.
	stopping func() bool
	killing  bool
	// gen counts stops and continues: a suspension decided at one is
	// dropped when another came before it was due.
	gen    uint64
	pgid   int           // the agent's process group
	modes  *unix.Termios // the agent's modes, kept while it is stopped
	ended  bool
	warned bool
	// parked: with no job control above us, the agent was stopped by
	// SIGSTOP (no terminal's stop, and deliberate) and we took the
	// terminal back until it is continued.
	parked bool
}

// Open returns f as our controlling terminal, with its modes saved; nil
// when f is no terminal or not ours (there is nothing to hand over then:
// reading a terminal that is not one's controlling terminal involves no
// job control).
func Open(f *os.File, log *zap.Logger) *Terminal {
	if f == nil {
		return nil
	}
	if log == nil {
		log = zap.NewNop()
	}
	fd := int(f.Fd())
	saved, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil
	}
	// TIOCGSID fails with ENOTTY unless it is our controlling terminal.
	sid, err := unix.IoctlGetInt(fd, unix.TIOCGSID)
	if err != nil {
		return nil
	}
	if own, err := unix.Getsid(0); err != nil || own != sid {
		return nil
	}
	return &Terminal{f: f, fd: fd, self: unix.Getpgrp(), saved: saved, log: log}
}

// ForAgent is the terminal to start the agent in the foreground of
// (supervisor.Options.Foreground): ours when we are its foreground group;
// nil when we run in the background, where the agent starts too and gets
// the terminal once we are brought to the foreground.
func (t *Terminal) ForAgent() *os.File {
	if t == nil || !t.foreground() {
		return nil
	}
	return t.f
}

// Started hands the terminal's job control to the agent p: its stops are
// watched until it is reaped. stopping reports that hermeskilld is
// killing it: then a stop of the agent is left to the ladder (which
// continues it), never followed by one of hermeskilld's own.
func (t *Terminal) Started(p *procsup.Process, stopping func() bool) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.agent, t.pgid, t.stopping = p, p.PID(), stopping
	t.mu.Unlock()
	go t.watch(p)
}

// watch looks for a stop of the agent at each SIGCHLD (a child that stops
// sends one, as one that exits does).
func (t *Terminal) watch(p *procsup.Process) {
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	defer signal.Stop(chld)
	for {
		if sig, ok := p.TakeStop(); ok {
			t.stopped(sig)
		} else {
			t.unpark()
		}
		select {
		case <-chld:
		case <-p.Done():
			return
		}
	}
}

// stopped acts on a stop of the agent by sig.
func (t *Terminal) stopped(sig syscall.Signal) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended || t.killing || t.stopping != nil && t.stopping() {
		return
	}
	fg, err := t.foregroundGroup()
	if err != nil {
		return
	}
	if fg == t.self && (sig == syscall.SIGTTIN || sig == syscall.SIGTTOU) {
		// It wants the terminal, which we hold: we were brought to the
		// foreground while running (a shell's fg sends no SIGCONT then).
		t.handLocked()
		_ = t.agent.SignalGroup(syscall.SIGCONT)
		return
	}
	held := fg == t.pgid
	if !jobControl() {
		if sig == syscall.SIGSTOP {
			// Someone's deliberate stop, which we do not undo: the
			// terminal is ours (Ctrl-C a manual kill) until the agent
			// is continued.
			if held {
				t.takeBackLocked()
				t.parked = true
			}
			return
		}
		if held || fg == t.self {
			t.warnLocked("the agent was stopped by "+unix.SignalName(sig)+
				", and nothing above hermeskilld (no job control) could continue it: it is continued", sig)
			if !held {
				t.handLocked()
			}
			_ = t.agent.SignalGroup(syscall.SIGCONT)
			return
		}
		t.warnLocked("the agent was stopped by "+unix.SignalName(sig)+
			" and stays stopped: hermeskilld runs in the background of its terminal with no job control above it to bring it to the foreground", sig)
		return
	}
	if held {
		t.takeBackLocked()
	}
	own := sig
	if own != syscall.SIGTTIN && own != syscall.SIGTTOU {
		own = syscall.SIGTSTP
	}
	t.gen++
	gen := t.gen
	time.AfterFunc(settle, func() { t.suspend(gen, own) })
}

// takeBackLocked takes the terminal from the stopped agent: its modes are
// kept for when it is given the terminal again, ours of the start are
// restored.
func (t *Terminal) takeBackLocked() {
	withTTOUBlocked(func() {
		if m, err := unix.IoctlGetTermios(t.fd, unix.TCGETS); err == nil {
			t.modes = m
		}
		_ = unix.IoctlSetPointerInt(t.fd, unix.TIOCSPGRP, t.self)
		_ = unix.IoctlSetTermios(t.fd, unix.TCSETS, t.saved)
	})
}

// unpark gives the terminal back to an agent parked by SIGSTOP once it
// runs again (a continued child sends SIGCHLD too).
func (t *Terminal) unpark() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.parked || t.ended {
		return
	}
	if st, err := procfs.Default().Stat(t.pgid); err != nil || st.State == 'T' {
		return
	}
	t.parked = false
	if t.foreground() {
		t.handLocked()
	}
}

// settle is how long a stop of the agent waits before hermeskilld stops
// too: a shell's kill of a stopped job is a SIGTERM and a SIGCONT, in an
// order nothing guarantees; continued, the agent may stop again (reading
// the terminal in the background) before the SIGTERM was acted on, and
// the kill must then proceed rather than the job stop again.
const settle = 100 * time.Millisecond

// suspend stops the job, our whole process group (a pipeline we are in),
// as an editor stops itself on Ctrl-Z — unless, since the stop of the
// agent that decided it, the agent was continued, hermeskilld was asked to
// kill it, or it is gone. Continuing is a SIGCONT of ours (Continued).
func (t *Terminal) suspend(gen uint64, sig syscall.Signal) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if gen != t.gen || t.ended || t.killing || t.stopping != nil && t.stopping() {
		return
	}
	if st, err := procfs.Default().Stat(t.pgid); err != nil || st.State != 'T' {
		return // continued by someone else, or gone
	}
	_ = unix.Kill(0, sig)
}

func (t *Terminal) warnLocked(msg string, sig syscall.Signal) {
	if t.warned {
		return
	}
	t.warned = true
	t.log.Warn(msg, zap.String("signal", unix.SignalName(sig)))
}

// Killing is told that hermeskilld was asked to kill the agent (a stop
// signal to it), before the ladder starts: from then on hermeskilld never
// stops itself for the agent's stops. A shell's kill of a stopped job
// sends SIGTERM, then SIGCONT: the agent, continued in the background,
// may stop again reading the terminal before the ladder has begun.
func (t *Terminal) Killing() {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.killing = true
	t.mu.Unlock()
}

// Continued is told that hermeskilld was continued (SIGCONT): the agent's
// group is continued too, with the terminal when we are in its foreground.
func (t *Terminal) Continued() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended || t.agent == nil {
		return
	}
	t.gen++
	if t.foreground() {
		t.handLocked()
	}
	_ = t.agent.SignalGroup(syscall.SIGCONT)
}

// handLocked gives the terminal to the agent's group, with the modes it
// had when it stopped.
func (t *Terminal) handLocked() {
	withTTOUBlocked(func() {
		if t.modes != nil {
			_ = unix.IoctlSetTermios(t.fd, unix.TCSETS, t.modes)
			t.modes = nil
		}
		_ = unix.IoctlSetPointerInt(t.fd, unix.TIOCSPGRP, t.pgid)
	})
	t.parked = false
}

// Restore gives the terminal back once the agent is gone (or never
// started): our group in the foreground again if the agent's group holds
// it, or a group that no longer exists (a job of the agent's own, or an
// agent that failed to exec), and the modes of the start whenever the
// terminal is then ours. A shell that took the terminal while we were
// stopped keeps it. Later calls do nothing.
func (t *Terminal) Restore() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return
	}
	t.ended = true
	withTTOUBlocked(func() {
		fg, err := t.foregroundGroup()
		if err != nil {
			return
		}
		if fg != t.self && (fg == t.pgid || groupGone(fg)) {
			if unix.IoctlSetPointerInt(t.fd, unix.TIOCSPGRP, t.self) != nil {
				return
			}
			fg = t.self
		}
		if fg == t.self {
			_ = unix.IoctlSetTermios(t.fd, unix.TCSETS, t.saved)
		}
	})
}

// foregroundGroup is tcgetpgrp(3).
func (t *Terminal) foregroundGroup() (int, error) {
	return unix.IoctlGetInt(t.fd, unix.TIOCGPGRP)
}

func (t *Terminal) foreground() bool {
	fg, err := t.foregroundGroup()
	return err == nil && fg == t.self
}

// groupGone reports whether no process is left in process group pg.
func groupGone(pg int) bool {
	return pg > 0 && errors.Is(unix.Kill(-pg, 0), unix.ESRCH)
}

// jobControl reports whether something above us could continue us once
// stopped: whether our process group is not orphaned (setpgid(2)), some
// member of it — we, or the script that ran us — having a parent in our
// session but not in our group (a shell with job control). The kernel
// discards the terminal's stop signals sent to an orphaned group, and
// nothing would ever continue it.
func jobControl() bool {
	self := unix.Getpgrp()
	sid, err := unix.Getsid(0)
	if err != nil {
		return false
	}
	fs := procfs.Default()
	pids, err := fs.PIDs()
	if err != nil {
		pids = []int{os.Getpid()}
	}
	for _, pid := range pids {
		st, err := fs.Stat(pid)
		if err != nil || st.PGID != self || st.PPID <= 0 {
			continue // not in our group, or its parent is outside our PID namespace
		}
		if p, err := fs.Stat(st.PPID); err == nil && p.SID == sid && p.PGID != self {
			return true
		}
	}
	return false
}

// withTTOUBlocked runs f on one thread with SIGTTOU blocked there: then
// tcsetpgrp(3) and tcsetattr(3) work from a background process group
// (termios(3)) instead of stopping us. Blocked, not ignored: an ignored
// signal would stay ignored in the agents we start.
func withTTOUBlocked(f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set, old unix.Sigset_t
	n := uint(syscall.SIGTTOU - 1)
	w := uint(unsafe.Sizeof(set.Val[0]) * 8)
	set.Val[n/w] |= 1 << (n % w)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err == nil {
		defer func() { _ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil) }()
	}
	f()
}
