// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/gateway"
)

// slice is a sub-agent's share of its parent run's budget, as the
// parent's gateway granted it.
type slice struct {
	gateway.SliceGrant
	base string // a base URL of the parent's gateway
}

// subAgent makes a supervise started inside a supervised run whose
// gateway is on (environ: gateway.ParentFromEnv) a child run, unless
// --llm-upstream (or its file) gives it a gateway of its own: it asks the
// parent's gateway for a slice of the parent's budget (what a's cost and
// tokens kill thresholds ask, or all that is left), forwards through the
// parent's gateway with the slice's handle as key (the provider key stays
// with the parent's hermeskilld), takes the parent's prices unless
// --llm-prices says otherwise, and lowers its own cost and tokens kill
// thresholds to the slice. It returns nil outside such a run.
func subAgent(a *config.Agent, environ []string) (*slice, error) {
	if a.Gateway.On() {
		return nil, nil
	}
	pg, ok, err := gateway.ParentFromEnv(environ)
	if err != nil || !ok {
		return nil, err
	}
	_, base, _ := strings.Cut(pg.Upstreams[0], "=")
	name, _, _ := strings.Cut(pg.Upstreams[0], "=")
	var want gateway.SliceRequest
	want.Run = a.ID
	if c := a.Checks.Cost; c != nil && a.Mode != config.ModeShadow {
		want.MaxCostUSD = c.Kill
	}
	if t := a.Checks.Tokens; t != nil && a.Mode != config.ModeShadow {
		want.MaxTokens = t.Kill
	}
	got, err := gateway.RequestSlice(context.Background(), base, pg.Keys[name], want)
	if err != nil {
		return nil, fmt.Errorf("sub-agent of run %s: no slice of its budget: %w", pg.ParentRun, err)
	}
	for k := range pg.Keys {
		pg.Keys[k] = got.Handle
	}
	g := &a.Gateway
	g.Upstreams, g.Keys, g.ParentRun = pg.Upstreams, pg.Keys, got.ParentRun
	if g.Prices == "" {
		g.Prices = pg.Prices
	}
	if got.MaxCostUSD > 0 && (a.Checks.Cost == nil || a.Checks.Cost.Kill == 0 || got.MaxCostUSD < a.Checks.Cost.Kill) {
		c := config.CostLimit{Kill: got.MaxCostUSD}
		if a.Checks.Cost != nil && a.Checks.Cost.Warn < got.MaxCostUSD {
			c.Warn = a.Checks.Cost.Warn
		}
		a.Checks.Cost = &c
	}
	if got.MaxTokens > 0 && (a.Checks.Tokens == nil || a.Checks.Tokens.Kill == 0 || got.MaxTokens < a.Checks.Tokens.Kill) {
		t := config.Limit{Kill: got.MaxTokens}
		if a.Checks.Tokens != nil && a.Checks.Tokens.Warn < got.MaxTokens {
			t.Warn = a.Checks.Tokens.Warn
		}
		a.Checks.Tokens = &t
	}
	return &slice{SliceGrant: got, base: base}, nil
}

// release gives the slice back: what the sub-agent did not spend is its
// parent's again. A failure is logged: the parent keeps it reserved, which
// leaves it less, never more.
func (s *slice) release(log *zap.Logger) {
	if err := gateway.ReleaseSlice(context.Background(), s.base, s.Handle); err != nil {
		log.Warn("sub-agent: slice not given back to the parent run", zap.String("parent_run", s.ParentRun), zap.Error(err))
	}
}
