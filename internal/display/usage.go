// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package display

import (
	"fmt"
	"strconv"
)

// Usage is a run's LLM use as every view prints it (ps, status, certs
// show, supervise's end line), so that each says the same thing the same
// way: the effective figures first — those the tokens and cost checks
// count — labelled "metered" when the gateway metered them, and the
// agent's own report beside them where it differs.
type Usage struct {
	// Metered: the gateway carries the run's LLM traffic; Tokens and
	// CostUSD are what it counted, and the fields below are set.
	Metered bool
	Tokens  uint64
	CostUSD float64
	// The agent's own reports (TOKENS=, COST_USD=).
	ReportedTokens  uint64
	ReportedCostUSD float64
	// The gateway's count of requests.
	Requests, Refused, Errors int64
	InFlight                  int
	CostKnown                 bool
}

// TokensText is "5500", or for a metered run "5500 metered", and
// "5500 metered (agent reported 0)" when the agent's report differs.
func (u Usage) TokensText() string {
	return u.label(strconv.FormatUint(u.Tokens, 10), strconv.FormatUint(u.ReportedTokens, 10),
		u.Tokens != u.ReportedTokens)
}

// CostText is the cost as usd formats it, labelled as TokensText is; a
// metered cost that is not fully known (an unpriced model, a usage never
// read) says so.
func (u Usage) CostText(usd func(float64) string) string {
	s := u.label(usd(u.CostUSD), usd(u.ReportedCostUSD), u.CostUSD != u.ReportedCostUSD)
	if u.Metered && !u.CostKnown {
		s += unknownCost
	}
	return s
}

const unknownCost = " (not all known: a model had no price, or a usage was never read and is charged at its reservation)"

func (u Usage) label(effective, reported string, differ bool) string {
	if !u.Metered {
		return effective
	}
	s := effective + " metered"
	if differ {
		s += " (agent reported " + reported + ")"
	}
	return s
}

// RequestsText is the gateway's count: "5", "5 (1 in flight)", then
// ", 1 refused, 2 errors" when there were any.
func (u Usage) RequestsText() string {
	s := strconv.FormatInt(u.Requests, 10)
	if u.InFlight > 0 {
		s += fmt.Sprintf(" (%d in flight)", u.InFlight)
	}
	if u.Refused > 0 || u.Errors > 0 {
		s += fmt.Sprintf(", %d refused, %d errors", u.Refused, u.Errors)
	}
	return s
}

// Summary is the run's use in one phrase, as supervise's end line says
// it: "5 LLM requests, 5500 tokens, $0.6000" for a metered run (with the
// agent's own figures after it when it reported any that differ),
// "1200 tokens, $0.0300 (agent reported)" for one that is not; "" when
// there is nothing to say (no gateway, no reports).
func (u Usage) Summary() string {
	usd := func(v float64) string { return fmt.Sprintf("$%.4f", v) }
	if !u.Metered {
		if u.Tokens == 0 && u.CostUSD == 0 {
			return ""
		}
		return fmt.Sprintf("%d tokens, %s (agent reported)", u.Tokens, usd(u.CostUSD))
	}
	s := fmt.Sprintf("%d LLM requests, %d tokens, %s", u.Requests, u.Tokens, usd(u.CostUSD))
	if u.Refused > 0 || u.Errors > 0 {
		s += fmt.Sprintf(", %d refused, %d errors", u.Refused, u.Errors)
	}
	if !u.CostKnown {
		s += unknownCost
	}
	if (u.ReportedTokens != 0 || u.ReportedCostUSD != 0) && (u.ReportedTokens != u.Tokens || u.ReportedCostUSD != u.CostUSD) {
		s += fmt.Sprintf(" (agent reported %d tokens, %s)", u.ReportedTokens, usd(u.ReportedCostUSD))
	}
	return s
}
