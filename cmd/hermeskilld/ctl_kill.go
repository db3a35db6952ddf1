// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/display"
	"github.com/hermeskill/hermeskilld/internal/labels"
)

type killFlags struct {
	ctl           ctlFlags
	reason        string
	selector      labels.Flag
	startedBefore string
	noWait        bool
	asJSON        bool
}

func newKill() *cobra.Command {
	f := &killFlags{}
	c := &cobra.Command{
		Use:   "kill {ID | --selector SELECTOR | --started-before TIME} --reason TEXT",
		Short: "Kill agents through the escalation ladder",
		Long: `Kill one agent, or every running agent that matches --selector and/or
--started-before, through the escalation ladder: a
cooperative stop, SIGTERM, SIGKILL to the whole tree. Each gets a death
certificate (trigger "manual", operator: you) and stays down (quarantined)
until ` + "`hermeskilld release ID`" + `.

--reason is required: it goes into the certificates and the audit log.
By default the command waits until the agents are dead and prints, for
each, the stage the ladder reached and its certificate; --no-wait returns
once the kills have begun. Interrupting the wait does not stop the kills.

` + selectorHelp + "`",
		Example: `  hermeskilld kill research-bot --reason "looping on web_search"
  hermeskilld kill --selector team=research --reason "bad model rollout"
  hermeskilld kill --selector 'team=research,!canary' --reason "bad model rollout"
  hermeskilld kill --started-before 2h --reason "stale agents"`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error { return f.run(c, args) },
	}
	f.ctl.addTo(c)
	fl := c.Flags()
	fl.StringVar(&f.reason, "reason", "", "why (required): recorded in the certificates and the audit log")
	addSelectorFlag(c, &f.ctl, &f.selector, "kill the running agents whose labels match SELECTOR")
	fl.StringVar(&f.startedBefore, "started-before", "", "kill the running agents started before TIME (RFC 3339, or a duration ago such as 2h)")
	fl.BoolVar(&f.noWait, "no-wait", false, "return once the kills have begun")
	fl.BoolVar(&f.asJSON, "json", false, "print the daemon's answer as JSON: one {id, reached, certificate, error} per agent")
	c.ValidArgsFunction = completeAgentIDs(&f.ctl)
	return c
}

// jsonKills prints kill results as JSON; the status is exitFailure when
// one failed, or (emptyFails) when none matched.
func jsonKills(w io.Writer, res []control.KillResult, emptyFails bool) error {
	if err := writeJSONOut(w, nonNilList(res)); err != nil {
		return err
	}
	if emptyFails && len(res) == 0 {
		return &exitError{code: exitFailure}
	}
	for _, r := range res {
		if r.Error != "" {
			return &exitError{code: exitFailure}
		}
	}
	return nil
}

func (f *killFlags) run(c *cobra.Command, args []string) error {
	req := control.KillRequest{Selector: f.selector.Sel, Wait: !f.noWait}
	if len(args) == 1 {
		req.ID = args[0]
	}
	if err := requireReason(f.reason); err != nil {
		return err
	}
	req.Reason = f.reason
	if f.startedBefore != "" {
		t, err := parseTimeOrAgo(f.startedBefore, time.Now())
		if err != nil {
			return usageError("--started-before: %v", err)
		}
		req.StartedBefore = t
	}
	byMatch := !req.Selector.Empty() || !req.StartedBefore.IsZero()
	switch {
	case req.ID == "" && !byMatch:
		return usageError("name the agent to kill (ID), or select agents with --selector or --started-before")
	case req.ID != "" && byMatch:
		return usageError("give an agent ID or --selector/--started-before, not both")
	}

	ctx, stop := interruptible(c.Context())
	defer stop()
	cl := f.ctl.client()
	defer cl.Close()
	res, err := cl.Kill(ctx, req)
	if err != nil {
		return waitError(err, cl.Path())
	}
	if f.asJSON {
		return jsonKills(c.OutOrStdout(), res, true)
	}
	if len(res) == 0 {
		return &exitError{code: exitFailure, err: errors.New("no running agent matched; nothing was killed")}
	}
	return printKills(c.OutOrStdout(), c.ErrOrStderr(), res, req.Wait)
}

func newEstop() *cobra.Command {
	f := &killFlags{}
	c := &cobra.Command{
		Use:   "estop --reason TEXT",
		Short: "Emergency stop: kill every agent and keep them all down",
		Long: `Engage the e-stop: every agent is killed through the escalation ladder, each
with a death certificate, and none starts again until
` + "`hermeskilld release --estop`" + `. --reason is required. Waits for the deaths
unless --no-wait, and prints one line per agent, as kill does.`,
		Example: `  hermeskilld estop --reason "incident 4711: agents exfiltrating"`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := requireReason(f.reason); err != nil {
				return err
			}
			ctx, stop := interruptible(c.Context())
			defer stop()
			cl := f.ctl.client()
			defer cl.Close()
			res, err := cl.Estop(ctx, control.EstopRequest{Reason: f.reason, Wait: !f.noWait})
			if err != nil {
				return waitError(err, cl.Path())
			}
			if f.asJSON {
				return jsonKills(c.OutOrStdout(), res, false)
			}
			err = printKills(c.OutOrStdout(), c.ErrOrStderr(), res, !f.noWait)
			fmt.Fprintln(c.OutOrStdout(), "e-stop engaged: every agent stays down until `hermeskilld release --estop`")
			return err
		},
	}
	f.ctl.addTo(c)
	c.Flags().StringVar(&f.reason, "reason", "", "why (required): recorded in the certificates and the audit log")
	c.Flags().BoolVar(&f.noWait, "no-wait", false, "return once the kills have begun")
	c.Flags().BoolVar(&f.asJSON, "json", false, "print the daemon's answer as JSON: one {id, reached, certificate, error} per agent")
	return c
}

func newRelease() *cobra.Command {
	f := &ctlFlags{}
	var estop, asJSON bool
	c := &cobra.Command{
		Use:   "release {ID | --estop}",
		Short: "Let a quarantined agent, or every agent held by the e-stop, start again",
		Example: `  hermeskilld release research-bot
  hermeskilld release --estop`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			req := control.ReleaseRequest{Estop: estop}
			if len(args) == 1 {
				req.ID = args[0]
			}
			if (req.ID == "") == !estop {
				return usageError("give an agent ID or --estop (one of them)")
			}
			cl := f.client()
			defer cl.Close()
			res, err := cl.Release(c.Context(), req)
			if err != nil {
				return ctlError(err, cl.Path())
			}
			if asJSON {
				return writeJSONOut(c.OutOrStdout(), res)
			}
			if estop {
				fmt.Fprintln(c.OutOrStdout(), "e-stop released; agents start again")
			} else {
				fmt.Fprintf(c.OutOrStdout(), "agent %s released\n", display.Clean(req.ID))
			}
			return nil
		},
	}
	f.addTo(c)
	c.Flags().BoolVar(&estop, "estop", false, "release the e-stop: every agent it holds starts again")
	c.Flags().BoolVar(&asJSON, "json", false, "print the daemon's answer as JSON: {id, state} or {estop}")
	c.ValidArgsFunction = completeAgentIDs(f)
	return c
}

func requireReason(reason string) error {
	if strings.TrimSpace(reason) == "" {
		return usageError("--reason TEXT is required: say why (it is recorded in the death certificates and the audit log)")
	}
	return nil
}

// waitError is ctlError, saying what an interrupted wait means.
func waitError(err error, socket string) error {
	if errors.Is(err, context.Canceled) {
		return &exitError{code: exitFailure, err: errors.New(
			"interrupted: stopped waiting; the kills go on in the daemon (see `hermeskilld ps` and `hermeskilld events`)")}
	}
	return ctlError(err, socket)
}

// printKills prints one line per agent: on stdout for a kill, on stderr
// for a failure (then the status is exitFailure).
func printKills(out, errw io.Writer, res []control.KillResult, waited bool) error {
	failed := 0
	for _, r := range res {
		id := display.Clean(r.ID)
		switch {
		case r.Error != "":
			failed++
			fmt.Fprintf(errw, "hermeskilld: agent %s: %s\n", id, display.Clean(r.Error))
		case !waited:
			fmt.Fprintf(out, "agent %s: kill started\n", id)
		default:
			where := r.Certificate
			if where == "" {
				where = "not written (see the daemon's log)"
			}
			fmt.Fprintf(out, "agent %s killed; escalation reached %s; certificate: %s\n", id, display.OrDash(display.Clean(r.Reached)), display.Clean(where))
		}
	}
	if failed > 0 {
		return &exitError{code: exitFailure}
	}
	return nil
}

// parseTimeOrAgo parses an RFC 3339 time, or a duration meaning that long
// before now.
func parseTimeOrAgo(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := config.ParseDuration(s)
	if err != nil || d == 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-12-02T10:00:00Z) nor a duration ago (2h, 30m)", s)
	}
	return now.Add(-d), nil
}
