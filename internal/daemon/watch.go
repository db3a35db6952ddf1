// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// settleDelay is how quiet an agent file must be before it is read.
// Editors save in several steps (write a temp file, rename it over, touch
// the mode); every event restarts the delay, so one save is one reload.
const settleDelay = 200 * time.Millisecond

// maxWriterWait bounds how long a settled agent file that is still open
// for writing is put off: a process that keeps one open (a stuck editor,
// a log written there by mistake) must not keep it from being read.
const maxWriterWait = 10 * time.Second

// watcher watches agents_dir and the e-stop file's directory.
type watcher struct {
	fw      *fsnotify.Watcher
	events  <-chan fsnotify.Event
	errors  <-chan error
	pending map[string]bool
	writing map[string]time.Time // pending files found open for writing, since when
	timer   *time.Timer
}

func (d *Daemon) watch() (*watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	dirs := []string{d.cfg.AgentsDir}
	if ed := filepath.Dir(d.cfg.EstopFile); filepath.Clean(ed) != filepath.Clean(d.cfg.AgentsDir) {
		if err := os.MkdirAll(ed, 0o755); err != nil {
			fw.Close()
			return nil, err
		}
		dirs = append(dirs, ed)
	}
	for _, dir := range dirs {
		if err := fw.Add(dir); err != nil {
			fw.Close()
			return nil, err
		}
	}
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &watcher{fw: fw, events: fw.Events, errors: fw.Errors, pending: map[string]bool{}, writing: map[string]time.Time{}, timer: t}, nil
}

func (w *watcher) Close() error {
	w.timer.Stop()
	return w.fw.Close()
}

// settled fires once the pending files have been quiet for settleDelay.
func (w *watcher) settled() <-chan time.Time { return w.timer.C }

// isAgentFile: agent files are *.yaml / *.yml, not hidden (editors' temp
// and swap files are hidden or have other names).
func isAgentFile(name string) bool {
	base := filepath.Base(name)
	if strings.HasPrefix(base, ".") {
		return false
	}
	ext := filepath.Ext(base)
	return ext == ".yaml" || ext == ".yml"
}

// fileEvent notes one filesystem event.
func (d *Daemon) fileEvent(w *watcher, ev fsnotify.Event) {
	if filepath.Clean(ev.Name) == filepath.Clean(d.cfg.EstopFile) {
		if ev.Has(fsnotify.Create) || ev.Has(fsnotify.Write) {
			d.estopFromFile()
		}
		return
	}
	if filepath.Dir(ev.Name) != filepath.Clean(d.cfg.AgentsDir) || !isAgentFile(ev.Name) {
		return
	}
	d.log.Debug("agent file event", zap.String("file", ev.Name), zap.String("op", ev.Op.String()))
	w.pending[ev.Name] = true
	w.timer.Reset(settleDelay)
}

// applySettled applies every pending file once, except those a process
// still has open for writing: those are looked at again a settleDelay
// later (closing a file makes no event here), up to maxWriterWait.
func (d *Daemon) applySettled(w *watcher) {
	now := time.Now()
	for name := range w.pending {
		if openForWriting(name) {
			since, ok := w.writing[name]
			if !ok {
				since, w.writing[name] = now, now
			}
			if now.Sub(since) < maxWriterWait {
				continue
			}
			d.log.Warn("agent file still open for writing; read as it is", zap.String("file", name),
				zap.Duration("waited", now.Sub(since)))
		}
		delete(w.writing, name)
		delete(w.pending, name)
		d.applyFile(name)
	}
	if len(w.pending) > 0 {
		w.timer.Reset(settleDelay)
	}
}

// openForWriting reports whether a process has the file at path open for
// writing: a file being written is read once its writer closes it, not
// half-written. A shell's `cat >FILE` creates (or truncates) the file,
// then writes it; on a loaded host the two can be further apart than
// settleDelay, and the empty file read in between would be an invalid
// agent in ps until the write.
//
// fcntl(2) F_SETLEASE: a read lease is refused with EAGAIN while the file
// is open for writing by any process; one taken is released at once.
// Leases need the file's owner or CAP_LEASE and a file system that has
// them: any other failure says nothing, and the file is read.
func openForWriting(path string) bool {
	// O_NONBLOCK: an open that would break another's lease fails with
	// EWOULDBLOCK instead of waiting for it (a lease holder is writing).
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return errors.Is(err, unix.EWOULDBLOCK)
	}
	defer unix.Close(fd)
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_RDLCK); err != nil {
		return errors.Is(err, unix.EAGAIN)
	}
	_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_UNLCK)
	return false
}
