// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

// version is set at build time (-ldflags "-X main.version=…", as make
// build and make deb do); otherwise versionString asks the build info.
var version = ""

// Exit statuses of hermeskilld itself (as `supervise --help` lists them,
// 126 and 127 as a shell's); an agent's own status is passed through
// unchanged.
const (
	exitFailure      = 1   // an operator command failed
	exitDaemonAbsent = 3   // the daemon is not running / unreachable
	exitForbidden    = 4   // the caller lacks the group for the request
	exitUsage        = 125 // hermeskilld failed: bad flags, socket, cgroup
	exitNotExec      = 126
	exitNotFound     = 127
)

// exitError carries an exit status out of a command.
type exitError struct {
	code int
	err  error // nil: already reported
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// usageError marks a bad invocation (exit 125).
func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// run executes the command line and returns the process exit status.
func run(args []string) int {
	// Not dumpable: no process of our user — an agent under supervise —
	// may open our descriptors through /proc/PID/fd (the keeper's pipe,
	// the cgroup, the gateway's key), read our memory or ptrace us. Only
	// root can. (Reset by execve: agents are dumpable as usual.)
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	root := newRoot(os.Stdout, os.Stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(os.Stderr, "hermeskilld: %v\n", ee.err)
		}
		return ee.code
	}
	// Cobra's own errors: unknown flags, bad flag values, wrong arguments.
	fmt.Fprintf(os.Stderr, "hermeskilld: %v\nRun 'hermeskilld --help' for usage.\n", err)
	return exitUsage
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "hermeskilld",
		Short: "The out-of-process kill switch for AI agents",
		Long: `hermeskilld supervises AI agents as child processes. It watches their
heartbeats (an sd_notify-compatible Unix socket) and what they report about
progress, spend and tool calls, and what the kernel says about their
processes. When an agent wedges, loops or overspends it escalates — a
cooperative stop, then SIGTERM, then SIGKILL to the whole process tree — and
writes a death certificate: a JSON record of why, when and how it died.

Run one agent in the foreground:
  hermeskilld supervise --heartbeat-timeout 30s -- python3 agent.py

Run many as a service and operate them:
  hermeskilld daemon --config /etc/hermeskill/hermeskilld.yaml
  hermeskilld ps | status ID | logs -f ID | stop ID | start ID | restart ID
  hermeskilld kill ID --reason TEXT | estop --reason TEXT

Prove this host can halt an agent:
  hermeskilld selftest [--config /etc/hermeskill/hermeskilld.yaml]`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError("%v\nRun '%s --help' for usage.", err, c.CommandPath())
	})
	root.AddCommand(newSupervise(), newDaemon(),
		newPS(), newStatus(), newLogs(), newStop(), newStart(), newRestart(), newKill(), newEstop(), newRelease(), newResume(),
		newRevoke(), newRevocations(), newBudgets(), newEvents(), newCerts(),
		newCalibrate(), newAudit(), newKeygen(), newCheckConfig(), newSelftest(), newSelftestCanary(), newVersion())
	registerCompletions(root)
	return root
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintf(c.OutOrStdout(), "hermeskilld %s\n", versionString())
			return nil
		},
	}
}

// versionString is the version that `hermeskilld version` prints: the one
// set at build time, else what the Go toolchain recorded (buildVersion).
func versionString() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	return buildVersion(bi)
}

// buildVersion is the main module's version as the toolchain recorded it
// (`go install …@v1.2.0` records "v1.2.0"; a build in a checkout
// "(devel)", or since Go 1.24 a pseudo-version), followed by the VCS
// revision, when recorded and not already part of the version, and
// whether the tree had uncommitted changes:
// "(devel) vcs 1a2b3c4 (modified)". Builds with -buildvcs=false record no
// revision.
func buildVersion(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev string
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	// A pseudo-version (v0.0.0-20261202101503-1a2b3c4d5e6f+dirty) already
	// names the revision in its 12-hex-digit prefix.
	if rev == "" || strings.Contains(v, rev[:min(12, len(rev))]) {
		return v
	}
	v += " vcs " + rev[:min(7, len(rev))]
	if modified {
		v += " (modified)"
	}
	return v
}
