// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/spf13/cobra"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/display"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
)

type resumeFlags struct {
	ctl     ctlFlags
	maxCost float64
	tokens  int64
	asJSON  bool
}

func newResume() *cobra.Command {
	f := &resumeFlags{}
	c := &cobra.Command{
		Use:   "resume ID {--max-cost USD | --max-tokens N}",
		Short: "Raise a paused agent's budget and let it go on",
		Long: `Resume an agent that its budget paused (on_budget: pause): the budget it
paused for is raised to the value given (the new kill threshold: --max-cost
for the cost check, --max-tokens for tokens; both may be given), its process
tree is thawed, and the LLM requests the gateway held go on to the provider,
so that the agent never knew. A resume that would not let the run go on is
refused and the agent stays paused: a budget not above what the run spent,
or too small for the first held request's worst case (the error says how much
is needed). A pause not resumed within the agent's pause_timeout (default 1h)
is killed through the escalation ladder.

The agent may be the daemon's or a ` + "`hermeskilld supervise`" + ` run of the same
user in another terminal: without --control-socket or $` + control.EnvSocket + `,
the supervise run's own socket for ID is used when there is one, else the
daemon's. A process of the agent's own tree is refused.`,
		Example: `  hermeskilld resume research-bot --max-cost 10
  hermeskilld resume research-bot --max-tokens 2000000`,
		Args:              exactlyOneID,
		ValidArgsFunction: completeAgentIDs(&f.ctl),
		RunE:              func(c *cobra.Command, args []string) error { return f.run(c, args[0]) },
	}
	f.ctl.addTo(c)
	fl := c.Flags()
	fl.Float64Var(&f.maxCost, "max-cost", 0, "the new cost budget (USD): checks.cost.kill from now on")
	fl.Int64Var(&f.tokens, "max-tokens", 0, "the new tokens budget: checks.tokens.kill from now on")
	fl.BoolVar(&f.asJSON, "json", false, "print the answer as JSON: {id, state}")
	return c
}

func (f *resumeFlags) run(c *cobra.Command, id string) error {
	switch {
	case f.maxCost < 0 || math.IsNaN(f.maxCost) || math.IsInf(f.maxCost, 0) || f.tokens < 0:
		return usageError("--max-cost and --max-tokens are positive numbers")
	case f.maxCost == 0 && f.tokens == 0:
		return usageError("give the new budget: --max-cost USD and/or --max-tokens N (above what the agent spent)")
	}
	path := f.socket(id)
	cl := control.NewClient(path)
	defer cl.Close()
	res, err := cl.Resume(c.Context(), control.ResumeRequest{ID: id, CostUSD: f.maxCost, Tokens: f.tokens})
	if errors.Is(err, control.ErrNoDaemon) && f.ctl.socket == "" && os.Getenv(control.EnvSocket) == "" {
		return &exitError{code: exitDaemonAbsent, err: fmt.Errorf(
			"nothing serves agent %s: no supervise run of it with on_budget: pause (its socket would be %s) and no daemon at %s; pass --control-socket",
			id, heartbeat.SupervisorControlSocket(id), path)}
	}
	if err != nil {
		return ctlError(err, path)
	}
	if f.asJSON {
		return writeJSONOut(c.OutOrStdout(), res)
	}
	fmt.Fprintf(c.OutOrStdout(), "agent %s resumed; state %s\n", display.Clean(res.ID), display.Clean(res.State))
	return nil
}

// socket is --control-socket, else $HERMESKILL_CONTROL_SOCKET, else the
// control socket of this user's supervise run of id when it exists, else
// the daemon's.
func (f *resumeFlags) socket(id string) string {
	if f.ctl.socket != "" || os.Getenv(control.EnvSocket) != "" {
		return f.ctl.path()
	}
	if p := heartbeat.SupervisorControlSocket(id); isSocket(p) {
		return p
	}
	return f.ctl.path()
}

func isSocket(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}
