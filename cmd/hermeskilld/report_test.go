// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
)

func TestEndLine(t *testing.T) {
	a := &config.Agent{ID: "bot"}
	wire := supervisor.Usage{Tokens: 5500, CostUSD: 0.6,
		Metered: &supervisor.MeteredUsage{Requests: 5, Tokens: 5500, CostUSD: 0.6, CostKnown: true}}
	for _, tc := range []struct {
		name string
		out  supervisor.Outcome
		want string
	}{
		{"metered, exits by itself", supervisor.Outcome{Usage: wire, Runtime: 12340 * time.Millisecond},
			"hermeskilld: agent bot exited 0 after 12.3s: 5 LLM requests, 5500 tokens, $0.6000"},
		{"metered, killed", supervisor.Outcome{Exit: procsup.ExitStatus{Signaled: true, Signal: 15}, Usage: wire, Runtime: 3 * time.Second},
			"hermeskilld: agent bot ended by SIGTERM after 3.0s: 5 LLM requests, 5500 tokens, $0.6000"},
		{"metered, no request", supervisor.Outcome{Exit: procsup.ExitStatus{Code: 2}, Usage: supervisor.Usage{Metered: &supervisor.MeteredUsage{CostKnown: true}}, Runtime: time.Second},
			"hermeskilld: agent bot exited 2 after 1.0s: 0 LLM requests, 0 tokens, $0.0000"},
		{"reported only", supervisor.Outcome{Usage: supervisor.Usage{Tokens: 1200, CostUSD: 0.03, ReportedTokens: 1200, ReportedCostUSD: 0.03}, Runtime: 4 * time.Second},
			"hermeskilld: agent bot exited 0 after 4.0s: 1200 tokens, $0.0300 (agent reported)"},
		{"nothing to tell", supervisor.Outcome{Runtime: time.Second}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, endLine(a, tc.out)) })
	}
}
