// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// costPerMinute is cost_rate {kill, per: 1m}, with the gateway or not.
func costPerMinute(kill float64, metered bool) Config {
	return Config{Metered: metered, Checks: config.Checks{CostRate: &config.CostRate{Kill: kill, Per: time.Minute}}}
}

// spend applies one request of $usd metered by the gateway at t0+at.
func spend(e *Engine, usd float64, at time.Duration) []Symptom {
	return e.ObserveMetered(100, usd, true, "m", nil, t0.Add(at))
}

// A loop that spends $0.25 a call every 10 seconds is killed at its fifth
// call, within its first minute: $1.25 in the window, over $1.00 per
// minute, with no total budget anywhere near.
func TestCostRateKillsALoop(t *testing.T) {
	e := New(costPerMinute(1.00, true), t0)
	for i := range 4 {
		require.Empty(t, spend(e, 0.25, time.Duration(i)*10*time.Second), "call %d", i+1)
	}
	k := one(t, spend(e, 0.25, 40*time.Second))
	require.Equal(t, CostRate, k.Check)
	require.Equal(t, Terminal, k.Severity)
	require.Equal(t, "$1.25 in 1m", k.Observed)
	require.Equal(t, "$1.00 per 1m", k.Threshold)
	require.Equal(t, "spent $1.25 in the last 1m, over the $1.00 per minute limit", k.Message)
	requireTime(t, t0.Add(40*time.Second), k.At)
	require.Empty(t, spend(e, 0.25, 41*time.Second), "once")
	got, ok := e.Terminal()
	require.True(t, ok)
	require.Equal(t, k, got)
}

// The same spend, slower, never crosses the rate: what left the window
// no longer counts, however large the total grows.
func TestCostRateForgetsWhatLeftTheWindow(t *testing.T) {
	e := New(costPerMinute(1.00, true), t0)
	for i := range 200 { // $0.25 every 16s: at most 4 calls ($1.00) in any minute
		require.Empty(t, spend(e, 0.25, time.Duration(i)*16*time.Second), "call %d", i+1)
	}
	require.InDelta(t, 50.0, e.State().MeteredCostUSD, 1e-9)
}

// The window's edges: an amount counts for at least 59/60 of per and never
// for per or more after it happened.
func TestCostRateWindowEdges(t *testing.T) {
	for _, tc := range []struct {
		name          string
		first, second time.Duration
		fires         bool
	}{
		{"same instant", 0, 0, true},
		{"just inside the window", 0, 59*time.Second + 999*time.Millisecond, true},
		{"a window later", 0, time.Minute, false},
		{"late in its step, the earliest it may leave", 999 * time.Millisecond, time.Minute, false},
		{"late in its step, still inside", 999 * time.Millisecond, 59*time.Second + 999*time.Millisecond, true},
		{"long after", 0, time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := New(costPerMinute(1.00, true), t0)
			require.Empty(t, spend(e, 0.60, tc.first))
			syms := spend(e, 0.60, tc.second)
			if !tc.fires {
				require.Empty(t, syms)
				return
			}
			require.Equal(t, "spent $1.20 in the last 1m, over the $1.00 per minute limit", one(t, syms).Message)
		})
	}
}

// Warn, then kill, each once, with words for each.
func TestCostRateWarnThenKill(t *testing.T) {
	e := New(Config{Metered: true, Checks: config.Checks{
		CostRate: &config.CostRate{Warn: 0.50, Kill: 1.00, Per: 5 * time.Minute}}}, t0)
	require.Empty(t, spend(e, 0.25, 0))
	require.Empty(t, spend(e, 0.25, time.Minute))
	w := one(t, spend(e, 0.25, 2*time.Minute))
	require.Equal(t, Warning, w.Severity)
	require.Equal(t, CostRate, w.Check)
	require.Equal(t, "spent $0.75 in the last 5m, over the $0.50 per 5m warning threshold", w.Message)
	require.Empty(t, spend(e, 0.25, 3*time.Minute), "warned once")
	k := one(t, spend(e, 0.25, 4*time.Minute))
	require.Equal(t, Terminal, k.Severity)
	require.Equal(t, "spent $1.25 in the last 5m, over the $1.00 per 5m limit", k.Message)
	require.Equal(t, 1, e.State().Warnings)
}

// requests_rate with the gateway counts the requests that reached it, as
// they arrive: the fourth in a minute is over 3 per minute.
func TestRequestsRateMetered(t *testing.T) {
	e := New(Config{Metered: true, Checks: config.Checks{
		RequestsRate: &config.Rate{Warn: 2, Kill: 3, Per: time.Minute}}}, t0)
	require.Empty(t, e.RequestSent(t0))
	require.Empty(t, e.RequestSent(t0.Add(time.Second)))
	w := one(t, e.RequestSent(t0.Add(2*time.Second)))
	require.Equal(t, "3 requests in the last 1m, over the 2 per minute warning threshold", w.Message)
	k := one(t, e.RequestSent(t0.Add(3*time.Second)))
	require.Equal(t, RequestsRate, k.Check)
	require.Equal(t, "4 requests in the last 1m, over the 3 per minute limit", k.Message)
	require.Equal(t, "4 in 1m", k.Observed)
	require.Equal(t, "3 per 1m", k.Threshold)
}

// tokens_rate with the gateway counts each response's metered tokens.
func TestTokensRateMetered(t *testing.T) {
	e := New(Config{Metered: true, Checks: config.Checks{
		TokensRate: &config.Rate{Kill: 10_000, Per: time.Hour}}}, t0)
	require.Empty(t, e.ObserveMetered(6000, 0.01, true, "m", nil, t0))
	k := one(t, e.ObserveMetered(6000, 0.01, true, "m", nil, t0.Add(59*time.Minute)))
	require.Equal(t, TokensRate, k.Check)
	require.Equal(t, "12000 tokens in the last 1h, over the 10000 per hour limit", k.Message)
}

// With the gateway, what the agent reports decides nothing: a dishonest
// report of huge spend does not kill it, the wire's spend does.
func TestRatesMeteredIgnoreReports(t *testing.T) {
	e := New(Config{Metered: true, Checks: config.Checks{
		CostRate:     &config.CostRate{Kill: 1.00, Per: time.Minute},
		RequestsRate: &config.Rate{Kill: 1, Per: time.Minute},
		TokensRate:   &config.Rate{Kill: 100, Per: time.Minute}}}, t0)
	for i := range 5 {
		require.Empty(t, e.Observe(msg(tokens(uint64(i+1)*1000), cost(float64(i+1)*10)), t0.Add(time.Duration(i)*time.Second)))
	}
	k := one(t, spend(e, 1.50, 10*time.Second))
	require.Equal(t, CostRate, k.Check)
}

// Without the gateway the rates count what the agent reports: each
// increase of its cumulative COST_USD and TOKENS, and one usage report per
// datagram that raised either. A report that repeats its totals adds
// nothing.
func TestRatesReported(t *testing.T) {
	t.Run("cost", func(t *testing.T) {
		e := New(costPerMinute(1.00, false), t0)
		for i := range 4 { // cumulative $0.25, $0.50, $0.75, $1.00
			require.Empty(t, e.Observe(msg(watchdog, cost(float64(i+1)*0.25)), t0.Add(time.Duration(i)*10*time.Second)))
			require.Empty(t, e.Observe(msg(watchdog, cost(float64(i+1)*0.25)), t0.Add(time.Duration(i)*10*time.Second+time.Second)), "repeated")
		}
		k := one(t, e.Observe(msg(cost(1.25)), t0.Add(40*time.Second)))
		require.Equal(t, "spent $1.25 in the last 1m, over the $1.00 per minute limit", k.Message)
	})
	t.Run("cost over hours", func(t *testing.T) {
		e := New(costPerMinute(1.00, false), t0)
		for i := range 100 { // $0.25 a minute for 100 minutes: $25 in all, $0.25 in any minute
			require.Empty(t, e.Observe(msg(cost(float64(i+1)*0.25)), t0.Add(time.Duration(i)*time.Minute)))
		}
	})
	t.Run("tokens", func(t *testing.T) {
		e := New(Config{Checks: config.Checks{TokensRate: &config.Rate{Kill: 10_000, Per: time.Minute}}}, t0)
		require.Empty(t, e.Observe(msg(tokens(5_000)), t0), "the first report is what was spent since the start")
		require.Empty(t, e.Observe(msg(tokens(9_000)), t0.Add(2*time.Minute)))
		require.Empty(t, e.Observe(msg(tokens(15_000)), t0.Add(2*time.Minute+10*time.Second)))
		k := one(t, e.Observe(msg(tokens(15_001)), t0.Add(2*time.Minute+20*time.Second)))
		require.Equal(t, TokensRate, k.Check)
		require.Equal(t, "10001 tokens in the last 1m, over the 10000 per minute limit", k.Message)
	})
	t.Run("a first report over the rate", func(t *testing.T) {
		e := New(Config{Checks: config.Checks{TokensRate: &config.Rate{Kill: 10_000, Per: time.Minute}}}, t0)
		k := one(t, e.Observe(msg(tokens(500_000)), t0.Add(30*time.Second)))
		require.Equal(t, "500000 tokens in the last 1m, over the 10000 per minute limit", k.Message)
	})
	t.Run("usage reports", func(t *testing.T) {
		e := New(Config{Checks: config.Checks{RequestsRate: &config.Rate{Kill: 2, Per: time.Minute}}}, t0)
		require.Empty(t, e.Observe(msg(tokens(100), cost(0.01)), t0), "one datagram, one report")
		require.Empty(t, e.Observe(msg(watchdog, tokens(100), cost(0.01)), t0.Add(time.Second)), "no increase")
		require.Empty(t, e.Observe(msg(watchdog), t0.Add(2*time.Second)))
		require.Empty(t, e.Observe(msg(tokens(200)), t0.Add(3*time.Second)))
		require.Empty(t, e.RequestSent(t0.Add(4*time.Second)), "no gateway: no wire request counts")
		k := one(t, e.Observe(msg(cost(0.02)), t0.Add(5*time.Second)))
		require.Equal(t, RequestsRate, k.Check)
		require.Equal(t, "3 usage reports in the last 1m, over the 2 per minute limit", k.Message)
	})
}

// In shadow mode a rate fires once, like any check, beside the others.
func TestRatesShadow(t *testing.T) {
	e := New(Config{Metered: true, Shadow: true, Checks: config.Checks{
		Cost:     &config.CostLimit{Kill: 1.00},
		CostRate: &config.CostRate{Kill: 0.40, Per: time.Minute}}}, t0)
	require.Empty(t, spend(e, 0.25, 0))
	require.Equal(t, CostRate, one(t, spend(e, 0.25, time.Second)).Check)
	require.Empty(t, spend(e, 0.25, 2*time.Second))
	require.Empty(t, spend(e, 0.25, 3*time.Second))
	require.Equal(t, Cost, one(t, spend(e, 0.25, 4*time.Second)).Check)
	got, _ := e.Terminal()
	require.Equal(t, CostRate, got.Check, "the first")
}

// A live edit applies to what the window already holds.
func TestReconfigureRates(t *testing.T) {
	rate := func(kill float64, per time.Duration) Config {
		return Config{Metered: true, Checks: config.Checks{CostRate: &config.CostRate{Kill: kill, Per: per}}}
	}
	// $0.25 at 0s, 10s, 20s and 30s: $1.00 in the window at 40s.
	fill := func(cfg Config) *Engine {
		e := New(cfg, t0)
		for i := range 4 {
			require.Empty(t, spend(e, 0.25, time.Duration(i)*10*time.Second))
		}
		return e
	}
	now := t0.Add(40 * time.Second)
	t.Run("a lower kill fires at once", func(t *testing.T) {
		e := fill(rate(2.00, time.Minute))
		k := one(t, e.Reconfigure(rate(0.90, time.Minute), now))
		require.Equal(t, "spent $1.00 in the last 1m, over the $0.90 per minute limit", k.Message)
		requireTime(t, now, k.At)
	})
	t.Run("a longer window keeps what the old one held", func(t *testing.T) {
		e := fill(rate(2.00, time.Minute))
		require.Empty(t, e.Reconfigure(rate(1.10, 10*time.Minute), now))
		k := one(t, spend(e, 0.25, 9*time.Minute))
		require.Equal(t, "spent $1.25 in the last 10m, over the $1.10 per 10m limit", k.Message)
	})
	t.Run("a shorter window drops what is older than it", func(t *testing.T) {
		e := fill(rate(2.00, time.Minute))
		require.Empty(t, e.Reconfigure(rate(0.40, 15*time.Second), now), "$0.25 left, at 30s")
		k := one(t, spend(e, 0.25, 41*time.Second))
		require.Equal(t, "spent $0.50 in the last 15s, over the $0.40 per 15s limit", k.Message)
	})
	t.Run("turned off and on starts afresh", func(t *testing.T) {
		e := fill(rate(2.00, time.Minute))
		require.Empty(t, e.Reconfigure(Config{Metered: true}, now))
		require.Empty(t, e.Reconfigure(rate(0.40, time.Minute), now))
		require.Empty(t, spend(e, 0.25, 41*time.Second))
		require.Equal(t, CostRate, one(t, spend(e, 0.25, 42*time.Second)).Check)
	})
}
