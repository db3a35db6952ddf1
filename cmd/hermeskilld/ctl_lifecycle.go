// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/display"
)

// stop, start and restart: the everyday lifecycle of one agent, as
// opposed to kill (which quarantines it) and estop.

type lifecycleFlags struct {
	ctl    ctlFlags
	reason string
	noWait bool
	asJSON bool
}

func newStop() *cobra.Command {
	f := &lifecycleFlags{}
	c := &cobra.Command{
		Use:   "stop ID [--reason TEXT]",
		Short: "Stop an agent through the escalation ladder, without quarantine",
		Long: `Stop a running agent through the escalation ladder (a cooperative stop,
SIGTERM, SIGKILL to the whole tree), as an operator's stop: it gets a death
certificate (trigger "manual", operator: you) but, unlike kill, it is not
quarantined. Its restart policy then decides, as after any exit: with
"never" (or "on-failure" when it exits 0 to the cooperative stop) it stays
down until ` + "`hermeskilld start ID`" + `; with "always" (or "on-failure" after
a signal) it starts again after its backoff. To keep an agent down whatever
its policy, kill it. An agent waiting out a restart backoff is kept down:
its pending restart is cancelled.

By default the command waits until the run has ended and prints the stage
the ladder reached and the certificate; --no-wait returns once the ladder
has begun. Interrupting the wait does not stop the stop.`,
		Example: `  hermeskilld stop research-bot
  hermeskilld stop research-bot --reason "maintenance window"
  hermeskilld start research-bot`,
		Args:              exactlyOneID,
		ValidArgsFunction: completeAgentIDs(&f.ctl),
		RunE: func(c *cobra.Command, args []string) error {
			ctx, stop := interruptible(c.Context())
			defer stop()
			cl := f.ctl.client()
			defer cl.Close()
			res, err := cl.Stop(ctx, control.StopRequest{ID: args[0], Reason: f.reason, Wait: !f.noWait})
			if err != nil {
				return stopWaitError(err, cl.Path())
			}
			if f.asJSON {
				return writeJSONOut(c.OutOrStdout(), res)
			}
			printAction(c.OutOrStdout(), "stop", res, !f.noWait)
			return nil
		},
	}
	f.ctl.addTo(c)
	fl := c.Flags()
	fl.StringVar(&f.reason, "reason", "", "why (optional): recorded in the certificate and the audit log")
	fl.BoolVar(&f.noWait, "no-wait", false, "return once the ladder has begun")
	fl.BoolVar(&f.asJSON, "json", false, "print the daemon's answer as JSON")
	return c
}

func newStart() *cobra.Command {
	f := &lifecycleFlags{}
	c := &cobra.Command{
		Use:   "start ID",
		Short: "Start an agent that is down: exited, stopped, failed, or in a restart backoff",
		Long: `Start an agent that is down by itself: it exited and its restart policy does
not restart it, an operator stopped it, it is failed (a crash loop: start
clears its restart history), or it is waiting out a restart backoff (it
starts now). Waits until the agent has started and prints its pid.

What holds an agent down on purpose is lifted by its own command, never by
start: a quarantine by ` + "`hermeskilld release ID`" + `, the e-stop by
` + "`hermeskilld release --estop`" + `, a revocation by
` + "`hermeskilld revocations lift RULE`" + `. A running agent is left alone.`,
		Example:           `  hermeskilld start research-bot`,
		Args:              exactlyOneID,
		ValidArgsFunction: completeAgentIDs(&f.ctl),
		RunE: func(c *cobra.Command, args []string) error {
			return f.startRun(c, "start", func(ctx context.Context, cl *control.Client) (control.ActionResult, error) {
				return cl.Start(ctx, control.StartRequest{ID: args[0]})
			})
		},
	}
	f.ctl.addTo(c)
	c.Flags().BoolVar(&f.asJSON, "json", false, "print the daemon's answer as JSON")
	return c
}

func newRestart() *cobra.Command {
	f := &lifecycleFlags{}
	c := &cobra.Command{
		Use:   "restart ID [--reason TEXT]",
		Short: "Stop an agent through the ladder, then start it again at once",
		Long: `Stop a running agent through the escalation ladder, as ` + "`hermeskilld stop`" + `
does (a certificate, no quarantine), then start it again at once, whatever
its restart policy and without waiting out a backoff. An agent that is down
by itself is started, as ` + "`hermeskilld start`" + ` would. Waits until the new run
has started and prints its pid. A run already dying of a check when the
restart arrives keeps that check's consequences (a quarantine, say): then
it is not started again and the command fails, saying so.`,
		Example: `  hermeskilld restart research-bot --reason "new model weights"`,
		Args:    exactlyOneID,
		RunE: func(c *cobra.Command, args []string) error {
			return f.startRun(c, "restart", func(ctx context.Context, cl *control.Client) (control.ActionResult, error) {
				return cl.Restart(ctx, control.RestartRequest{ID: args[0], Reason: f.reason})
			})
		},
		ValidArgsFunction: completeAgentIDs(&f.ctl),
	}
	f.ctl.addTo(c)
	c.Flags().StringVar(&f.reason, "reason", "", "why (optional): recorded in the certificate and the audit log")
	c.Flags().BoolVar(&f.asJSON, "json", false, "print the daemon's answer as JSON")
	return c
}

// startRun asks the daemon for a new run with call (start, restart) and
// prints its answer; it fails when no run was started.
func (f *lifecycleFlags) startRun(c *cobra.Command, verb string,
	call func(context.Context, *control.Client) (control.ActionResult, error)) error {
	ctx, stop := interruptible(c.Context())
	defer stop()
	cl := f.ctl.client()
	defer cl.Close()
	res, err := call(ctx, cl)
	if err != nil {
		return stopWaitError(err, cl.Path())
	}
	if f.asJSON {
		if err := writeJSONOut(c.OutOrStdout(), res); err != nil {
			return err
		}
		return notStarted(res, true)
	}
	printAction(c.OutOrStdout(), verb, res, true)
	return notStarted(res, false)
}

// exactlyOneID is cobra.ExactArgs(1) with a message that says what is
// missing.
func exactlyOneID(_ *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return usageError("name the agent (ID); `hermeskilld ps` lists them")
	case len(args) > 1:
		return usageError("one agent ID, got %d arguments", len(args))
	}
	return nil
}

// stopWaitError is ctlError, saying what an interrupted wait means.
func stopWaitError(err error, socket string) error {
	if errors.Is(err, context.Canceled) {
		return &exitError{code: exitFailure, err: errors.New(
			"interrupted: stopped waiting; the daemon goes on (see `hermeskilld ps` and `hermeskilld events`)")}
	}
	return ctlError(err, socket)
}

// notStarted is the failure of a start or restart the daemon answered
// without a new run (it did not start in time); quiet: already printed.
func notStarted(res control.ActionResult, quiet bool) error {
	if res.PID != 0 {
		return nil
	}
	if quiet {
		return &exitError{code: exitFailure}
	}
	return &exitError{code: exitFailure, err: fmt.Errorf("agent %s did not start: %s", display.Clean(res.ID),
		display.OrDash(display.Clean(res.Note)))}
}

// printAction prints what a stop, start or restart did, in one line.
func printAction(w io.Writer, verb string, res control.ActionResult, waited bool) {
	id := display.Clean(res.ID)
	stopped := ""
	if res.Stopped {
		where := display.Clean(res.Certificate)
		if where == "" {
			where = "not written (see the daemon's log)"
		}
		stopped = fmt.Sprintf("escalation reached %s; certificate: %s", display.OrDash(display.Clean(res.Reached)), where)
	}
	state := display.Clean(res.State)
	if res.Note != "" {
		state += " (" + display.Clean(res.Note) + ")"
	}
	switch {
	case verb == "stop" && !res.Stopped:
		fmt.Fprintf(w, "agent %s was not running; its pending restart is cancelled; now %s\n", id, state)
	case verb == "stop" && !waited:
		fmt.Fprintf(w, "agent %s: stop started\n", id)
	case verb == "stop":
		fmt.Fprintf(w, "agent %s stopped; %s; now %s\n", id, stopped, state)
	case res.PID == 0:
		// notStarted says why on stderr.
	case res.Stopped:
		fmt.Fprintf(w, "agent %s stopped (%s) and started again, pid %d\n", id, stopped, res.PID)
	default:
		fmt.Fprintf(w, "agent %s started, pid %d\n", id, res.PID)
	}
}
