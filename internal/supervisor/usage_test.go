// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

func TestUsageOf(t *testing.T) {
	st := symptoms.State{Tokens: 100, CostUSD: 0.01, MeteredTokens: 5500, MeteredCostUSD: 0.6}
	assert.Equal(t, Usage{Tokens: 100, CostUSD: 0.01, ReportedTokens: 100, ReportedCostUSD: 0.01}, usageOf(st, nil),
		"without the gateway the agent's reports are what the checks count")

	m := gateway.Metered{InFlight: 1, Metered: certs.Metered{Requests: 5, Refused: 1, Errors: 2, Tokens: 5500, CostUSD: 0.6, CostKnown: true}}
	assert.Equal(t, Usage{Tokens: 5500, CostUSD: 0.6, ReportedTokens: 100, ReportedCostUSD: 0.01,
		Metered: &MeteredUsage{Requests: 5, InFlight: 1, Refused: 1, Errors: 2, Tokens: 5500, CostUSD: 0.6, CostKnown: true}},
		usageOf(st, &m), "with it the metered figures are, the agent's reports beside them")
}
