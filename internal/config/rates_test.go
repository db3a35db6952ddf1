// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseAgentRates(t *testing.T) {
	a, err := ParseAgent([]byte("checks:\n"+
		"  cost_rate: {warn: 0.40, kill: 0.50, per: 1m}\n"+
		"  requests_rate: {kill: 30, per: 1m}\n"+
		"  tokens_rate: {warn: 80_000, per: 1h}\n"), "agent.yaml", nil)
	require.NoError(t, err)
	require.Equal(t, &CostRate{Warn: 0.40, Kill: 0.50, Per: time.Minute}, a.Checks.CostRate)
	require.Equal(t, &Rate{Kill: 30, Per: time.Minute}, a.Checks.RequestsRate)
	require.Equal(t, &Rate{Warn: 80_000, Per: time.Hour}, a.Checks.TokensRate)
	require.Equal(t, []KV{
		{"cost_rate", "warn $0.40, kill $0.50 per 1m"},
		{"requests_rate", "kill 30 per 1m"},
		{"tokens_rate", "warn 80000 per 1h"},
	}, Checks{CostRate: a.Checks.CostRate, RequestsRate: a.Checks.RequestsRate, TokensRate: a.Checks.TokensRate}.Describe())

	a, err = ParseAgent([]byte("checks:\n  cost_rate: {per: 1m}\n"), "agent.yaml", nil)
	require.NoError(t, err)
	require.Nil(t, a.Checks.CostRate, "a window without a threshold is off")
}

func TestParseAgentRateErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, err string }{
		{"no per", "checks:\n  cost_rate: {kill: 0.50}\n",
			`agent.yaml:2: checks.cost_rate.per: required: the window the thresholds count over, such as 1m`},
		{"no per, block", "checks:\n  requests_rate:\n    warn: 5\n",
			`agent.yaml:2: checks.requests_rate.per: required: the window the thresholds count over, such as 1m`},
		{"per zero", "checks:\n  tokens_rate: {kill: 10, per: 0}\n",
			`agent.yaml:2: checks.tokens_rate.per: required: the window the thresholds count over, such as 1m`},
		{"per too short", "checks:\n  requests_rate:\n    kill: 5\n    per: 100ms\n",
			`agent.yaml:4: checks.requests_rate.per: must be at least 1s, got 100ms`},
		{"per negative", "checks:\n  cost_rate: {kill: 1, per: -1m}\n",
			`agent.yaml:2: checks.cost_rate.per: bad duration "-1m": negative`},
		{"per no unit", "checks:\n  cost_rate: {kill: 1, per: 60}\n",
			`agent.yaml:2: checks.cost_rate.per: bad duration "60": missing unit (e.g. 60s)`},
		{"warn above kill", "checks:\n  cost_rate:\n    kill: 0.5\n    warn: 0.6\n    per: 1m\n",
			`agent.yaml:4: checks.cost_rate: warn 0.6 is above kill 0.5`},
		{"count warn above kill", "checks:\n  tokens_rate: {warn: 11, kill: 10, per: 1m}\n",
			`agent.yaml:2: checks.tokens_rate: warn 11 is above kill 10`},
		{"count not an integer", "checks:\n  requests_rate: {kill: 2.5, per: 1m}\n",
			`agent.yaml:2: checks.requests_rate.kill: must be an integer, got number 2.5`},
		{"cost negative", "checks:\n  cost_rate: {kill: -0.5, per: 1m}\n",
			`agent.yaml:2: checks.cost_rate.kill: must not be negative, got -0.5`},
		{"unknown key", "checks:\n  cost_rate: {kill: 1, window: 1m}\n",
			`agent.yaml:2: checks.cost_rate: unknown key "window" (known: warn, kill, per)`},
		{"scalar", "checks:\n  cost_rate: 0.50/1m\n",
			`agent.yaml:2: checks.cost_rate: must be a mapping (key: value), got string "0.50/1m"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseAgent([]byte(tc.yaml), "agent.yaml", nil)
			require.EqualError(t, err, tc.err)
			require.ErrorIs(t, err, ErrInvalid)
		})
	}
}

// A flag sets a rate's kill and window in one text, AMOUNT/DURATION, and
// keeps the file's warning.
func TestSetRate(t *testing.T) {
	a, err := ParseAgent([]byte("checks:\n  cost_rate: {warn: 0.40, kill: 1, per: 5m}\n"), "agent.yaml", nil)
	require.NoError(t, err)
	require.NoError(t, a.Set("checks.cost_rate", "0.50/1m"))
	require.NoError(t, a.Set("checks.requests_rate", "30/1m"))
	require.NoError(t, a.Set("checks.tokens_rate", "100_000/1h"))
	require.Equal(t, &CostRate{Warn: 0.40, Kill: 0.50, Per: time.Minute}, a.Checks.CostRate)
	require.Equal(t, &Rate{Kill: 30, Per: time.Minute}, a.Checks.RequestsRate)
	require.Equal(t, &Rate{Kill: 100_000, Per: time.Hour}, a.Checks.TokensRate)
	require.NoError(t, a.Validate(false))

	for _, tc := range []struct{ key, value, err string }{
		{"checks.cost_rate", "0.50", `checks.cost_rate: want AMOUNT/DURATION such as 0.50/1m (the kill threshold per window), got "0.50"`},
		{"checks.cost_rate", "$0.50/1m", `checks.cost_rate.kill: must be a number, got string "$0.50"`},
		{"checks.cost_rate", "0.50/minute", `checks.cost_rate.per: bad duration "minute": want Go syntax such as 30s, 1.5s, 500ms, 2h30m`},
		{"checks.requests_rate", "2.5/1m", `checks.requests_rate.kill: must be an integer, got number 2.5`},
	} {
		err := DefaultAgent().Set(tc.key, tc.value)
		require.EqualError(t, err, tc.err, tc.value)
		require.ErrorIs(t, err, ErrBadValue)
	}

	// What only Validate sees: a window too short from a flag.
	a = DefaultAgent()
	require.NoError(t, a.Set("checks.tokens_rate", "10/10ms"))
	require.EqualError(t, a.Validate(false), "checks.tokens_rate.per: must be at least 1s, got 10ms")
	a = DefaultAgent()
	require.NoError(t, a.Set("checks.tokens_rate", "10/0"))
	err = a.Validate(false)
	require.EqualError(t, err, "checks.tokens_rate.per: required: the window the thresholds count over, such as 1m")
	require.ErrorIs(t, err, ErrMissing)
}
