// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/egress"
	"github.com/hermeskill/hermeskilld/internal/fdbudget"
)

// descriptorBudget is what the daemon's descriptors must cover: each
// agent's, the control socket's connections at their bound and its
// reserve, the gateway's at its bound (package fdbudget).
func (d *Daemon) descriptorBudget(srv *control.Server) fdbudget.Budget {
	b := fdbudget.Budget{Limit: fdbudget.Limit(), PerAgent: fdbudget.PerAgent(d.h.Cgroups != nil)}
	controlConns, _ := srv.Limits()
	gatewayConns, idle, upstreams := 0, 0, 0
	if g := d.h.Gateway; g != nil {
		gatewayConns, _ = g.Limits()
		idle, upstreams = g.UpstreamIdleConns(), g.Upstreams()
	}
	b.Reserved = fdbudget.Reserve(controlConns, gatewayConns, idle, upstreams)
	return b
}

// admit refuses a new agent (one without a slot) that the descriptor
// budget cannot hold, with the figure, and warns once the budget passes
// fdbudget.WarnFraction of the limit. A budget of no limit (the daemon's
// tests without Run) admits all.
//
// A network: allowlist agent holds its egress proxy's descriptors besides,
// at the proxy's bounds (fdbudget.Egress), and those of the running ones
// count against the budget as well.
func (d *Daemon) admit(path string, a *config.Agent) error {
	id := a.ID
	if d.budget.Limit == 0 {
		return nil
	}
	d.mu.Lock()
	running := len(d.slots)
	_, known := d.slots[id]
	slots := make([]*slot, 0, len(d.slots))
	for _, s := range d.slots {
		slots = append(slots, s)
	}
	d.mu.Unlock()
	if known {
		return nil // a changed file of a running agent: it holds its descriptors already
	}
	inUse := 0
	for _, s := range slots {
		s.mu.Lock()
		inUse += extraDescriptors(s.cfg)
		s.mu.Unlock()
	}
	if err := d.budget.AdmitExtra(running, inUse, extraDescriptors(a)); err != nil {
		fdbudget.Shortage(fdbudget.AgentRefused)
		return fmt.Errorf("%s: %w", path, err)
	}
	need := d.budget.Need(running+1) + inUse + extraDescriptors(a)
	if float64(need) > fdbudget.WarnFraction*float64(d.budget.Limit) {
		msg := fmt.Sprintf("descriptor budget: %d of %d in use with agent %s; %d agents fit; raise LimitNOFILE=",
			need, d.budget.Limit, id, d.budget.Fits())
		d.log.Warn("descriptor budget near the limit", zap.String("agent", id), zap.Int("need", need),
			zap.Int("limit", d.budget.Limit), zap.Int("agents_fit", d.budget.Fits()))
		d.publishConfig(id, "descriptor_budget", msg)
	}
	return nil
}

// extraDescriptors is what agent a holds beyond fdbudget.PerAgent.
func extraDescriptors(a *config.Agent) int {
	if a != nil && a.Network == config.NetworkAllowlist {
		return fdbudget.Egress(egress.DefaultMaxTunnels)
	}
	return 0
}

// logBudget says, once the agents of the first scan are applied, what
// the budget holds.
func (d *Daemon) logBudget() {
	d.mu.Lock()
	running := len(d.slots)
	d.mu.Unlock()
	b := d.budget
	d.log.Info("descriptor budget", zap.Int("limit", b.Limit), zap.Int("per_agent", b.PerAgent), zap.Int("reserved", b.Reserved),
		zap.Int("agents", running), zap.Int("need", b.Need(running)), zap.Int("agents_fit", b.Fits()))
}
