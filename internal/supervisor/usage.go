// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// Usage is what a run's LLM use came to so far: the one snapshot every
// view of the run reads (Status, the end of the run's Outcome, its
// agent_exited event and audit line), so that ps, status, the control
// API, supervise's end line and the audit log never disagree.
//
// Tokens and CostUSD are the effective figures, those the tokens and
// cost checks count: with the gateway, what it metered on the wire (the
// engine is given each of the same records as its response ends:
// symptoms.Config.Metered), without it what the agent reported. The
// agent's own reports are kept beside them.
//
// The JSON form is the audit log's "usage" (agent_exited).
type Usage struct {
	Tokens          uint64  `json:"tokens"`
	CostUSD         float64 `json:"cost_usd"`
	ReportedTokens  uint64  `json:"reported_tokens"`
	ReportedCostUSD float64 `json:"reported_cost_usd"`
	// Metered is what the gateway counted; nil when the run's LLM
	// traffic does not go through it.
	Metered *MeteredUsage `json:"metered,omitempty"`
}

// MeteredUsage is the gateway's count of a run's requests (the
// certificate's metered block, without the per-model detail, plus the
// requests in flight).
type MeteredUsage struct {
	Requests int64   `json:"requests"`  // that reached the upstream
	InFlight int     `json:"in_flight"` // forwarded, their response not ended yet
	Refused  int64   `json:"refused"`
	Errors   int64   `json:"errors"`
	Tokens   int64   `json:"tokens"`
	CostUSD  float64 `json:"cost_usd"`
	// CostKnown is false when a model had no price or a request's usage
	// was never read (it is charged at its reservation).
	CostKnown bool `json:"cost_known"`
}

// usageOf is the run's usage from the engine's state (the agent's
// reports) and, with the gateway, the grant's count (m; nil without).
func usageOf(st symptoms.State, m *gateway.Metered) Usage {
	u := Usage{Tokens: st.Tokens, CostUSD: st.CostUSD, ReportedTokens: st.Tokens, ReportedCostUSD: st.CostUSD}
	if m == nil {
		return u
	}
	u.Metered = &MeteredUsage{Requests: m.Requests, InFlight: m.InFlight, Refused: m.Refused, Errors: m.Errors,
		Tokens: m.Tokens, CostUSD: m.CostUSD, CostKnown: m.CostKnown}
	u.Tokens, u.CostUSD = uint64(max(m.Tokens, 0)), m.CostUSD
	return u
}

// usage is the run's usage now, with st the engine's state.
func (r *Run) usage(st symptoms.State) Usage {
	if r.grant == nil {
		return usageOf(st, nil)
	}
	m := r.grant.Metered()
	return usageOf(st, &m)
}
