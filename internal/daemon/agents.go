// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/audit"
	"github.com/hermeskill/hermeskilld/internal/config"
)

// scanAgents applies every agent file of agents_dir, and stops the agents
// whose file is gone. force re-reads files whose content did not change
// (SIGHUP, new defaults).
func (d *Daemon) scanAgents(force bool) {
	entries, err := os.ReadDir(d.cfg.AgentsDir)
	if err != nil {
		d.log.Error("agents_dir", zap.Error(err))
		return
	}
	present := map[string]bool{}
	var names []string
	for _, e := range entries {
		name := filepath.Join(d.cfg.AgentsDir, e.Name())
		if e.Type().IsRegular() && isAgentFile(name) {
			present[name] = true
			names = append(names, name)
		}
	}
	sort.Strings(names)
	d.mu.Lock()
	var gone []string
	for f := range d.files {
		if !present[f] {
			gone = append(gone, f)
		}
	}
	for f := range d.invalid {
		if !present[f] {
			gone = append(gone, f)
		}
	}
	if force {
		clear(d.digests)
	}
	d.mu.Unlock()
	for _, f := range append(names, gone...) {
		d.applyFile(f)
	}
}

// applyFile brings the daemon in line with one agent file: a new file
// starts an agent, a changed one reconfigures it, a removed one stops it
// through the ladder, an invalid one is reported and changes nothing.
func (d *Daemon) applyFile(path string) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		d.removeFile(path)
		return
	}
	if err != nil {
		d.log.Error("agent file unreadable", zap.String("file", path), zap.Error(err))
		return
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	d.mu.Lock()
	if d.digests[path] == digest {
		d.mu.Unlock()
		return // a touch, a chmod, or the same content saved again
	}
	d.digests[path] = digest
	defaults := d.cfg.Defaults
	d.mu.Unlock()

	a, err := config.ParseAgent(data, path, &defaults)
	if err == nil {
		a.Normalize()
		err = a.Validate(true)
	}
	if err == nil && a.Gateway.On() {
		err = fmt.Errorf("%s: gateway: an agent file cannot set its own under the daemon, whose gateway section serves every agent", path)
	}
	if err == nil && d.hostCheck != nil {
		err = d.hostCheck(a, data)
	}
	if err == nil {
		err = d.claimID(path, a.ID)
	}
	if err == nil {
		err = d.admit(path, a)
	}
	if err != nil {
		d.fileInvalid(path, err)
		return
	}
	d.mu.Lock()
	oldID := d.files[path]
	d.files[path] = a.ID
	delete(d.invalid, path)
	s := d.slots[a.ID]
	d.mu.Unlock()
	if oldID != "" && oldID != a.ID {
		d.stopSlot(oldID, "config-removed", fmt.Sprintf("agent file %s now declares id %s", path, a.ID))
	}
	d.audit(audit.Event{Type: "config_applied", AgentID: a.ID, Data: map[string]any{"file": path, "sha256": digest}})
	if s != nil && !s.isRemoved() {
		d.log.Info("agent file changed; applying", zap.String("agent", a.ID), zap.String("file", path))
		s.reconfigure(a)
		d.publishConfig(a.ID, "config_applied", "agent file "+path+" applied")
		return
	}
	d.addSlot(a, s)
}

// claimID refuses an id another file already declares.
func (d *Daemon) claimID(path, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for f, other := range d.files {
		if other == id && f != path {
			return fmt.Errorf("%s: id %q is already declared by %s", path, id, f)
		}
	}
	return nil
}

// addSlot starts a new agent; prev is a slot of the same id still
// stopping (its file was removed and added again), which must end first.
func (d *Daemon) addSlot(a *config.Agent, prev *slot) {
	s := newSlot(d, a)
	d.mu.Lock()
	d.slots[a.ID] = s
	d.mu.Unlock()
	d.log.Info("agent added", zap.String("agent", a.ID), zap.String("file", a.Source))
	d.publishConfig(a.ID, "config_applied", "agent added from "+a.Source)
	go func() {
		if prev != nil {
			<-prev.done
		}
		s.loop()
		d.mu.Lock()
		if d.slots[a.ID] == s {
			delete(d.slots, a.ID)
		}
		d.mu.Unlock()
	}()
}

func (d *Daemon) fileInvalid(path string, err error) {
	d.mu.Lock()
	id := d.files[path]
	s := d.slots[id]
	if id == "" || s == nil {
		d.invalid[path] = err.Error()
	}
	d.mu.Unlock()
	if s != nil {
		s.invalid(err)
		d.log.Error("agent file invalid; the agent keeps its last good configuration", zap.String("agent", id), zap.Error(err))
	} else {
		d.log.Error("agent file invalid; not started", zap.Error(err))
	}
	d.audit(audit.Event{Type: "config_invalid", AgentID: id, Data: map[string]any{"file": path, "error": err.Error()}})
	d.publishConfig(id, "config_invalid", err.Error())
}

// removeFile stops the agent of a removed file through the ladder (a
// manual kill, operator config-removed); it is not quarantined.
func (d *Daemon) removeFile(path string) {
	d.mu.Lock()
	id := d.files[path]
	delete(d.files, path)
	delete(d.digests, path)
	delete(d.invalid, path)
	d.mu.Unlock()
	if id == "" {
		return
	}
	d.stopSlot(id, "config-removed", "agent file "+path+" removed")
}

func (d *Daemon) stopSlot(id, operator, reason string) {
	d.mu.Lock()
	s := d.slots[id]
	d.mu.Unlock()
	if s == nil {
		return
	}
	d.log.Info("agent removed; stopping it", zap.String("agent", id), zap.String("reason", reason))
	d.audit(audit.Event{Type: "config_removed", AgentID: id, Data: map[string]any{"reason": reason}})
	d.publishConfig(id, "config_removed", reason)
	s.stopFor(operator, reason, false)
}

// reload is SIGHUP: the daemon file again, then every agent file. The
// file's defaults apply at once; heartbeat_rate and logs to the runs
// started from then on; the directories, containment, metrics, signing
// key, control groups, gateway, control plane and audit settings at the
// next start (a warning names those that changed).
func (d *Daemon) reload() {
	d.log.Info("SIGHUP: reloading the configuration")
	if d.o.ConfigPath != "" {
		nc, err := config.LoadDaemon(d.o.ConfigPath)
		if err == nil {
			err = nc.CheckHost()
		}
		if err != nil {
			d.log.Error("daemon file invalid; keeping the running configuration", zap.Error(err))
		} else {
			d.mu.Lock()
			old := d.cfg
			if later := atNextStart(old, nc); len(later) > 0 {
				d.log.Warn("these daemon settings changed and apply only at the next start", zap.Strings("settings", later))
			}
			nc.StateDir, nc.RuntimeDir, nc.AgentsDir, nc.EstopFile = old.StateDir, old.RuntimeDir, old.AgentsDir, old.EstopFile
			d.cfg = nc
			d.mu.Unlock()
			d.budgets.Configure(nc.Budgets, d.now())
			d.saveBudgets()
			d.kickBudgets() // their pools follow
			d.pokeAll()
		}
	}
	d.scanAgents(true)
}

// atNextStart names the settings that differ between old and nc and that
// a running daemon keeps as they were.
func atNextStart(old, nc *config.Daemon) []string {
	var later []string
	for _, c := range []struct {
		name    string
		changed bool
	}{
		{"state_dir", nc.StateDir != old.StateDir},
		{"runtime_dir", nc.RuntimeDir != old.RuntimeDir},
		{"agents_dir", nc.AgentsDir != old.AgentsDir},
		{"containment", nc.Containment != old.Containment},
		{"metrics", !reflect.DeepEqual(nc.Metrics, old.Metrics)},
		{"signing_key", nc.SigningKey != old.SigningKey},
		{"control", !reflect.DeepEqual(nc.Control, old.Control)},
		{"gateway", !reflect.DeepEqual(nc.Gateway, old.Gateway)},
		{"control_plane", !reflect.DeepEqual(nc.ControlPlane, old.ControlPlane)},
		{"audit", !reflect.DeepEqual(nc.Audit, old.Audit)},
	} {
		if c.changed {
			later = append(later, c.name)
		}
	}
	return later
}

func (s *slot) isRemoved() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.life.removed
}
