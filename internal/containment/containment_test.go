// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package containment

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hermeskill/hermeskilld/internal/cgroup"
)

// logged returns a logger that records every level, and what it recorded.
func logged() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

// noDetect fails the test if Choose looks for a cgroup hierarchy.
func noDetect(t *testing.T) func() (*cgroup.Manager, error) {
	return func() (*cgroup.Manager, error) {
		t.Error("detect called")
		return nil, errors.New("detect called")
	}
}

func detectFails(err error) func() (*cgroup.Manager, error) {
	return func() (*cgroup.Manager, error) { return nil, err }
}

func TestChoosePgroupNeverDetects(t *testing.T) {
	for _, tc := range []struct {
		a    Audience
		want zapcore.Level
	}{{Service, zapcore.InfoLevel}, {Terminal, zapcore.DebugLevel}} {
		log, logs := logged()
		m, err := choose("pgroup", log, tc.a, noDetect(t))
		require.NoError(t, err)
		assert.Nil(t, m)
		require.Equal(t, 1, logs.Len())
		e := logs.All()[0]
		assert.Equal(t, tc.want, e.Level)
		assert.Equal(t, "containment: process group + subreaper + /proc scan", e.Message)
	}
}

func TestChooseBadMode(t *testing.T) {
	log, logs := logged()
	m, err := choose("cgroups", log, Service, noDetect(t))
	require.ErrorIs(t, err, ErrMode)
	assert.Nil(t, m)
	assert.Zero(t, logs.Len(), "an error is returned, not logged")
}

// Without a writable cgroup v2 hierarchy, auto falls back to process
// groups: Info for a person at a terminal, a warning in a service's log.
func TestChooseAutoFallsBack(t *testing.T) {
	unavailable := fmt.Errorf("%w: cgroup v1 only", cgroup.ErrUnavailable)
	for _, tc := range []struct {
		mode string
		a    Audience
		want zapcore.Level
	}{{"auto", Service, zapcore.WarnLevel}, {"", Terminal, zapcore.InfoLevel}} {
		log, logs := logged()
		m, err := choose(tc.mode, log, tc.a, detectFails(unavailable))
		require.NoError(t, err)
		assert.Nil(t, m)
		require.Equal(t, 1, logs.Len())
		e := logs.All()[0]
		assert.Equal(t, tc.want, e.Level)
		assert.Equal(t, "containment: process group + subreaper + /proc scan (no writable cgroup v2)", e.Message)
		assert.Equal(t, unavailable.Error(), e.ContextMap()["error"])
	}
}

// A cgroup hierarchy that is there but fails is worth a warning for
// either audience; auto still runs the agent, in a process group.
func TestChooseAutoSurvivesAFailure(t *testing.T) {
	for _, a := range []Audience{Service, Terminal} {
		log, logs := logged()
		m, err := choose("auto", log, a, detectFails(errors.New("mkdir: read-only file system")))
		require.NoError(t, err)
		assert.Nil(t, m)
		require.Equal(t, 1, logs.Len())
		assert.Equal(t, zapcore.WarnLevel, logs.All()[0].Level)
		assert.Equal(t, "cgroup containment failed; using process groups", logs.All()[0].Message)
	}
}

// containment cgroup never falls back: Detect's error is returned as it
// is, for the caller to name its setting.
func TestChooseCgroupInsists(t *testing.T) {
	unavailable := fmt.Errorf("%w: cgroup v1 only", cgroup.ErrUnavailable)
	log, logs := logged()
	m, err := choose("cgroup", log, Terminal, detectFails(unavailable))
	require.ErrorIs(t, err, cgroup.ErrUnavailable)
	assert.Equal(t, unavailable.Error(), err.Error())
	assert.Nil(t, m)
	assert.Zero(t, logs.Len())
}

// On a host with a writable cgroup v2 hierarchy, auto takes it and says so.
func TestChooseAutoTakesCgroup(t *testing.T) {
	if _, err := cgroup.Detect(cgroup.Options{}); err != nil {
		t.Skipf("no writable cgroup v2 hierarchy here: %v", err)
	}
	log, logs := logged()
	m, err := Choose("auto", log, Service)
	require.NoError(t, err)
	require.NotNil(t, m)
	msgs := logs.FilterLevelExact(zapcore.InfoLevel).All()
	require.NotEmpty(t, msgs)
	assert.Equal(t, "containment: "+m.Describe(), msgs[0].Message)
}
