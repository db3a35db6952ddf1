// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package containment decides how an agent's process tree is held
// together: by a cgroup v2 cgroup of its own (package cgroup) where this
// process may create one, or else by a process group, the subreaper and a
// /proc scan (package procsup). It owns that choice and the words a log
// uses for it, for `supervise` and for the daemon alike; it creates no
// cgroup itself and starts no process.
package containment

import (
	"errors"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hermeskill/hermeskilld/internal/cgroup"
	"github.com/hermeskill/hermeskilld/internal/config"
)

// ErrMode: the containment mode is none of auto, cgroup and pgroup.
var ErrMode = errors.New("must be auto, cgroup or pgroup")

// Audience is who reads the lines Choose logs, which sets how loud the
// ordinary ones are; warnings are warnings for both.
type Audience int

const (
	// Service is a daemon's log, read later by an operator: which
	// containment is in use is Info, and a fallback to process groups on a
	// host without a writable cgroup v2 hierarchy is a warning.
	Service Audience = iota
	// Terminal is a person watching one agent run: which containment is in
	// use is Debug, and the fallback is Info.
	Terminal
)

// levels are the levels of the line naming the containment in use and of
// the line explaining a fallback.
func (a Audience) levels() (inUse, fallback zapcore.Level) {
	if a == Terminal {
		return zapcore.DebugLevel, zapcore.InfoLevel
	}
	return zapcore.InfoLevel, zapcore.WarnLevel
}

// pgroupLine names process-group containment in the log.
const pgroupLine = "containment: process group + subreaper + /proc scan"

// Choose resolves mode to a cgroup manager, or to nil for process-group
// containment: config.ContainmentAuto (or "") uses a cgroup when a writable
// cgroup v2 hierarchy exists and falls back to process groups otherwise;
// config.ContainmentCgroup insists on a cgroup; config.ContainmentPgroup
// never tries one. It logs once which containment is in use, logs the
// manager's setup warnings, and removes the cgroups (and kills what is in
// them) that a hermeskilld which died left behind.
//
// Errors, for the caller to prefix with the setting it read mode from:
// ErrMode; with config.ContainmentCgroup, the error of cgroup.Detect (it
// wraps cgroup.ErrUnavailable where there is no writable hierarchy).
func Choose(mode string, log *zap.Logger, a Audience) (*cgroup.Manager, error) {
	return choose(mode, log, a, func() (*cgroup.Manager, error) { return cgroup.Detect(cgroup.Options{}) })
}

func choose(mode string, log *zap.Logger, a Audience, detect func() (*cgroup.Manager, error)) (*cgroup.Manager, error) {
	inUse, fallback := a.levels()
	switch mode {
	case config.ContainmentPgroup:
		log.Log(inUse, pgroupLine, zap.String("containment", mode))
		return nil, nil
	case config.ContainmentAuto, config.ContainmentCgroup, "":
	default:
		return nil, ErrMode
	}
	m, err := detect()
	switch {
	case err != nil && mode == config.ContainmentCgroup:
		return nil, err
	case errors.Is(err, cgroup.ErrUnavailable):
		log.Log(fallback, pgroupLine+" (no writable cgroup v2)", zap.Error(err))
		return nil, nil
	case err != nil:
		log.Warn("cgroup containment failed; using process groups", zap.Error(err))
		return nil, nil
	}
	log.Log(inUse, "containment: "+m.Describe())
	for _, w := range m.Warnings() {
		log.Warn("cgroup setup", zap.Error(w))
	}
	if removed, err := m.CleanupStale(); err != nil {
		log.Warn("stale cgroups not all removed", zap.Error(err))
	} else if len(removed) > 0 {
		log.Warn("removed cgroups (and killed what was in them) left by a hermeskilld that died", zap.Strings("cgroups", removed))
	}
	return m, nil
}
