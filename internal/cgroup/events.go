// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

func emptyEvents(ev map[string]uint64) bool  { return ev["populated"] == 0 }
func frozenEvents(ev map[string]uint64) bool { return ev["frozen"] == 1 }

// waitEvents returns once done holds for dir's cgroup.events, or when ctx
// ends. cgroup-v2.rst: "Unless specified otherwise, a value change in this
// file generates a file modified event", i.e. inotify(7) IN_MODIFY. The
// watch is armed before start runs and before the first read, so a change
// between the read and the wait still wakes us: nothing is polled.
//
// kernel/cgroup/cgroup.c rate-limits these notifications ("let's not
// notify more than 100 times per second"): a change within 10ms of the
// previous notification is notified when that window ends — late, never
// lost.
//
// The inotify descriptor is non-blocking and handed to os.NewFile, so the
// read parks in the runtime's netpoller and a deadline set when ctx ends
// interrupts it; no thread is blocked.
//
// Errors: ctx's error; fs.ErrNotExist (wrapped) when the cgroup is gone.
func waitEvents(ctx context.Context, dir string, start func() error, done func(map[string]uint64) bool) error {
	name := filepath.Join(dir, "cgroup.events")
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return os.NewSyscallError("inotify_init1", err)
	}
	f := os.NewFile(uintptr(fd), "inotify")
	// Closed off the caller's path: the kernel tears an inotify instance
	// down synchronously (fsnotify waits for its marks to be destroyed,
	// an SRCU grace period), 5-15 ms here, which every freeze before an
	// autopsy and every wait of the ladder would otherwise add to when
	// the next signal goes out.
	defer func() { go f.Close() }()
	if _, err := unix.InotifyAddWatch(fd, name, unix.IN_MODIFY); err != nil {
		return &fs.PathError{Op: "inotify_add_watch", Path: name, Err: err}
	}
	if start != nil {
		if err := start(); err != nil {
			return err
		}
	}
	stop := context.AfterFunc(ctx, func() {
		// Any past time: the pending Read returns ErrDeadlineExceeded.
		_ = f.SetReadDeadline(time.Unix(1, 0))
	})
	defer stop()

	// Each event is a struct inotify_event and an optional name; one
	// read drains what is queued, the content does not matter.
	buf := make([]byte, 4*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		ev, err := readEvents(dir)
		if err != nil {
			return err
		}
		if done(ev) {
			return nil
		}
		if _, err := f.Read(buf); err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			return fmt.Errorf("read inotify: %w", err)
		}
	}
}

// WaitEmpty returns when no live process is left in the group or its
// sub-cgroups (cgroup.events "populated 0"), or with ctx's error. A group
// that was removed counts as empty: rmdir(2) only succeeds on an empty
// cgroup.
func (g *Group) WaitEmpty(ctx context.Context) error {
	err := waitEvents(ctx, g.dir, nil, emptyEvents)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("wait for %s to empty: %w", g.dir, err)
}

// Freeze stops every process of the group and its sub-cgroups and returns
// once the kernel reports the group frozen. cgroup-v2.rst: "Freezing of
// the cgroup may take some time; when this action is completed, the
// "frozen" value in the cgroup.events control file will be updated to "1"
// and the corresponding notification will be issued." Frozen processes
// can still be killed ("a fatal signal", cgroup-v2.rst), so Kill works on
// a frozen group. When ctx ends first, the freeze stays requested and the
// caller decides: Thaw, or Kill.
//
// Errors: ErrFreezeUnsupported when there is no cgroup.freeze (Linux <
// 5.2); ctx's error, wrapped.
func (g *Group) Freeze(ctx context.Context) error {
	if err := g.setFrozen(ctx, true); err != nil {
		return fmt.Errorf("freeze %s: %w", g.dir, err)
	}
	return nil
}

// Thaw lets the processes of the group run again ("0" to cgroup.freeze);
// it does not wait for cgroup.events to say "frozen 0".
//
// Errors: ErrFreezeUnsupported when there is no cgroup.freeze.
func (g *Group) Thaw() error {
	if err := g.setFrozen(context.Background(), false); err != nil {
		return fmt.Errorf("thaw %s: %w", g.dir, err)
	}
	return nil
}

// RequestFreeze asks the kernel to freeze the group ("1" to
// cgroup.freeze) and returns without waiting for it to be frozen;
// WaitFrozen waits. The write itself marks every task of the group for
// the freezer's trap before it returns (kernel/cgroup/freezer.c,
// cgroup_freeze_task sets JOBCTL_TRAP_FREEZE and wakes the task): a
// signal sent after it is taken by no task of the group until the thaw,
// whose handling then runs first (get_signal(), kernel/signal.c, enters
// the freezer's trap before it dequeues a signal). A fatal signal is the
// exception: SIGKILL still kills.
//
// Errors: ErrFreezeUnsupported when there is no cgroup.freeze.
func (g *Group) RequestFreeze() error {
	name := filepath.Join(g.dir, "cgroup.freeze")
	err := writeFile(name, "1")
	if errors.Is(err, fs.ErrNotExist) {
		if _, derr := os.Stat(g.dir); derr != nil {
			return fmt.Errorf("freeze %s: %w", g.dir, derr)
		}
		return ErrFreezeUnsupported
	}
	if err != nil {
		return fmt.Errorf("freeze %s: %w", g.dir, err)
	}
	return nil
}

// WaitFrozen returns once cgroup.events says "frozen 1" (after
// RequestFreeze), or with ctx's error.
func (g *Group) WaitFrozen(ctx context.Context) error {
	if err := waitEvents(ctx, g.dir, nil, frozenEvents); err != nil {
		return fmt.Errorf("freeze %s: %w", g.dir, err)
	}
	return nil
}

func (g *Group) setFrozen(ctx context.Context, frozen bool) error {
	name := filepath.Join(g.dir, "cgroup.freeze")
	if _, err := os.Stat(name); errors.Is(err, fs.ErrNotExist) {
		if _, derr := os.Stat(g.dir); derr != nil {
			return derr
		}
		return ErrFreezeUnsupported
	}
	if !frozen {
		return writeFile(name, "0")
	}
	return waitEvents(ctx, g.dir, func() error { return writeFile(name, "1") }, frozenEvents)
}
