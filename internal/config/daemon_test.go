// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"io/fs"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLoadDaemonDesignExample(t *testing.T) {
	const path = "testdata/daemon/ok-example-hermeskilld.yaml"
	d, err := LoadDaemon(path)
	require.NoError(t, err)

	defs := d.Defaults.Agent()
	d.Defaults = Defaults{}
	require.Equal(t, &Daemon{
		StateDir:   "/var/lib/hermeskill",
		RuntimeDir: "/run/hermeskill",
		AgentsDir:  "/etc/hermeskill/agents.d",
		EstopFile:  "/run/hermeskill/STOP",
		Control:    Control{ReadGroup: "hermeskill", OperatorsGroup: "hermeskill-ops"},
		Metrics:    Metrics{Listen: "127.0.0.1:9464", AgentLabelLimit: 1000},
		SigningKey: "/etc/hermeskill/signing.key",
		ControlPlane: &ControlPlane{
			URL: "https://cp.example/api", TokenFile: "/etc/hermeskill/cp.token",
			PollInterval: 10 * time.Second, Timeout: 10 * time.Second, MaxOutbox: 10000,
		},
		Containment:   ContainmentAuto,
		Audit:         AuditOpts{MaxBytes: 64 << 20, Keep: 5},
		Logs:          LogOpts{MaxBytes: 10 << 20, Keep: 3},
		HeartbeatRate: 1000,
		Source:        path,
	}, d)

	want := DefaultAgent()
	want.Escalation = Escalation{CoopSignal: syscall.SIGINT, CoopGrace: 10 * time.Second, TermGrace: 5 * time.Second, DumpWait: 200 * time.Millisecond, AckWait: 250 * time.Millisecond}
	want.Checks.HeartbeatTimeout = 30 * time.Second
	require.Equal(t, want, defs)
}

func TestLoadDaemonMinimal(t *testing.T) {
	d, err := LoadDaemon("testdata/daemon/ok-minimal.yaml")
	require.NoError(t, err)
	require.Equal(t, "/tmp/hk/state", d.StateDir)
	require.Equal(t, "/tmp/hk/run", d.RuntimeDir)
	require.Equal(t, "/tmp/hk/agents", d.AgentsDir)
	require.Equal(t, "/tmp/hk/run/STOP", d.EstopFile, "derived from runtime_dir")
	require.Nil(t, d.ControlPlane)
	require.Equal(t, DefaultAgent(), d.Defaults.Agent())
}

func TestLoadDaemonFull(t *testing.T) {
	d, err := LoadDaemon("testdata/daemon/ok-full.yaml")
	require.NoError(t, err)
	require.Equal(t, Control{ReadGroup: "1001", OperatorsGroup: "hermeskill-ops"}, d.Control)
	require.Equal(t, Metrics{Listen: ":9464", AgentLabelLimit: 200}, d.Metrics)
	require.Equal(t, &ControlPlane{URL: "http://127.0.0.1:8080/api", PollInterval: 0, Timeout: 3 * time.Second, MaxOutbox: 500}, d.ControlPlane)
	require.Equal(t, ContainmentPgroup, d.Containment)
	require.Equal(t, AuditOpts{MaxBytes: 128 << 20, Keep: 10}, d.Audit)
	require.Equal(t, LogOpts{MaxBytes: 1 << 20, Keep: 0}, d.Logs)
	require.Equal(t, 50, d.HeartbeatRate)

	a := d.Defaults.Agent()
	require.Equal(t, ModeShadow, a.Mode)
	require.Equal(t, AfterKillRestart, a.AfterKill)
	require.Equal(t, "bots", a.User)
	require.Equal(t, map[string]string{"site": "lab"}, a.Labels)
	require.Equal(t, map[string]string{"PYTHONUNBUFFERED": "1"}, a.Env)
	require.Equal(t, RestartAlways, a.Restart.Policy)
	require.Equal(t, 2*time.Second, a.Restart.Backoff)
	require.Equal(t, 3*time.Second, a.Escalation.CoopGrace)
	require.Equal(t, 5*time.Second, a.Escalation.TermGrace)
	require.Equal(t, &Sustained{Warn: 1 << 30, Kill: 2 << 30, For: 10 * time.Second}, a.Checks.Memory)
	require.Equal(t, &ToolLoop{Repeats: 5}, a.Checks.ToolLoop)
}

func TestParseDaemonEmptyMapping(t *testing.T) {
	d, err := ParseDaemon([]byte("{}\n"), "hk.yaml")
	require.NoError(t, err)
	want := DefaultDaemon()
	want.Source = "hk.yaml"
	require.Equal(t, want, d)
}

func TestLoadDaemonBadFixtures(t *testing.T) {
	for file, want := range map[string]string{
		"bad-empty.yaml":                    `: empty file: write {} to run with every default, or see the documentation`,
		"bad-unknown-key.yaml":              `:2: unknown key "agent_dir" (known: state_dir, runtime_dir, agents_dir, estop_file, control, metrics, signing_key, control_plane, gateway, telemetry, containment, audit, logs, heartbeat_rate, budgets, defaults); did you mean "agents_dir"?`,
		"bad-relative-path.yaml":            `:1: state_dir: "var/lib/hermeskill" must be an absolute path`,
		"bad-defaults-size.yaml":            `:4: defaults.checks.memory.kill: bad size "2Gb": unknown unit "Gb" (want ` + sizeForms + `)`,
		"bad-defaults-id.yaml":              `:3: defaults: "id" cannot be defaulted: set it in each agent file (defaults may set labels, user, env, mode, after_kill, on_budget, pause_timeout, restart, escalation, checks)`,
		"bad-defaults-warn-above-kill.yaml": `:5: defaults.checks.tokens: warn 2000 is above kill 1000`,
		"bad-control-plane-http.yaml":       `:2: control_plane.url: "http://cp.example/api": use https (the bearer token would travel in clear text); http is allowed only to localhost`,
		"bad-metrics-listen.yaml":           `:2: metrics.listen: must be a string, got integer 9464 (quote it: "9464")`,
		"bad-syntax.yaml":                   `:2: YAML syntax: did not find expected ',' or '}'`,
	} {
		t.Run(file, func(t *testing.T) {
			path := "testdata/daemon/" + file
			_, err := LoadDaemon(path)
			require.EqualError(t, err, path+want)
			require.ErrorIs(t, err, ErrInvalid)
		})
	}
}

func TestParseDaemonErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, err string
	}{
		{"null document", "~\n", `hk.yaml: empty file: write {} to run with every default, or see the documentation`},
		{"comments only", "# nothing\n", `hk.yaml: empty file: write {} to run with every default, or see the documentation`},
		{"list document", "- a\n", `hk.yaml:1: the file must be a mapping (key: value), got a list`},
		{"empty path", "state_dir: \"\"\n", `hk.yaml:1: state_dir: must not be empty (remove the key for the default)`},
		{"relative estop", "estop_file: STOP\n", `hk.yaml:1: estop_file: "STOP" must be an absolute path`},
		{"path number", "agents_dir: 1\n", `hk.yaml:1: agents_dir: must be a string, got integer 1 (quote it: "1")`},
		{"group bool", "control: {read_group: yes, operators_group: true}\n", `hk.yaml:1: control.operators_group: must be a string, got boolean true (quote it: "true")`},
		{"control unknown", "control:\n  admins: root\n", `hk.yaml:2: control: unknown key "admins" (known: read_group, operators_group)`},
		{"listen without port", "metrics: {listen: localhost}\n", `hk.yaml:1: metrics.listen: "localhost" must be host:port such as 127.0.0.1:9464`},
		{"listen bad port", "metrics: {listen: \":99999\"}\n", `hk.yaml:1: metrics.listen: ":99999" must be host:port such as 127.0.0.1:9464`},
		{"label limit negative", "metrics: {agent_label_limit: -1}\n", `hk.yaml:1: metrics.agent_label_limit: must not be negative, got -1`},
		{"control plane without url", "control_plane:\n  token_file: /x\n", `hk.yaml:1: control_plane.url: required`},
		{"control plane empty mapping", "control_plane: {}\n", `hk.yaml:1: control_plane.url: required`},
		{"control plane scalar", "control_plane: https://cp\n", `hk.yaml:1: control_plane: must be a mapping (key: value), got string "https://cp"`},
		{"url scheme", "control_plane: {url: \"ftp://cp/x\"}\n", `hk.yaml:1: control_plane.url: "ftp://cp/x" must be an absolute http(s) URL such as https://cp.example/api`},
		{"url relative", "control_plane: {url: /api}\n", `hk.yaml:1: control_plane.url: "/api" must be an absolute http(s) URL such as https://cp.example/api`},
		{"url query", "control_plane: {url: \"https://cp/api?x=1\"}\n", `hk.yaml:1: control_plane.url: "https://cp/api?x=1" must not have a query, a fragment or credentials (use token_file)`},
		{"url credentials", "control_plane: {url: \"https://u:p@cp/api\"}\n", `hk.yaml:1: control_plane.url: "https://u:p@cp/api" must not have a query, a fragment or credentials (use token_file)`},
		{"token relative", "control_plane: {url: \"https://cp\", token_file: cp.token}\n", `hk.yaml:1: control_plane.token_file: "cp.token" must be an absolute path`},
		{"timeout zero", "control_plane:\n  url: https://cp\n  timeout: 0\n", `hk.yaml:3: control_plane.timeout: must be above 0`},
		{"outbox zero", "control_plane:\n  url: https://cp\n  max_outbox: 0\n", `hk.yaml:3: control_plane.max_outbox: must be at least 1`},
		{"containment", "containment: docker\n", `hk.yaml:1: containment: must be one of auto, cgroup, pgroup, got "docker"`},
		{"audit size", "audit: {max_bytes: 64M}\n", `hk.yaml:1: audit.max_bytes: bad size "64M": unknown unit "M" (want ` + sizeForms + `)`},
		{"logs keep", "logs: {keep: -1}\n", `hk.yaml:1: logs.keep: must not be negative, got -1`},
		{"heartbeat rate zero", "heartbeat_rate: 0\n", `hk.yaml:1: heartbeat_rate: must be at least 1`},
		{"defaults command", "defaults:\n  command: [x]\n", `hk.yaml:2: defaults: "command" cannot be defaulted: set it in each agent file (defaults may set labels, user, env, mode, after_kill, on_budget, pause_timeout, restart, escalation, checks)`},
		{"defaults cwd", "defaults:\n  cwd: /x\n", `hk.yaml:2: defaults: "cwd" cannot be defaulted: set it in each agent file (defaults may set labels, user, env, mode, after_kill, on_budget, pause_timeout, restart, escalation, checks)`},
		{"defaults typo", "defaults:\n  chekcs: {}\n", `hk.yaml:2: defaults: unknown key "chekcs" (known: labels, user, env, mode, after_kill, on_budget, pause_timeout, restart, escalation, checks); did you mean "checks"?`},
		{"defaults list", "defaults: [a]\n", `hk.yaml:1: defaults: must be a mapping (key: value), got a list`},
		{"defaults min above timeout", "defaults:\n  checks:\n    heartbeat_timeout: 1s\n    heartbeat_timeout_min: 2s\n", `hk.yaml:4: defaults.checks.heartbeat_timeout_min: 2s is above heartbeat_timeout 1s`},
		{"defaults env reserved", "defaults:\n  env:\n    WATCHDOG_USEC: \"1\"\n", `hk.yaml:3: defaults.env.WATCHDOG_USEC: set by hermeskilld for the agent, cannot be overridden`},
		{"defaults restart", "defaults:\n  restart: {backoff: 10m}\n", `hk.yaml:2: defaults.restart.backoff: 10m is above max_backoff 5m`},
		{"duplicate", "state_dir: /a\nstate_dir: /b\n", `hk.yaml:2: duplicate key "state_dir" (first at line 1)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseDaemon([]byte(tc.yaml), "hk.yaml")
			require.EqualError(t, err, tc.err)
			require.ErrorIs(t, err, ErrInvalid)
		})
	}
}

func TestParseDaemonAccepts(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		check      func(t *testing.T, d *Daemon)
	}{
		{"paths are cleaned", "state_dir: /var/lib//hermeskill/\nruntime_dir: /run/x/../hk\n", func(t *testing.T, d *Daemon) {
			require.Equal(t, "/var/lib/hermeskill", d.StateDir)
			require.Equal(t, "/run/hk/STOP", d.EstopFile)
		}},
		{"explicit estop wins", "runtime_dir: /r\nestop_file: /e/STOP\n", func(t *testing.T, d *Daemon) { require.Equal(t, "/e/STOP", d.EstopFile) }},
		{"http to localhost", "control_plane: {url: \"http://localhost:8080/api\"}\n", func(t *testing.T, d *Daemon) {
			require.Equal(t, "http://localhost:8080/api", d.ControlPlane.URL)
		}},
		{"http to ::1", "control_plane: {url: \"http://[::1]:8080\"}\n", func(t *testing.T, d *Daemon) {
			require.Equal(t, "http://[::1]:8080", d.ControlPlane.URL)
		}},
		{"null control plane", "control_plane:\n", func(t *testing.T, d *Daemon) { require.Nil(t, d.ControlPlane) }},
		{"empty listen", "metrics: {listen: \"\"}\n", func(t *testing.T, d *Daemon) { require.Empty(t, d.Metrics.Listen) }},
		{"ipv6 listen", "metrics: {listen: \"[::1]:9464\"}\n", func(t *testing.T, d *Daemon) { require.Equal(t, "[::1]:9464", d.Metrics.Listen) }},
		{"rotation off", "audit: {max_bytes: 0}\n", func(t *testing.T, d *Daemon) { require.Equal(t, AuditOpts{Keep: 5}, d.Audit) }},
		{"empty defaults", "defaults:\n", func(t *testing.T, d *Daemon) { require.Equal(t, DefaultAgent(), d.Defaults.Agent()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ParseDaemon([]byte(tc.yaml), "hk.yaml")
			require.NoError(t, err)
			tc.check(t, d)
		})
	}
}

func TestLoadDaemonMissingFile(t *testing.T) {
	_, err := LoadDaemon("testdata/daemon/does-not-exist.yaml")
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NotErrorIs(t, err, ErrInvalid)
}
