// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/display"
	"github.com/hermeskill/hermeskilld/internal/labels"
)

// Exit statuses of the operator commands (ps, status, kill, estop, release,
// events, certs), all in one place:
//
//	0                 done
//	exitFailure  (1)  the operation failed: a kill that did not happen, a
//	                  certificate that does not verify, a file not found
//	exitDaemonAbsent (3) the daemon is not running (no socket, or nobody
//	                  listens on it): control.ErrNoDaemon
//	exitForbidden (4) permission denied: the daemon refused the caller
//	                  (or the socket's mode did): control.ErrForbidden
//	exitUsage  (125)  bad flags or arguments
//
// They are declared with the other statuses in root.go.

// ctlFlags are the flags of every command that talks to the daemon.
type ctlFlags struct {
	socket string
}

// addTo adds --control-socket to c and its subcommands.
func (f *ctlFlags) addTo(c *cobra.Command) {
	c.PersistentFlags().StringVar(&f.socket, "control-socket", "",
		"the daemon's control socket (default $"+control.EnvSocket+", else "+control.DefaultSocketPath+")")
}

func (f *ctlFlags) path() string { return control.SocketPath(f.socket) }

// client returns a client of the daemon; the caller closes it.
func (f *ctlFlags) client() *control.Client { return control.NewClient(f.path()) }

// ctlError turns a control client error into the command's exit status
// and message.
func ctlError(err error, socket string) error {
	var ee *exitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		return err
	case errors.Is(err, control.ErrNoDaemon):
		what := "no socket at " + socket
		if nd := (*control.NoDaemonError)(nil); errors.As(err, &nd) && nd.Refused {
			what = "nothing listens on " + socket
		}
		return &exitError{code: exitDaemonAbsent, err: fmt.Errorf(
			"the daemon is not running (%s); start it with `systemctl start hermeskilld` or pass --control-socket", what)}
	case errors.Is(err, control.ErrForbidden):
		return &exitError{code: exitForbidden, err: err}
	default:
		return &exitError{code: exitFailure, err: err}
	}
}

// psFlags are the flags of ps.
type psFlags struct {
	ctl      ctlFlags
	asJSON   bool
	format   string
	selector labels.Flag
	noTrunc  bool
	quiet    bool
}

func newPS() *cobra.Command {
	f := &psFlags{}
	c := &cobra.Command{
		Use:   "ps [--selector SELECTOR] [-q | --format wide|json] [--no-trunc]",
		Short: "List the daemon's agents",
		Long: `List the agents of the running daemon: their state, main pid, uptime, the age
of their last heartbeat, progress, reported cost, warnings, and a note that
explains the state (why it is quarantined, the crash-loop limit, a config
error) or, when there is none, the agent's own STATUS text.

--selector lists only the agents whose labels match; the daemon matches
them, by the same rule as kill and revoke. -q prints the ids alone, one a line, for scripts. --format wide
adds the tokens, the restarts and the labels; --format json prints the
API's objects (times that are not known are left out, never shown as a
zero time). The note is cut at 60 characters unless --no-trunc.

` + selectorHelp + "`",
		Example: `  hermeskilld ps
  hermeskilld ps --selector team=research --format wide
  hermeskilld ps -q --selector team=research | xargs -n1 hermeskilld restart`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			format := f.format
			if f.asJSON {
				if format != "" && format != "json" {
					return usageError("--json and --format %s: choose one", format)
				}
				format = "json"
			}
			switch format {
			case "", "table", "wide", "json":
			default:
				return usageError("--format %q: table, wide or json", format)
			}
			if f.quiet && format != "" {
				return usageError("-q prints ids alone: it takes no --format or --json")
			}
			cl := f.ctl.client()
			defer cl.Close()
			var agents []control.AgentInfo
			var err error
			if f.selector.Sel.Empty() {
				agents, err = cl.List(c.Context())
			} else {
				agents, err = cl.ListSelected(c.Context(), f.selector.Sel)
			}
			if err != nil {
				return ctlError(err, cl.Path())
			}
			if !f.selector.Sel.Empty() {
				// The daemon matched them; matched again by the same rule, so
				// that a daemon too old to know the query lists no more.
				agents = slices.DeleteFunc(agents, func(a control.AgentInfo) bool { return !f.selector.Sel.Matches(a.Labels) })
			}
			out := c.OutOrStdout()
			switch {
			case f.quiet:
				for _, a := range agents {
					fmt.Fprintln(out, display.Clean(a.ID))
				}
				return nil
			case format == "json":
				return writeJSONOut(out, nonNilList(agents))
			}
			printPS(out, agents, time.Now(), format == "wide", !f.noTrunc)
			return nil
		},
	}
	f.ctl.addTo(c)
	fl := c.Flags()
	fl.BoolVar(&f.asJSON, "json", false, "print the list as JSON (as --format json)")
	fl.StringVar(&f.format, "format", "", "wide (more columns) or json (default: the table)")
	addSelectorFlag(c, &f.ctl, &f.selector, "only the agents whose labels match SELECTOR")
	fl.BoolVar(&f.noTrunc, "no-trunc", false, "do not cut the note")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "print the agent ids alone")
	return c
}

// selectorHelp ends the help of every command that takes --selector.
const selectorHelp = `SELECTOR is requirements on labels, separated by commas, all of which must
hold: k=v (the label k is present with the value v; k= means present and
empty), k!=v (k is absent or has another value), k (k is present), !k (k
is absent). A repeated --selector adds requirements. A malformed selector
is an error, never "every agent".`

// addSelectorFlag gives c --selector, completed with the daemon's labels.
func addSelectorFlag(c *cobra.Command, f *ctlFlags, sel *labels.Flag, usage string) {
	c.Flags().Var(sel, "selector", usage)
	_ = c.RegisterFlagCompletionFunc("selector", completeSelector(f))
}

func printPS(w io.Writer, agents []control.AgentInfo, now time.Time, wide, trunc bool) {
	tw := newTable(w)
	if wide {
		fmt.Fprintln(tw, "ID\tSTATE\tPID\tUPTIME\tHEARTBEAT\tPROGRESS\tTOKENS\tCOST\tWARN\tRESTARTS\tLABELS\tNOTE")
	} else {
		fmt.Fprintln(tw, "ID\tSTATE\tPID\tUPTIME\tHEARTBEAT\tPROGRESS\tCOST\tWARN\tNOTE")
	}
	for _, a := range agents {
		note := a.Note
		if note == "" && a.Status != "" {
			note = fmt.Sprintf("%q", a.Status)
		}
		note = display.Clean(note)
		if trunc {
			note = display.Cut(note, 60)
		}
		if wide {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%d\t%d\t%s\t%s\n",
				display.Clean(a.ID), display.Clean(a.State), pidText(a.PID), uptime(a, now), ago(a.LastHeartbeatAt, now),
				a.Progress, a.Tokens, cost(a.CostUSD), a.Warnings, a.Restarts, display.OrDash(display.Clean(labelsText(a.Labels))), note)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\n",
			display.Clean(a.ID), display.Clean(a.State), pidText(a.PID), uptime(a, now), ago(a.LastHeartbeatAt, now),
			a.Progress, cost(a.CostUSD), a.Warnings, note)
	}
	tw.Flush()
}

// labelsText is k=v,k=v in key order.
func labelsText(labels map[string]string) string {
	var ls []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		ls = append(ls, k+"="+labels[k])
	}
	return strings.Join(ls, ",")
}

// statusOutputLines is how many lines of the agent's output status shows.
const statusOutputLines = 10

func newStatus() *cobra.Command {
	f := &ctlFlags{}
	var asJSON bool
	var lines int
	c := &cobra.Command{
		Use:   "status ID",
		Short: "Show everything the daemon knows about one agent",
		Long: `Show everything the daemon knows about one agent: its state and why, its
run (pid, heartbeats, what it reported, its process tree), the checks and
the ladder as they apply now, changes pending until the next start, recent
symptoms, its quarantine, and last the final lines of its output
(--lines N, 0 for none; ` + "`hermeskilld logs`" + ` prints more). --json prints the
API's object, without the output.`,
		Args:              exactlyOneID,
		ValidArgsFunction: completeAgentIDs(f),
		RunE: func(c *cobra.Command, args []string) error {
			if lines < 0 {
				return usageError("--lines %d: 0 or more", lines)
			}
			cl := f.client()
			defer cl.Close()
			st, err := cl.Status(c.Context(), args[0])
			if err != nil {
				return ctlError(err, cl.Path())
			}
			if asJSON {
				return writeJSONOut(c.OutOrStdout(), st)
			}
			printStatus(c.OutOrStdout(), st, time.Now())
			if lines > 0 {
				printLastOutput(c.Context(), c.OutOrStdout(), cl, st.ID, lines)
			}
			return nil
		},
	}
	f.addTo(c)
	c.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	c.Flags().IntVar(&lines, "lines", statusOutputLines, "how many of the last lines of the agent's output to show")
	return c
}

// printLastOutput ends status with the agent's last lines of output, each
// made inert; it says so when there is none or it cannot be read.
func printLastOutput(ctx context.Context, w io.Writer, cl *control.Client, id string, n int) {
	var buf bytes.Buffer
	err := cl.Logs(ctx, id, control.LogsRequest{Tail: n}, &buf)
	fmt.Fprintf(w, "\nlast output (hermeskilld logs %s)\n", display.Clean(id))
	switch {
	case err != nil:
		fmt.Fprintf(w, "  (not available: %s)\n", display.Clean(err.Error()))
	case buf.Len() == 0:
		fmt.Fprintln(w, "  (none)")
	default:
		for line := range strings.Lines(buf.String()) {
			fmt.Fprintln(w, "  "+display.CleanKeepTabs(strings.TrimSuffix(line, "\n")))
		}
	}
}

func printStatus(w io.Writer, st control.AgentStatus, now time.Time) {
	head := display.Clean(st.ID) + "  " + display.Clean(st.State)
	if st.Note != "" && st.Note != st.ConfigError { // a file that never parsed: its errors follow
		head += "  (" + display.Clean(st.Note) + ")"
	}
	fmt.Fprintln(w, head)

	section(w, "", func(kv func(k, v string)) {
		kv("pid", pidText(st.PID))
		if !st.StartedAt.IsZero() {
			kv("started", stampText(st.StartedAt)+" (up "+uptime(st.AgentInfo, now)+")")
		}
		kv("heartbeat", ago(st.LastHeartbeatAt, now))
		kv("progress", fmt.Sprint(st.Progress))
		u := usageView(st.AgentInfo)
		kv("tokens", u.TokensText())
		kv("cost", u.CostText(cost))
		if u.Metered {
			kv("LLM requests", u.RequestsText())
		}
		kv("warnings", fmt.Sprint(st.Warnings))
		kv("restarts", fmt.Sprint(st.Restarts))
		if st.Status != "" {
			kv("agent status", fmt.Sprintf("%q", st.Status))
		}
		if len(st.Labels) > 0 {
			var ls []string
			for _, k := range slices.Sorted(maps.Keys(st.Labels)) {
				ls = append(ls, k+"="+st.Labels[k])
			}
			kv("labels", strings.Join(ls, ", "))
		}
		kv("mode", st.Mode)
		kv("containment", st.Containment)
		if st.Confinement != "" {
			kv("confinement", st.Confinement)
		}
		kv("source", st.Source)
		if len(st.Command) > 0 {
			kv("command", strings.Join(st.Command, " "))
		}
		kv("last exit", st.LastExit)
		kv("last certificate", st.LastCert)
	})
	if st.ConfigError != "" {
		// One line per error: a file has as many as it has mistakes.
		fmt.Fprintln(w, "\nconfig error")
		for _, line := range strings.Split(st.ConfigError, "\n") {
			fmt.Fprintln(w, "  "+display.Clean(line))
		}
	}
	if q := st.Quarantine; q != nil {
		section(w, "quarantine", func(kv func(k, v string)) {
			if !q.Since.IsZero() {
				kv("since", stampText(q.Since))
			}
			kv("reason", q.Reason)
			kv("operator", q.Operator)
			kv("release", "hermeskilld release "+st.ID)
		})
	}
	if r := st.Run; r != nil && r.Pause != nil {
		p := r.Pause
		section(w, "pause", func(kv func(k, v string)) {
			kv("since", stampText(p.Since))
			kv("check", p.Check)
			kv("reason", p.Reason)
			kv("frozen", display.OrDash(p.Frozen))
			kv("held requests", fmt.Sprint(p.HeldRequests))
			kv("killed at", stampText(p.TimeoutAt)+" unless resumed")
			kv("resume", "hermeskilld resume "+st.ID+" --max-cost USD | --max-tokens N")
		})
	}
	mapSection(w, "checks", st.Checks)
	mapSection(w, "escalation", st.Escalation)
	if len(st.Pending) > 0 {
		fmt.Fprintln(w, "\npending")
		for _, p := range st.Pending {
			fmt.Fprintln(w, "  "+display.Clean(p))
		}
	}
	if len(st.Symptoms) > 0 {
		fmt.Fprintln(w, "\nrecent symptoms")
		tw := newTable(w)
		fmt.Fprintln(tw, "  TIME\tSEVERITY\tCHECK\tOBSERVED\tTHRESHOLD\tMESSAGE")
		for _, s := range st.Symptoms {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", stampText(s.At), s.Severity, s.Check,
				display.OrDash(display.Clean(s.Observed)), display.OrDash(display.Clean(s.Threshold)), display.Clean(s.Message))
		}
		tw.Flush()
	}
	if r := st.Run; r != nil {
		section(w, "run", func(kv func(k, v string)) {
			a := r.Agent
			kv("state", r.State)
			kv("socket", r.Socket)
			kv("stream socket", r.StreamSocket)
			ready := "no"
			if a.Ready {
				ready = "yes, at " + stampText(a.ReadyAt)
			}
			kv("ready", ready)
			if a.Stopping {
				kv("stopping", "yes (the agent sent STOPPING=1)")
			}
			kv("heartbeats", fmt.Sprint(a.Heartbeats))
			kv("messages", fmt.Sprintf("%d accepted, %d dropped (forged %d, rate-limited %d)",
				r.Messages.Accepted, r.Messages.Dropped, r.Messages.Forged, r.Messages.RateLimited))
			if m := r.Messages; m.StreamAccepted+m.StreamRefused+m.StreamOverLimit > 0 {
				kv("stream connections", fmt.Sprintf("%d accepted, %d refused, %d over the limit, %d dropped",
					m.StreamAccepted, m.StreamRefused, m.StreamOverLimit, m.StreamDropped))
			}
			kv("heartbeat timeout", a.HeartbeatTimeout)
			if !a.LastProgressAt.IsZero() {
				kv("last progress", ago(a.LastProgressAt, now))
			}
			kv("last tool", a.LastTool)
			if a.Errors > 0 {
				kv("errors", fmt.Sprintf("%d (streak %d), last: %s", a.Errors, a.ErrorStreak, display.Clean(a.LastError)))
			}
			fds := "-"
			if r.Tree.FDs != nil {
				fds = fmt.Sprint(*r.Tree.FDs)
			}
			kv("tree", fmt.Sprintf("rss %s, cpu %.0f%%, tasks %d, fds %s", sizeText(r.Tree.RSSBytes), r.Tree.CPUPercent, r.Tree.Tasks, fds))
			if r.Tree.Denials != nil {
				kv("denials", fmt.Sprint(*r.Tree.Denials))
			}
			if e := r.SamplerError; e != nil {
				kv("sampler error", samplerErrorText(*e, now))
			}
			kv("dump signal", a.DumpSignal)
			if t := r.Trigger; t != nil {
				kv("dying of", fmt.Sprintf("%s: %s", t.Check, display.Clean(t.Message)))
			}
		})
	}
}

// samplerErrorText is the kernel sampler's last failure in a line:
// "stat 42: open: too many open files (7 failures, last 0.5s ago; blind for 9.0s)",
// or "…; fds check blind for 9.0s" when only the descriptors are not counted.
func samplerErrorText(e control.SamplerError, now time.Time) string {
	state := "seeing again"
	switch {
	case !e.BlindSince.IsZero():
		state = "blind for " + shortDuration(now.Sub(e.BlindSince))
	case !e.FDsBlindSince.IsZero():
		state = "fds check blind for " + shortDuration(now.Sub(e.FDsBlindSince))
	}
	return fmt.Sprintf("%s (%d failures, last %s; %s)", e.Error, e.Failures, ago(e.At, now), state)
}

// section prints an indented block of "key  value" lines, skipping empty
// values, under a title (none: no title, no blank line).
func section(w io.Writer, title string, fill func(kv func(k, v string))) {
	if title != "" {
		fmt.Fprintln(w, "\n"+title)
	}
	tw := newTable(w)
	fill(func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "  %s\t%s\n", k, display.Clean(v))
		}
	})
	tw.Flush()
}

func mapSection(w io.Writer, title string, m map[string]string) {
	if len(m) == 0 {
		return
	}
	section(w, title, func(kv func(k, v string)) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			kv(display.Clean(k), m[k])
		}
	})
}

// table aligns tab-separated columns (two spaces apart) and, unlike a
// bare tabwriter, leaves no trailing blanks after an empty last column.
type table struct {
	w   io.Writer
	buf bytes.Buffer
	tw  *tabwriter.Writer
}

func newTable(w io.Writer) *table {
	t := &table{w: w}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 4, 2, ' ', 0)
	return t
}

func (t *table) Write(p []byte) (int, error) { return t.tw.Write(p) }

// Flush writes the table out.
func (t *table) Flush() error {
	if err := t.tw.Flush(); err != nil {
		return err
	}
	for line := range strings.Lines(t.buf.String()) {
		if _, err := io.WriteString(t.w, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	t.buf.Reset()
	return nil
}

func writeJSONOut(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func pidText(pid int) string {
	if pid == 0 {
		return "-"
	}
	return fmt.Sprint(pid)
}

// uptime is how long a live agent has run; "-" when it is not running.
func uptime(a control.AgentInfo, now time.Time) string {
	if a.StartedAt.IsZero() || a.PID == 0 {
		return "-"
	}
	return shortDuration(now.Sub(a.StartedAt))
}

// ago is the age of t ("3.2s ago"), "-" when t is zero.
func ago(t time.Time, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return shortDuration(now.Sub(t)) + " ago"
}

// shortDuration: "0.4s", "12s", "5m03s", "2h05m", "3d04h".
func shortDuration(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
	}
}

func cost(usd float64) string { return fmt.Sprintf("$%.2f", usd) }

// usageView is a row's LLM use as the views word it.
func usageView(a control.AgentInfo) display.Usage {
	u := display.Usage{Tokens: a.Tokens, CostUSD: a.CostUSD, ReportedTokens: a.ReportedTokens, ReportedCostUSD: a.ReportedCostUSD}
	if m := a.Metered; m != nil {
		u.Metered, u.Requests, u.InFlight, u.Refused, u.Errors, u.CostKnown = true, m.Requests, m.InFlight, m.Refused, m.Errors, m.CostKnown
	}
	return u
}

// stampText is a time for people: local, to the millisecond.
func stampText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02T15:04:05.000Z07:00")
}

func sizeText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// interruptible is ctx, cancelled by SIGINT or SIGTERM too, for the
// commands that wait (kill, estop, events).
func interruptible(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}
