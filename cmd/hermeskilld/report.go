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
func report(w io.Writer, a *config.Agent, out supervisor.Outcome, delivery *outbox.Summary) {
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
