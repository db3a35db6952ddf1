// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/display"
	"github.com/hermeskill/hermeskilld/internal/outbox"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
)

// report prints, on stderr (the reason may hold agent-supplied text, made
// inert for the terminal), the one-line summary of a kill or an external
// death (why, how far the ladder went, where the certificate is, and with
// a control plane whether it was delivered or is left queued), and where
// shadow certificates went. delivery is nil without a control plane; with
// one and no kill line, what it says gets a line of its own.
//
// Last comes the end line of every run that has LLM use to tell (the
// gateway carried its traffic, or the agent reported tokens or cost),
// killed or not: how it ended, how long it ran, what it used (endLine).
func report(w io.Writer, a *config.Agent, out supervisor.Outcome, delivery *outbox.Summary) {
	reportDeath(w, a, out, delivery)
	if line := endLine(a, out); line != "" {
		fmt.Fprintln(w, line)
	}
}

// endLine is "hermeskilld: agent ID exited 0 after 12.3s: 5 LLM requests,
// 5500 tokens, $0.6000" ("ended by SIGKILL" for a death by a signal), or
// "" when the run has no LLM use to tell.
func endLine(a *config.Agent, out supervisor.Outcome) string {
	u := out.Usage
	v := display.Usage{Tokens: u.Tokens, CostUSD: u.CostUSD, ReportedTokens: u.ReportedTokens, ReportedCostUSD: u.ReportedCostUSD}
	if m := u.Metered; m != nil {
		v.Metered, v.Requests, v.InFlight, v.Refused, v.Errors, v.CostKnown = true, m.Requests, m.InFlight, m.Refused, m.Errors, m.CostKnown
	}
	sum := v.Summary()
	if sum == "" {
		return ""
	}
	how := fmt.Sprintf("exited %d", out.Exit.Code)
	if out.Exit.Signaled {
		how = "ended by " + config.SignalName(out.Exit.Signal)
	}
	return fmt.Sprintf("hermeskilld: agent %s %s after %.1fs: %s", a.ID, how, out.Runtime.Seconds(), sum)
}

// reportDeath prints the lines of a kill, an external death and shadow
// certificates, and the control plane's delivery.
func reportDeath(w io.Writer, a *config.Agent, out supervisor.Outcome, delivery *outbox.Summary) {
	for _, p := range out.ShadowCerts {
		fmt.Fprintf(w, "hermeskilld: shadow mode: agent %s would have been killed; certificate: %s\n", a.ID, p)
	}
	cp := delivery.String()
	c := out.Cert
	if c == nil {
		if cp != "" {
			fmt.Fprintf(w, "hermeskilld: %s\n", cp)
		}
		return
	}
	where := out.CertPath
	if where == "" {
		where = fmt.Sprintf("not written (%v); printed above", out.CertErr)
	}
	if cp != "" {
		where += "; " + cp
	}
	if !out.Killed {
		fmt.Fprintf(w, "hermeskilld: agent %s %s; certificate: %s\n", a.ID, display.Clean(c.TriggerReason), where)
		return
	}
	took := c.TerminatedAt.Sub(c.TriggeredAt).Seconds()
	fmt.Fprintf(w, "hermeskilld: agent %s killed (%s: %s); escalation reached %s after %.2fs; certificate: %s\n",
		a.ID, c.TriggerCheck, display.Clean(c.TriggerReason), c.Escalation.Reached, took, where)
}
