// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/daemon"
)

const defaultDaemonConfig = "/etc/hermeskill/hermeskilld.yaml"

func newDaemon() *cobra.Command {
	var (
		path string
		log  = logFlags{format: "json", level: "info"}
	)
	c := &cobra.Command{
		Use:   "daemon [--config FILE]",
		Short: "Supervise every agent declared in a directory (the systemd service)",
		Long: `Run as the host's agent supervisor. Every YAML file in agents_dir is an
agent: adding a file starts it, editing it applies new checks at once (the
command, user, env and cwd at the next start), removing it stops the agent
through the ladder. Killed agents stay down (quarantine) until
'hermeskilld release ID'; creating estop_file, or 'hermeskilld estop', stops
every agent. Operators use ps, status, kill, estop, release, events and certs
against runtime_dir/control.sock.

SIGTERM stops every agent through the ladder (certificates with operator
daemon-shutdown) and exits; SIGHUP reloads the daemon file and every agent
file. Under systemd (Type=notify) it sends READY=1 once the control socket
listens and pings the watchdog from its main loop.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := config.LoadDaemon(path)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			lg, err := log.newLogger()
			if err != nil {
				return err
			}
			defer lg.Sync() //nolint:errcheck // stderr
			// A long-lived process of many small, similar agents: trade a
			// little GC CPU for a heap that stays near its live size.
			debug.SetGCPercent(50)
			d, err := daemon.New(daemon.Options{Config: cfg, ConfigPath: path, Version: versionString(), Log: lg})
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if err := d.Run(context.Background()); err != nil {
				lg.Error("daemon", zap.Error(err))
				return &exitError{code: exitFailure}
			}
			return nil
		},
	}
	c.Flags().StringVar(&path, "config", defaultDaemonConfig, "the daemon file (YAML)")
	c.Flags().StringVar(&log.format, "log-format", "json", "console or json")
	c.Flags().StringVar(&log.level, "log-level", "info", "debug, info, warn or error")
	return c
}

func newCheckConfig() *cobra.Command {
	var agent bool
	c := &cobra.Command{
		Use:   "check-config FILE...",
		Short: "Validate daemon or agent files without starting anything",
		Long: `Check each FILE: a daemon file (it has state_dir, agents_dir, defaults, …)
or an agent file (it has id, command, checks, …; --agent forces it). Every
error names its file and line. Beyond the schema, each file is checked
against this host as the daemon checks it when it starts: a daemon file's
control groups and defaults.user must exist, and its agents_dir too (except
the default /etc/hermeskill/agents.d, which the daemon creates); an agent
file's user must exist, its cwd must be a directory that user can enter,
and its command must resolve (a bare name through this process's PATH, as
the daemon resolves it through its own) to a file that user may execute,
with search permission on every directory on the way. Exit status 0 when
all are valid, 1 otherwise.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, files []string) error {
			bad := 0
			for _, f := range files {
				kind, note, err := config.CheckFile(f, agent)
				if err != nil {
					bad++
					fmt.Fprintln(c.ErrOrStderr(), err)
					continue
				}
				fmt.Fprintf(c.OutOrStdout(), "%s: valid %s file%s\n", f, kind, note)
			}
			if bad > 0 {
				return &exitError{code: exitFailure}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&agent, "agent", false, "treat every FILE as an agent file")
	return c
}
