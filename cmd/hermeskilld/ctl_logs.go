// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/display"
)

func newLogs() *cobra.Command {
	f := &ctlFlags{}
	var follow, raw bool
	var tail string
	c := &cobra.Command{
		Use:   "logs [-f] [--tail N] ID",
		Short: "Print an agent's output (stdout and stderr), and follow it",
		Long: `Print what an agent wrote to its stdout and stderr, as the daemon keeps it in
state_dir/logs/ID.log and its rotated files (logs: {max_bytes, keep} in the
daemon file): everything kept, oldest first, or the last --tail N lines.
With -f the command then follows the output as the agent writes it, across
rotations and restarts, until interrupted (Ctrl-C) or the daemon stops.

The output comes through the daemon's control API, so the same rule applies
as to status and certificates: root, control.read_group and
control.operators_group may read it. Agents whose file was removed keep
their log, and it can still be read.

The bytes are printed as the agent wrote them, except on a terminal, where
control characters and escape sequences are shown escaped (\x1b, \r) so
that an agent's output cannot drive your terminal; --raw prints them as
they are there too.`,
		Example: `  hermeskilld logs research-bot
  hermeskilld logs --tail 50 research-bot
  hermeskilld logs -f research-bot
  hermeskilld logs -f --tail 0 research-bot   # only what comes from now on`,
		Args:              exactlyOneID,
		ValidArgsFunction: completeAgentIDs(f),
		RunE: func(c *cobra.Command, args []string) error {
			req := control.LogsRequest{Tail: -1, Follow: follow}
			if tail != "all" {
				n, err := strconv.Atoi(tail)
				if err != nil || n < 0 {
					return usageError("--tail %q: a number of lines (0 or more), or all", tail)
				}
				req.Tail = n
			}
			out := c.OutOrStdout()
			if f, ok := out.(*os.File); ok && !raw && isTerminal(f) {
				out = &inertLines{w: out}
			}
			ctx, stop := interruptible(c.Context())
			defer stop()
			cl := f.client()
			defer cl.Close()
			err := cl.Logs(ctx, args[0], req, out)
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return nil // interrupted: the normal end of -f
			}
			return ctlError(err, cl.Path())
		},
	}
	f.addTo(c)
	fl := c.Flags()
	fl.BoolVarP(&follow, "follow", "f", false, "go on printing what the agent writes, until interrupted")
	fl.StringVarP(&tail, "tail", "n", "all", "only the last N lines (all: everything kept)")
	fl.BoolVar(&raw, "raw", false, "print control characters as they are, even on a terminal")
	return c
}

// inertLines writes output for a terminal: each line (tabs kept) through
// display.CleanKeepTabs, newlines as they are. It keeps no state, so a
// line split across writes comes out the same.
type inertLines struct{ w io.Writer }

func (l *inertLines) Write(p []byte) (int, error) {
	var b bytes.Buffer
	for rest := p; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			b.WriteString(display.CleanKeepTabs(string(rest)))
			break
		}
		b.WriteString(display.CleanKeepTabs(string(rest[:i])))
		b.WriteByte('\n')
		rest = rest[i+1:]
	}
	if _, err := l.w.Write(b.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}
