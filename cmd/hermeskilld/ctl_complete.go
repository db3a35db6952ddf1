// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermeskill/hermeskilld/internal/control"
)

// Shell completion (`hermeskilld completion bash|zsh|fish`): agent ids
// and labels come from the running daemon, asked with a short deadline;
// when it cannot answer (not running, not allowed) the completion is
// silently empty. Flags with a fixed set of values complete them.

// completionTimeout bounds how long a completion waits for the daemon.
const completionTimeout = 2 * time.Second

// listForCompletion is the daemon's agents, or nil.
func listForCompletion(cmd *cobra.Command, f *ctlFlags) []control.AgentInfo {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	cl := f.client()
	defer cl.Close()
	agents, err := cl.List(ctx)
	if err != nil {
		return nil
	}
	return agents
}

// completeAgentIDs completes the one ID argument of a command with the
// daemon's agents (the state as the description).
func completeAgentIDs(f *ctlFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return agentIDCompletions(listForCompletion(cmd, f), toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeAgentFlag completes a flag whose value is an agent id.
func completeAgentFlag(f *ctlFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return agentIDCompletions(listForCompletion(cmd, f), toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

func agentIDCompletions(agents []control.AgentInfo, prefix string) []cobra.Completion {
	var out []cobra.Completion
	for _, a := range agents {
		if strings.HasPrefix(a.ID, prefix) {
			out = append(out, cobra.CompletionWithDesc(a.ID, a.State))
		}
	}
	return out
}

// completeSelector completes --selector K=V[,K=V] with the labels of the
// daemon's agents: after the last comma, every K=V pair some agent has.
func completeSelector(f *ctlFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		done, last := "", toComplete
		if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
			done, last = toComplete[:i+1], toComplete[i+1:]
		}
		pairs := map[string]bool{}
		for _, a := range listForCompletion(cmd, f) {
			for k, v := range a.Labels {
				pairs[k+"="+v] = true
			}
		}
		var out []cobra.Completion
		for _, p := range slices.Sorted(maps.Keys(pairs)) {
			if strings.HasPrefix(p, last) {
				out = append(out, done+p)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

// flagEnums are the flags, by name, whose values are a fixed set, with
// what each value means; registerCompletions gives them to every command
// that has such a flag.
var flagEnums = map[string][]cobra.Completion{
	"format": {cobra.CompletionWithDesc("table", "aligned columns (the default)"),
		cobra.CompletionWithDesc("wide", "more columns: tokens, restarts, labels"),
		cobra.CompletionWithDesc("json", "the API's objects")},
	"log-format": {"console", "json"},
	"log-level":  {"debug", "info", "warn", "error"},
	"containment": {cobra.CompletionWithDesc("auto", "cgroup where writable, else pgroup"),
		cobra.CompletionWithDesc("cgroup", "fail without a writable cgroup v2"),
		cobra.CompletionWithDesc("pgroup", "process group and descendants")},
	"coop-signal": {"SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "none"},
	"verdict": {cobra.CompletionWithDesc("true-positive", "the agent had to die"),
		cobra.CompletionWithDesc("false-positive", "the check fired on a healthy agent")},
	"tail": {cobra.CompletionWithDesc("all", "everything kept"), "10", "50", "100"},
}

// registerCompletions walks the command tree and registers the value
// completion of every enum flag (flagEnums) a command has.
func registerCompletions(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for name, values := range flagEnums {
			if c.LocalFlags().Lookup(name) == nil {
				continue
			}
			if _, ok := c.GetFlagCompletionFunc(name); ok {
				continue
			}
			_ = c.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
