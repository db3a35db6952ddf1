// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package display_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hermeskill/hermeskilld/internal/display"
)

func TestUsageTexts(t *testing.T) {
	usd := func(v float64) string { return fmt.Sprintf("$%.2f", v) }
	wire := display.Usage{Metered: true, Tokens: 5500, CostUSD: 0.6, Requests: 5, CostKnown: true}
	for _, tc := range []struct {
		name                         string
		u                            display.Usage
		tokens, cost, requests, summ string
	}{
		{"agent reports alone", display.Usage{Tokens: 1200, CostUSD: 0.03, ReportedTokens: 1200, ReportedCostUSD: 0.03},
			"1200", "$0.03", "0", "1200 tokens, $0.0300 (agent reported)"},
		{"nothing to tell", display.Usage{}, "0", "$0.00", "0", ""},
		{"metered, an agent with no client", wire,
			"5500 metered (agent reported 0)", "$0.60 metered (agent reported $0.00)", "5",
			"5 LLM requests, 5500 tokens, $0.6000"},
		{"metered, the agent reports the same", with(wire, func(u *display.Usage) { u.ReportedTokens, u.ReportedCostUSD = 5500, 0.6 }),
			"5500 metered", "$0.60 metered", "5", "5 LLM requests, 5500 tokens, $0.6000"},
		{"metered, the agent reports less", with(wire, func(u *display.Usage) { u.ReportedTokens, u.ReportedCostUSD = 5000, 0.5 }),
			"5500 metered (agent reported 5000)", "$0.60 metered (agent reported $0.50)", "5",
			"5 LLM requests, 5500 tokens, $0.6000 (agent reported 5000 tokens, $0.5000)"},
		{"in flight, refused, errors", with(wire, func(u *display.Usage) { u.InFlight, u.Refused, u.Errors = 1, 2, 3 }),
			"5500 metered (agent reported 0)", "$0.60 metered (agent reported $0.00)", "5 (1 in flight), 2 refused, 3 errors",
			"5 LLM requests, 5500 tokens, $0.6000, 2 refused, 3 errors"},
		{"cost not all known", with(wire, func(u *display.Usage) { u.CostKnown = false }),
			"5500 metered (agent reported 0)",
			"$0.60 metered (agent reported $0.00) (not all known: a model had no price, or a usage was never read and is charged at its reservation)",
			"5", "5 LLM requests, 5500 tokens, $0.6000 (not all known: a model had no price, or a usage was never read and is charged at its reservation)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.tokens, tc.u.TokensText())
			assert.Equal(t, tc.cost, tc.u.CostText(usd))
			assert.Equal(t, tc.requests, tc.u.RequestsText())
			assert.Equal(t, tc.summ, tc.u.Summary())
		})
	}
}

func with(u display.Usage, f func(*display.Usage)) display.Usage {
	f(&u)
	return u
}
