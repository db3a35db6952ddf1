// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/hermeskill/hermeskilld/internal/display"
)

// TailLines is how many lines of each output stream Render shows.
const TailLines = 20

// Render writes c for a person, as `hermeskilld certs show` prints it: a
// headline (which agent, when, how it died and why), the certificate's
// identity (with the audit log's head when it carries one), the symptoms, the ladder with the time of each step, the final
// state, the process tree, the survivors, the last lines of the agent's
// output and whether it is signed. Render does not verify the signature.
//
// Every string from the certificate is printed with control characters
// (and Unicode bidirectional controls) escaped, so an agent cannot put
// terminal escape sequences in front of the operator reading its death.
func Render(w io.Writer, c *Certificate) error {
	var b bytes.Buffer
	r := &renderer{b: &b, c: c}
	r.headline()
	r.identity()
	r.symptoms()
	r.pauses()
	r.shutdown()
	r.finalState()
	r.egress()
	r.processTree()
	r.survivors()
	r.output("stderr", c.LastOutput, func(o *LastOutput) string { return o.Stderr })
	r.output("stdout", c.LastOutput, func(o *LastOutput) string { return o.Stdout })
	r.signature()
	_, err := w.Write(b.Bytes())
	return err
}

type renderer struct {
	b *bytes.Buffer
	c *Certificate
}

func (r *renderer) printf(format string, args ...any) { fmt.Fprintf(r.b, format, args...) }

// table writes the rows fn writes through a tabwriter (cells end with a
// tab; text after the last tab is not aligned), without trailing blanks.
func (r *renderer) table(flags uint, fn func(w io.Writer)) {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', flags)
	fn(tw)
	tw.Flush()
	for _, l := range strings.SplitAfter(buf.String(), "\n") {
		if l != "" {
			r.b.WriteString(strings.TrimRight(l, " \n") + "\n")
		}
	}
}

func (r *renderer) headline() {
	c := r.c
	agent := display.OrDash(display.Clean(c.AgentID))
	why := display.Clean(c.TriggerCheck)
	if c.TriggerReason != "" {
		why += ": " + display.Clean(c.TriggerReason)
	}
	switch {
	case c.Mode == ModeShadow:
		r.printf("%s would have been killed (%s) [shadow mode: nothing was signalled]\n", agent, why)
	case c.Mode == ModePaused:
		r.printf("%s paused (%s) [pause record: LLM requests held, tree frozen until `hermeskilld resume %s` or the pause timeout]\n", agent, why, agent)
	case c.TriggerType == TriggerExternal:
		r.printf("%s died (%s), not killed by hermeskilld\n", agent, why)
	case c.TriggerType == TriggerManual:
		by := "an operator"
		if c.Operator != nil {
			by = "operator " + display.Clean(*c.Operator)
		}
		reason := display.Clean(c.TriggerReason)
		if c.OperatorReason != nil {
			reason = display.Clean(*c.OperatorReason)
		}
		r.printf("%s killed by %s (manual: %s)\n", agent, by, reason)
	default:
		r.printf("%s killed (%s)\n", agent, why)
	}

	var parts []string
	if t := sortTime(c); !t.IsZero() {
		parts = append(parts, "at "+t.UTC().Format("2006-01-02 15:04:05.000 UTC"))
	}
	if c.Escalation.Reached != "" {
		s := "escalation reached " + display.Clean(c.Escalation.Reached)
		if !c.TriggeredAt.IsZero() && !c.TerminatedAt.IsZero() {
			s += " after " + dur(c.TerminatedAt.Sub(c.TriggeredAt))
		}
		parts = append(parts, s)
	}
	if e := exitText(c.Exit); e != "" {
		parts = append(parts, e)
	}
	if !c.StartedAt.IsZero() && !c.TriggeredAt.IsZero() {
		parts = append(parts, "ran "+dur(c.TriggeredAt.Sub(c.StartedAt)))
	}
	if len(parts) > 0 {
		r.printf("  %s\n", strings.Join(parts, "; "))
	}
	r.printf("\n")
}

func (r *renderer) identity() {
	c := r.c
	r.table(0, func(tw io.Writer) {
		fmt.Fprintf(tw, "certificate\t%s  %s\n", display.OrDash(display.Clean(c.CertID)), display.Clean(c.Schema))
		agent := fmt.Sprintf("%s  pid %d  host %s  mode %s", display.OrDash(display.Clean(c.AgentID)), c.PID, display.OrDash(display.Clean(c.Host)), display.OrDash(display.Clean(c.Mode)))
		if c.Containment != "" {
			agent += "  containment " + display.Clean(c.Containment)
		}
		if c.Confinement != "" {
			agent += "  confinement " + display.Clean(c.Confinement)
		}
		fmt.Fprintf(tw, "agent\t%s\n", agent)
		if len(c.Labels) > 0 {
			var l []string
			for _, k := range slices.Sorted(maps.Keys(c.Labels)) {
				l = append(l, display.Clean(k)+"="+display.Clean(c.Labels[k]))
			}
			fmt.Fprintf(tw, "labels\t%s\n", strings.Join(l, " "))
		}
		fmt.Fprintf(tw, "command\t%s\n", display.OrDash(commandLine(c.Command)))
		fmt.Fprintf(tw, "started\t%s\n", stamp(c.StartedAt))
		fmt.Fprintf(tw, "triggered\t%s  %s %s\n", stamp(c.TriggeredAt), display.Clean(c.TriggerType), display.Clean(c.TriggerCheck))
		fmt.Fprintf(tw, "terminated\t%s\n", stamp(c.TerminatedAt))
		if c.Operator != nil || c.OperatorReason != nil {
			op := display.OrDash(cleanPtr(c.Operator))
			if c.OperatorReason != nil {
				op += " (" + display.Clean(*c.OperatorReason) + ")"
			}
			fmt.Fprintf(tw, "operator\t%s\n", op)
		}
		fmt.Fprintf(tw, "exit\t%s\n", display.OrDash(exitText(c.Exit)))
		if m := c.Metered; m != nil {
			cost := fmt.Sprintf("$%.4f", m.CostUSD)
			unpriced := false
			for _, u := range m.Models {
				unpriced = unpriced || !u.Priced
			}
			if unpriced {
				cost += " (a model had no price)"
			}
			if m.UsageUnknown > 0 {
				cost += fmt.Sprintf(" (%d charged at their reservation: usage unknown)", m.UsageUnknown)
			}
			line := fmt.Sprintf("%d requests, %d tokens, %s", m.Requests, m.Tokens, cost)
			if m.Refused > 0 || m.Errors > 0 {
				line += fmt.Sprintf(", %d refused, %d errors", m.Refused, m.Errors)
			}
			if !m.RevokedAt.IsZero() {
				line += ", revoked " + stamp(m.RevokedAt)
			}
			fmt.Fprintf(tw, "metered\t%s (gateway)\n", line)
			for _, u := range m.Models {
				fmt.Fprintf(tw, "\t  %s: %d requests, in %d (cached %d), out %d, $%.4f\n", display.Clean(u.Model), u.Requests,
					u.InputTokens, u.CachedInputTokens, u.OutputTokens, u.CostUSD)
			}
		}
		if c.ParentRun != "" {
			fmt.Fprintf(tw, "parent run\t%s (its spend is the parent's too)\n", display.Clean(c.ParentRun))
		}
		for i, ch := range c.Children {
			key := ""
			if i == 0 {
				key = "sub-agents"
			}
			fmt.Fprintf(tw, "%s\t%s: %d requests, %d tokens, $%.4f\n", key, display.Clean(ch.Run), ch.Requests, ch.Tokens, ch.CostUSD)
		}
		if a := c.AuditAnchor; a != nil {
			fmt.Fprintf(tw, "audit log\tseq %d  sha256 %s\n", a.Seq, display.OrDash(display.Clean(a.SHA256)))
		}
	})
}

func (r *renderer) symptoms() {
	r.printf("\nsymptoms (%d)\n", len(r.c.SymptomsLog))
	if len(r.c.SymptomsLog) == 0 {
		return
	}
	r.table(0, func(tw io.Writer) {
		fmt.Fprintf(tw, "  AT\tSEVERITY\tCHECK\tOBSERVED\tTHRESHOLD\tMESSAGE\n")
		for _, s := range r.c.SymptomsLog {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", r.clock(s.At), display.Clean(s.Severity), display.Clean(s.Check),
				display.OrDash(display.Clean(s.Observed)), display.OrDash(display.Clean(s.Threshold)), display.Clean(s.Message))
		}
	})
}

func (r *renderer) pauses() {
	if len(r.c.Pauses) == 0 {
		return
	}
	r.printf("\npauses (%d)\n", len(r.c.Pauses))
	r.table(0, func(tw io.Writer) {
		fmt.Fprintf(tw, "  PAUSED\tCHECK\tFROZEN\tHELD\tFOR\tENDED\tDETAIL\n")
		for _, p := range r.c.Pauses {
			ended := display.OrDash(display.Clean(p.Ended))
			detail := display.Clean(p.Budget)
			if p.Operator != "" {
				detail = strings.TrimSpace(detail + " by " + display.Clean(p.Operator))
			}
			if p.FreezeError != "" {
				detail = strings.TrimSpace(detail + " not frozen: " + display.Clean(p.FreezeError))
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.clock(p.PausedAt), display.Clean(p.Check), display.OrDash(display.Clean(p.Frozen)),
				p.HeldRequests, dur(time.Duration(p.DurationMS*float64(time.Millisecond))), ended, display.OrDash(detail))
		}
	})
}

func (r *renderer) shutdown() {
	e := r.c.Escalation
	r.printf("\nshutdown: reached %s (coop signal %s, coop grace %d ms, term grace %d ms)\n",
		display.OrDash(display.Clean(e.Reached)), display.OrDash(display.Clean(e.CoopSignal)), e.CoopGraceMS, e.TermGraceMS)
	if len(r.c.ShutdownLog) == 0 {
		return
	}
	r.table(0, func(tw io.Writer) {
		fmt.Fprintf(tw, "  STEP\tAT\tMS\tDETAIL\n")
		for _, s := range r.c.ShutdownLog {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", display.Clean(s.Step), r.clock(s.At),
				strconv.FormatFloat(s.DurationMS, 'f', 2, 64), detailText(s.Detail))
		}
	})
}

func (r *renderer) finalState() {
	f := r.c.FinalState
	r.printf("\nfinal state\n")
	r.table(0, func(tw io.Writer) {
		fmt.Fprintf(tw, "  status\t%s\n", display.OrDash(display.Clean(f.Status)))
		fmt.Fprintf(tw, "  progress\t%d\n", f.Progress)
		u := display.Usage{Tokens: uint64(max(f.Tokens, 0)), CostUSD: f.CostUSD,
			ReportedTokens: uint64(max(f.Tokens, 0)), ReportedCostUSD: f.CostUSD}
		usd := func(v float64) string { return "$" + strconv.FormatFloat(v, 'f', -1, 64) }
		if m := r.c.Metered; m != nil {
			// What the checks counted, as the metered line above words
			// it; final_state keeps the agent's own report, shown beside.
			u.Metered, u.Tokens, u.CostUSD, u.CostKnown = true, uint64(max(m.Tokens, 0)), m.CostUSD, m.CostKnown
			usd = func(v float64) string { return fmt.Sprintf("$%.4f", v) }
		}
		fmt.Fprintf(tw, "  tokens\t%s\n", u.TokensText())
		fmt.Fprintf(tw, "  cost\t%s\n", u.CostText(usd))
		fmt.Fprintf(tw, "  last tool\t%s\n", display.OrDash(display.Clean(f.LastTool)))
		hb := "none"
		if !f.LastHeartbeatAt.IsZero() {
			hb = stamp(f.LastHeartbeatAt)
			if !r.c.TriggeredAt.IsZero() {
				hb += " (" + dur(r.c.TriggeredAt.Sub(f.LastHeartbeatAt)) + " before the trigger)"
			}
		}
		fmt.Fprintf(tw, "  last heartbeat\t%s\n", hb)
		fmt.Fprintf(tw, "  heartbeats\t%d\n", f.Heartbeats)
		fmt.Fprintf(tw, "  peak rss\t%s\n", bytesText(f.PeakRSSBytes))
		fmt.Fprintf(tw, "  cpu\t%.2f s user, %.2f s sys\n", f.CPUUserS, f.CPUSysS)
		fmt.Fprintf(tw, "  procs killed\t%d\n", f.ProcsKilled)
		errs := strconv.FormatInt(f.Errors, 10)
		if f.Errno != nil {
			errs += fmt.Sprintf(" (errno %d)", *f.Errno)
		}
		fmt.Fprintf(tw, "  errors\t%s\n", errs)
	})
}

// egress is the egress proxy's figures (network: allowlist), with its
// top destinations.
func (r *renderer) egress() {
	e := r.c.Egress
	if e == nil {
		return
	}
	allow := make([]string, len(e.Allow))
	for i, a := range e.Allow {
		allow[i] = display.Clean(a)
	}
	r.printf("\negress: allow %s\n", display.OrDash(strings.Join(allow, ", ")))
	r.table(0, func(tw io.Writer) {
		fmt.Fprintf(tw, "  passed\t%d (%d failed, %d over the tunnel bound)\n", e.Passed, e.Failed, e.OverCap)
		fmt.Fprintf(tw, "  refused\t%d\n", e.Refused)
		fmt.Fprintf(tw, "  bytes\t%s out, %s in\n", bytesText(e.BytesOut), bytesText(e.BytesIn))
		last := "none"
		if !e.LastByteAt.IsZero() {
			last = stamp(e.LastByteAt)
			if !r.c.TriggeredAt.IsZero() {
				if d := e.LastByteAt.Sub(r.c.TriggeredAt); d >= 0 {
					last += " (" + dur(d) + " after the trigger)"
				} else {
					last += " (" + dur(-d) + " before the trigger)"
				}
			}
		}
		fmt.Fprintf(tw, "  last byte\t%s\n", last)
		if e.Revoked {
			fmt.Fprintf(tw, "  revoked\t%d tunnels cut\n", e.TunnelsCut)
		}
	})
	if len(e.Destinations) == 0 {
		return
	}
	r.table(0, func(tw io.Writer) {
		fmt.Fprintf(tw, "  DESTINATION\tPASSED\tFAILED\tREFUSED\tOUT\tIN\tREFUSED FOR\n")
		for _, d := range e.Destinations {
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%s\t%s\t%s\n", display.Clean(d.Destination), d.Passed, d.Failed, d.Refused,
				bytesText(d.BytesOut), bytesText(d.BytesIn), display.OrDash(display.Clean(d.RefusedReason)))
		}
	})
	if e.DestinationsOmitted > 0 {
		r.printf("  (%d more destinations)\n", e.DestinationsOmitted)
	}
}

func (r *renderer) processTree() {
	r.printf("\nprocess tree (%d)\n", len(r.c.ProcessTree))
	if len(r.c.ProcessTree) == 0 {
		return
	}
	r.table(tabwriter.AlignRight, func(tw io.Writer) {
		fmt.Fprintf(tw, "PID\tPPID\tS\tRSS\tCPU s\tTHREADS\tFDS\t  COMMAND\n")
		for _, p := range r.c.ProcessTree {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%.2f\t%d\t%d\t  %s\n", p.PID, p.PPID, display.OrDash(display.Clean(p.State)),
				bytesText(p.RSSBytes), p.CPUS, p.Threads, p.FDs, display.Cut(display.Clean(p.Cmdline), 100))
		}
	})
}

func (r *renderer) survivors() {
	if len(r.c.Survivors) == 0 {
		r.printf("\nsurvivors: none\n")
		return
	}
	r.printf("\nsurvivors (%d): still alive when hermeskilld gave up\n", len(r.c.Survivors))
	r.table(0, func(tw io.Writer) {
		fmt.Fprintf(tw, "  PID\tS\tCOMMAND\n")
		for _, s := range r.c.Survivors {
			fmt.Fprintf(tw, "  %d\t%s\t%s\n", s.PID, display.OrDash(display.Clean(s.State)), display.Cut(display.Clean(s.Cmdline), 100))
		}
	})
}

func (r *renderer) output(name string, o *LastOutput, get func(*LastOutput) string) {
	if o == nil || get(o) == "" {
		return
	}
	lines := strings.Split(strings.TrimSuffix(get(o), "\n"), "\n")
	shown := lines[max(0, len(lines)-TailLines):]
	r.printf("\nlast %s (last %d of %d lines)\n", name, len(shown), len(lines))
	for _, l := range shown {
		r.printf("  | %s\n", display.CleanKeepTabs(l))
	}
}

func (r *renderer) signature() {
	s := r.c.Signature
	if s == nil {
		r.printf("\nsignature: none (unsigned)\n")
		return
	}
	r.printf("\nsignature: %s by key %s (not checked here: hermeskilld certs verify)\n",
		display.OrDash(display.Clean(s.Alg)), display.OrDash(display.Clean(s.KeyID)))
}

// clock formats t as a time of day when it is on the trigger's UTC day, as a
// full time stamp otherwise.
func (r *renderer) clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	t = t.UTC()
	if tr := r.c.TriggeredAt.UTC(); t.YearDay() == tr.YearDay() && t.Year() == tr.Year() {
		return t.Format("15:04:05.000")
	}
	return stamp(t)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func dur(d time.Duration) string { return d.Round(time.Millisecond).String() }

func exitText(e Exit) string {
	var s string
	switch {
	case e.Signal != nil:
		s = "signal " + display.Clean(*e.Signal)
	case e.Code != nil:
		s = "exit code " + strconv.Itoa(*e.Code)
	default:
		return ""
	}
	if e.CoreDumped {
		s += " (core dumped)"
	}
	return s
}

func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, i := float64(n)/unit, 0
	for ; v >= unit && i < 4; i++ {
		v /= unit
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + []string{"KiB", "MiB", "GiB", "TiB", "PiB"}[i]
}

func detailText(d map[string]any) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(d)) {
		parts = append(parts, display.Clean(k)+"="+display.Clean(fmt.Sprint(d[k])))
	}
	return display.Cut(strings.Join(parts, " "), 80)
}

// commandLine joins argv, single-quoting arguments a shell would split.
func commandLine(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("-_./=:,+@%", r))
		}) < 0 {
			q[i] = display.Clean(a)
			continue
		}
		q[i] = "'" + display.Clean(strings.ReplaceAll(a, "'", `'\''`)) + "'"
	}
	return strings.Join(q, " ")
}

func cleanPtr(s *string) string {
	if s == nil {
		return ""
	}
	return display.Clean(*s)
}
