// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/config"
)

func egressEngine(c *config.Egress, t0 time.Time) *Engine {
	return New(Config{Checks: config.Checks{Egress: c}}, t0)
}

// Over the run: a warning once past refusals_warn, the kill past
// refusals, saying the last refused destination and why.
func TestEgressRefusalsOverTheRun(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	e := egressEngine(&config.Egress{Refusals: 3, RefusalsWarn: 1}, t0)
	require.Empty(t, e.EgressRefused("a.example:443", "is not in this agent's allowlist", t0.Add(time.Second)))
	got := e.EgressRefused("b.example:443", "is not in this agent's allowlist", t0.Add(2*time.Second))
	require.Len(t, got, 1)
	require.Equal(t, Warning, got[0].Severity)
	require.Empty(t, e.EgressRefused("c.example:443", "x", t0.Add(time.Hour)), "the refusals of the run do not expire")
	got = e.EgressRefused("evil.example:443", "is not in this agent's allowlist", t0.Add(2*time.Hour))
	require.Len(t, got, 1)
	s := got[0]
	require.Equal(t, Terminal, s.Severity)
	require.Equal(t, Egress, s.Check)
	require.Equal(t, "4 refused", s.Observed)
	require.Equal(t, "3", s.Threshold)
	require.Equal(t, "the egress proxy refused 4 requests, over the limit of 3; the last: evil.example:443 (is not in this agent's allowlist)", s.Message)
	term, ok := e.Terminal()
	require.True(t, ok)
	require.Equal(t, s, term)
	require.Equal(t, uint64(4), e.State().EgressRefusals)
}

// Within a window, what is older than per no longer counts.
func TestEgressBytesPerWindow(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	e := egressEngine(&config.Egress{Bytes: 1 << 20, Per: time.Minute}, t0)
	require.Empty(t, e.EgressMoved(700<<10, t0.Add(time.Second)))
	require.Empty(t, e.EgressMoved(700<<10, t0.Add(2*time.Minute)), "the first is out of the window")
	got := e.EgressMoved(400<<10, t0.Add(2*time.Minute+10*time.Second))
	require.Len(t, got, 1)
	require.Equal(t, "the egress proxy passed 1.1MiB in the last 1m, over the limit of 1MiB per 1m", got[0].Message)
	require.Equal(t, uint64(1800<<10), e.State().EgressBytes)
}

// Without the check the proxy's figures are counted and decide nothing;
// a live edit that turns it on judges them at once.
func TestEgressReconfigure(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	e := egressEngine(nil, t0)
	for i := range 5 {
		require.Empty(t, e.EgressRefused("x.example:443", "is not in this agent's allowlist", t0.Add(time.Duration(i)*time.Second)))
	}
	got := e.Reconfigure(Config{Checks: config.Checks{Egress: &config.Egress{Refusals: 4}}}, t0.Add(10*time.Second))
	require.Len(t, got, 1)
	require.Equal(t, "5 refused", got[0].Observed)
}
