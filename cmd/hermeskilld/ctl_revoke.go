// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/display"
)

func newRevoke() *cobra.Command {
	f := &killFlags{}
	c := &cobra.Command{
		Use:   "revoke {ID | --selector SELECTOR | --started-before TIME} --reason TEXT",
		Short: "Standing revocation: kill matching agents, withdraw their LLM access, refuse new starts",
		Long: `Store a standing revocation rule. Every running agent it matches is killed
through the escalation ladder, whose first step withdraws its LLM gateway
access (its requests are refused from then on); each gets a death
certificate. Agents the rule matches by id or by --selector are refused any
new start (state "revoked" in ps) until the rule is lifted with
` + "`hermeskilld revocations lift RULE`" + `; --started-before matches runs, so it kills
but blocks no new start. Rules survive daemon restarts and reboots.

` + selectorHelp + "`",
		Example: `  hermeskilld revoke research-bot --reason "leaked prompt injection"
  hermeskilld revoke --selector model=qwen2.5-7b --reason "model recalled"
  hermeskilld revocations
  hermeskilld revocations lift r1`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			req := control.RevokeRequest{Selector: f.selector.Sel}
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
			if (req.ID == "") == !byMatch {
				return usageError("name the agent (ID), or select agents with --selector and/or --started-before, not both")
			}
			cl := f.ctl.client()
			defer cl.Close()
			res, err := cl.Revoke(c.Context(), req)
			if err != nil {
				return ctlError(err, cl.Path())
			}
			fmt.Fprintf(c.OutOrStdout(), "revocation %s stored: %s\n", res.Revocation.Rule, ruleText(res.Revocation))
			if len(res.Killed) == 0 {
				fmt.Fprintln(c.OutOrStdout(), "no running agent matched")
				return nil
			}
			return printKills(c.OutOrStdout(), c.ErrOrStderr(), res.Killed, false)
		},
	}
	f.ctl.addTo(c)
	fl := c.Flags()
	fl.StringVar(&f.reason, "reason", "", "why (required): recorded in the certificates and the audit log")
	addSelectorFlag(c, &f.ctl, &f.selector, "the agents whose labels match SELECTOR")
	fl.StringVar(&f.startedBefore, "started-before", "", "the running agents started before TIME (RFC 3339, or a duration ago such as 2h)")
	c.ValidArgsFunction = completeAgentIDs(&f.ctl)
	return c
}

func newRevocations() *cobra.Command {
	f := &ctlFlags{}
	var asJSON bool
	c := &cobra.Command{
		Use:   "revocations",
		Short: "List standing revocations (and lift them)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl := f.client()
			defer cl.Close()
			list, err := cl.Revocations(c.Context())
			if err != nil {
				return ctlError(err, cl.Path())
			}
			return printList(c.OutOrStdout(), list, asJSON, "no standing revocation",
				"RULE\tMATCHES\tSINCE\tOPERATOR\tREASON", func(r control.Revocation) string {
					return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", display.Clean(r.Rule), display.Clean(ruleText(r)),
						r.Since.UTC().Format(time.RFC3339), display.OrDash(display.Clean(r.Operator)), display.Clean(r.Reason))
				})
		},
	}
	f.addTo(c)
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	c.AddCommand(newLift(f, "lift RULE", "Lift a standing revocation: the agents it held may start again",
		"revocation %s lifted", func(ctx context.Context, cl *control.Client, rule string) error {
			return cl.Lift(ctx, control.LiftRequest{Rule: rule})
		}))
	return c
}

// ruleText says what a rule matches.
func ruleText(r control.Revocation) string {
	var parts []string
	if r.ID != "" {
		parts = append(parts, "agent "+r.ID)
	}
	if !r.Selector.Empty() {
		parts = append(parts, "labels "+r.Selector.String())
	}
	if !r.StartedBefore.IsZero() {
		parts = append(parts, "runs started before "+r.StartedBefore.UTC().Format(time.RFC3339))
	}
	return strings.Join(parts, ", ")
}
