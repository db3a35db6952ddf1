// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/display"
)

func newEvents() *cobra.Command {
	f := &ctlFlags{}
	var asJSON bool
	var agent string
	c := &cobra.Command{
		Use:   "events",
		Short: "Follow the daemon's events as they happen",
		Long: `Print the daemon's events as they happen, one line each: time, type, agent
and message (agents starting and exiting, symptoms, ladder steps,
certificates, operator requests, config changes). Runs until interrupted
(Ctrl-C) or the daemon stops. --json prints each event as one JSON object a
line.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx, stop := interruptible(c.Context())
			defer stop()
			ctx, cancel := context.WithCancel(ctx) // also ends the stream when stdout fails
			defer cancel()
			cl := f.client()
			defer cl.Close()
			out := c.OutOrStdout()
			var werr error
			err := cl.Events(ctx, func(e control.Event) {
				if werr != nil || (agent != "" && e.AgentID != agent) {
					return
				}
				if asJSON {
					var b []byte
					if b, werr = json.Marshal(e); werr == nil {
						_, werr = fmt.Fprintf(out, "%s\n", b)
					}
				} else {
					_, werr = fmt.Fprintf(out, "%s %s %s %s\n", stampText(e.Time), display.Clean(e.Type), display.OrDash(display.Clean(e.AgentID)), display.Clean(e.Message))
				}
				if werr != nil {
					cancel()
				}
			})
			if werr != nil {
				return &exitError{code: exitFailure, err: werr}
			}
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return nil // interrupted: the normal end
			}
			return ctlError(err, cl.Path())
		},
	}
	f.addTo(c)
	c.Flags().BoolVar(&asJSON, "json", false, "print each event as a JSON line")
	c.Flags().StringVar(&agent, "agent", "", "only this agent's events")
	_ = c.RegisterFlagCompletionFunc("agent", completeAgentFlag(f))
	return c
}
