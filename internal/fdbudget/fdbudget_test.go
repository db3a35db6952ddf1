// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package fdbudget_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/fdbudget"
)

// The figure is reserved + agents × per agent, reserved being the
// daemon's own 64, the control socket's bound and its reserve of 4, two
// per gateway connection, and the idle upstream pool only beside several
// upstreams. The rows at 1024 and 1048576 are the daemon's defaults (the
// control socket and the gateway at a quarter of the limit, at most 4096;
// operations.md, "Descriptors").
func TestBudgetFigure(t *testing.T) {
	for _, tc := range []struct {
		name                              string
		limit                             int
		cgroup                            bool
		control, gateway, idle, upstreams int
		agents                            int
		perAgent, reserved, need, fits    int
	}{
		{name: "pgroup, no gateway", limit: 1024, control: 256, agents: 10,
			perAgent: 11, reserved: 64 + 256 + 4, need: 324 + 110, fits: 63},
		{name: "cgroup, no gateway", limit: 1024, cgroup: true, control: 256, agents: 10,
			perAgent: 14, reserved: 324, need: 324 + 140, fits: 50},
		{name: "no agent", limit: 1024, cgroup: true, control: 256,
			perAgent: 14, reserved: 324, need: 324, fits: 50},
		{name: "gateway, one upstream: its idle pool is reused", limit: 1048576, cgroup: true, control: 4096,
			gateway: 4096, idle: 100, upstreams: 1, agents: 1000,
			perAgent: 14, reserved: 64 + 4096 + 4 + 2*4096, need: 12356 + 14000, fits: 74015},
		{name: "gateway, several upstreams: their idle pools count", limit: 1048576, cgroup: true, control: 4096,
			gateway: 4096, idle: 100, upstreams: 3, agents: 1000,
			perAgent: 14, reserved: 12356 + 100, need: 12456 + 14000, fits: 74008},
		{name: "gateway, pgroup", limit: 10000, control: 2500, gateway: 2500, idle: 32, upstreams: 2, agents: 7,
			perAgent: 11, reserved: 64 + 2500 + 4 + 5000 + 32, need: 7600 + 77, fits: 218},
		{name: "reserve beyond the limit: none fits", limit: 256, control: 64, gateway: 128, upstreams: 1,
			perAgent: 11, reserved: 64 + 64 + 4 + 256, need: 388, fits: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := fdbudget.Budget{Limit: tc.limit, PerAgent: fdbudget.PerAgent(tc.cgroup),
				Reserved: fdbudget.Reserve(tc.control, tc.gateway, tc.idle, tc.upstreams)}
			assert.Equal(t, tc.perAgent, b.PerAgent)
			assert.Equal(t, tc.reserved, b.Reserved)
			assert.Equal(t, tc.need, b.Need(tc.agents))
			assert.Equal(t, tc.fits, b.Fits())
			if tc.fits > 0 {
				assert.LessOrEqual(t, b.Need(tc.fits), tc.limit, "Fits agents fit")
				assert.NoError(t, b.Admit(tc.fits-1), "the last one that fits is admitted")
			}
			assert.Greater(t, b.Need(tc.fits+1), tc.limit, "one more does not")
			assert.Error(t, b.Admit(tc.fits), "one more is refused")
		})
	}
	assert.Zero(t, fdbudget.Budget{Limit: 1024}.Fits(), "no per-agent figure: nothing fits")
}

// The warning comes once the figure is past 90 % of the limit: at 90 %
// exactly, not yet.
func TestBudgetNear(t *testing.T) {
	b := fdbudget.Budget{Limit: 10000, PerAgent: 10, Reserved: 1000}
	for _, tc := range []struct {
		agents int
		need   int
		near   bool
	}{
		{0, 1000, false},
		{799, 8990, false},
		{800, 9000, false},
		{801, 9010, true},
		{900, 10000, true},
	} {
		require.Equal(t, tc.need, b.Need(tc.agents))
		assert.Equal(t, tc.near, b.Near(tc.agents), "%d agents, %d of %d", tc.agents, tc.need, b.Limit)
	}
	assert.InDelta(t, 0.9, fdbudget.WarnFraction, 0)
}

// The refusal gives the figure as an operator reads it, with a thousands
// separator, and what to do.
func TestBudgetRefusal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		b       fdbudget.Budget
		running int
		want    string
	}{
		{"thousands", fdbudget.Budget{Limit: 10000, PerAgent: 14, Reserved: 9990}, 0,
			"descriptor budget: 9,990 of 10,000 in use; an agent needs 14; raise LimitNOFILE= (the daemon's open-files limit)"},
		{"full with agents", fdbudget.Budget{Limit: 10000, PerAgent: 14, Reserved: 2568}, 530,
			"descriptor budget: 9,988 of 10,000 in use; an agent needs 14; raise LimitNOFILE= (the daemon's open-files limit)"},
		{"millions", fdbudget.Budget{Limit: 1048576, PerAgent: 11, Reserved: 12356}, 94201,
			"descriptor budget: 1,048,567 of 1,048,576 in use; an agent needs 11; raise LimitNOFILE= (the daemon's open-files limit)"},
		{"under a thousand", fdbudget.Budget{Limit: 256, PerAgent: 11, Reserved: 388}, 0,
			"descriptor budget: 388 of 256 in use; an agent needs 11; raise LimitNOFILE= (the daemon's open-files limit)"},
		{"a thousand exactly", fdbudget.Budget{Limit: 1000, PerAgent: 11, Reserved: 1000}, 0,
			"descriptor budget: 1,000 of 1,000 in use; an agent needs 11; raise LimitNOFILE= (the daemon's open-files limit)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.b.Admit(tc.running)
			require.Error(t, err)
			assert.EqualError(t, err, tc.want)
			var ex *fdbudget.ExceededError
			require.True(t, errors.As(err, &ex))
			assert.Equal(t, fdbudget.ExceededError{InUse: tc.b.Need(tc.running), Limit: tc.b.Limit, PerAgent: tc.b.PerAgent}, *ex)
		})
	}
}

// Limit is the soft limit, as getrlimit(2) gives it.
func TestLimit(t *testing.T) {
	var rl unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &rl))
	assert.Equal(t, int(min(rl.Cur, 1<<31)), fdbudget.Limit())
}

// Shortages are counted by where; a place that is not one counts nowhere.
func TestShortages(t *testing.T) {
	before := map[string]uint64{}
	for _, w := range fdbudget.Wheres {
		before[w] = fdbudget.Shortages(w)
	}
	fdbudget.Shortage(fdbudget.AgentRefused)
	fdbudget.Shortage(fdbudget.AgentRefused)
	fdbudget.Shortage(fdbudget.ControlAccept)
	fdbudget.Shortage("elsewhere")
	assert.Equal(t, before[fdbudget.AgentRefused]+2, fdbudget.Shortages(fdbudget.AgentRefused))
	assert.Equal(t, before[fdbudget.ControlAccept]+1, fdbudget.Shortages(fdbudget.ControlAccept))
	assert.Zero(t, fdbudget.Shortages("elsewhere"))
}

// An allowlist agent's proxy counts at its bounds, its own and the
// running ones'.
func TestAdmitExtra(t *testing.T) {
	b := fdbudget.Budget{Limit: 2000, PerAgent: 10, Reserved: 100}
	require.NoError(t, b.AdmitExtra(0, 0, fdbudget.Egress(256)))
	require.Equal(t, 769, fdbudget.Egress(256))
	require.NoError(t, b.AdmitExtra(1, 769, fdbudget.Egress(256)), "100 + 2*10 + 2*769 = 1658")
	err := b.AdmitExtra(2, 2*769, fdbudget.Egress(256))
	var ex *fdbudget.ExceededError
	require.ErrorAs(t, err, &ex)
	require.Equal(t, 100+2*10+2*769, ex.InUse)
	require.Equal(t, 10+769, ex.PerAgent)
	require.NoError(t, b.AdmitExtra(2, 2*769, 0), "an agent without a proxy still fits")
}
