// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
)

// settleDelay is how quiet an agent file must be before it is read.
// Editors save in several steps (write a temp file, rename it over, touch
// the mode); every event restarts the delay, so one save is one reload.
const settleDelay = 200 * time.Millisecond

// watcher watches agents_dir and the e-stop file's directory.
type watcher struct {
	fw      *fsnotify.Watcher
	events  <-chan fsnotify.Event
	errors  <-chan error
	pending map[string]bool
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
	return &watcher{fw: fw, events: fw.Events, errors: fw.Errors, pending: map[string]bool{}, timer: t}, nil
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

// applySettled applies every pending file once.
func (d *Daemon) applySettled(w *watcher) {
	for name := range w.pending {
		d.applyFile(name)
	}
	clear(w.pending)
}
