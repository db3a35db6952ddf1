// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/display"
)

// The lists of what the daemon holds against agents (standing
// revocations, budgets across runs) print alike and are lifted alike.

// printList prints a list the daemon returned: as JSON with asJSON (an
// empty list as []), the line none when it is empty, else a table of
// header and row's line for each.
func printList[T any](w io.Writer, list []T, asJSON bool, none, header string, row func(T) string) error {
	if asJSON {
		return writeJSONOut(w, nonNilList(list))
	}
	if len(list) == 0 {
		fmt.Fprintln(w, none)
		return nil
	}
	tw := newTable(w)
	fmt.Fprintln(tw, header)
	for _, x := range list {
		fmt.Fprintln(tw, row(x))
	}
	return tw.Flush()
}

// newLift is the `lift NAME` command of such a list: lift asks the
// daemon, and the command prints done with NAME in it (%s).
func newLift(f *ctlFlags, use, short, done string, lift func(ctx context.Context, cl *control.Client, name string) error) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			cl := f.client()
			defer cl.Close()
			if err := lift(c.Context(), cl, args[0]); err != nil {
				return ctlError(err, cl.Path())
			}
			fmt.Fprintf(c.OutOrStdout(), done+"\n", display.Clean(args[0]))
			return nil
		},
	}
	f.addTo(c)
	return c
}

func nonNilList[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
