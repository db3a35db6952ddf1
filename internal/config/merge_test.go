// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLayers: defaults < file < flags, key by key. A section (restart,
// escalation, checks, gateway, control_plane) merges key by key; a check (memory, …) set in a file
// replaces the one below as a whole, while a flag sets one of its keys.
func TestLayers(t *testing.T) {
	type flag struct{ key, value string }
	for _, tc := range []struct {
		name           string
		defaults, file string
		flags          []flag
		check          func(t *testing.T, a *Agent)
	}{
		{
			name:     "a timeout: each layer wins over the one below",
			defaults: "checks: {heartbeat_timeout: 30s, progress_timeout: 5m, max_runtime: 1h}",
			file:     "checks: {heartbeat_timeout: 10s, progress_timeout: 1m}",
			flags:    []flag{{"checks.heartbeat_timeout", "2s"}},
			check: func(t *testing.T, a *Agent) {
				require.Equal(t, 2*time.Second, a.Checks.HeartbeatTimeout, "flag")
				require.Equal(t, time.Minute, a.Checks.ProgressTimeout, "file")
				require.Equal(t, time.Hour, a.Checks.MaxRuntime, "defaults")
				require.Equal(t, DefaultMaxExtension, a.Checks.MaxExtension, "built in")
			},
		},
		{
			name:     "a section merges key by key",
			defaults: "escalation: {coop_signal: SIGUSR1, coop_grace: 3s}\nrestart: {policy: always, backoff: 2s}",
			file:     "escalation: {term_grace: 1s}\nrestart: {max_backoff: 1m}",
			flags:    []flag{{"escalation.coop_grace", "500ms"}},
			check: func(t *testing.T, a *Agent) {
				require.Equal(t, Escalation{CoopSignal: syscall.SIGUSR1, CoopGrace: 500 * time.Millisecond, TermGrace: time.Second, DumpWait: 200 * time.Millisecond, AckWait: 250 * time.Millisecond}, a.Escalation)
				require.Equal(t, Restart{Policy: RestartAlways, Backoff: 2 * time.Second, MaxBackoff: time.Minute, MaxRestarts: 5, Window: 10 * time.Minute, StableAfter: time.Minute}, a.Restart)
			},
		},
		{
			name:     "a check in a file replaces the defaults' whole; a flag sets one key of it",
			defaults: "checks: {memory: {warn: 1GiB, kill: 2GiB, for: 10s}, procs: {warn: 100, kill: 200}}",
			file:     "checks: {memory: {warn: 3GiB, kill: 4GiB}}",
			flags:    []flag{{"checks.memory.kill", "5GiB"}, {"checks.procs.kill", "300"}},
			check: func(t *testing.T, a *Agent) {
				require.Equal(t, &Sustained{Warn: 3 << 30, Kill: 5 << 30}, a.Checks.Memory, "for: 10s is not inherited; warn survives the flag")
				require.Equal(t, &Sustained{Warn: 100, Kill: 300}, a.Checks.Procs, "inherited, then one key set by the flag")
			},
		},
		{
			name:  "a flag creates a check the layers below do not have",
			file:  "checks: {heartbeat_timeout: 1s}",
			flags: []flag{{"checks.cpu_spin.percent", "90"}, {"checks.cpu_spin.for", "1m"}, {"checks.tool_loop.repeats", "4"}, {"checks.cost.kill", "2.5"}},
			check: func(t *testing.T, a *Agent) {
				require.Equal(t, &CPUSpin{Percent: 90, For: time.Minute}, a.Checks.CPUSpin)
				require.Equal(t, &ToolLoop{Repeats: 4}, a.Checks.ToolLoop)
				require.Equal(t, &CostLimit{Kill: 2.5}, a.Checks.Cost)
			},
		},
		{
			name:     "a file turns inherited checks off",
			defaults: "checks: {heartbeat_timeout: 30s, memory: {kill: 1GiB}, tokens: {kill: 5}, tool_loop: 3}",
			file:     "checks: {heartbeat_timeout: 0, memory: {}, tokens: , tool_loop: 0}",
			check: func(t *testing.T, a *Agent) {
				require.Equal(t, Checks{HeartbeatTimeoutMin: 100 * time.Millisecond, MaxExtension: DefaultMaxExtension, SampleInterval: time.Second}, a.Checks)
			},
		},
		{
			name:     "a flag turns a check off",
			defaults: "checks: {memory: {kill: 1GiB}}",
			flags:    []flag{{"checks.memory.kill", "0"}},
			check:    func(t *testing.T, a *Agent) { require.Nil(t, a.Checks.Memory, "normalized away") },
		},
		{
			name:     "labels and env merge, the upper layer's names win",
			defaults: "labels: {team: research, site: lab}\nenv: {A: '1', B: '1'}",
			file:     "labels: {team: infra}\nenv: {B: '2', C: '2'}",
			check: func(t *testing.T, a *Agent) {
				require.Equal(t, map[string]string{"team": "infra", "site": "lab"}, a.Labels)
				require.Equal(t, map[string]string{"A": "1", "B": "2", "C": "2"}, a.Env)
			},
		},
		{
			name:     "scalars: mode, user, after_kill",
			defaults: "mode: shadow\nuser: bots\nafter_kill: restart",
			file:     "user: '1000'",
			flags:    []flag{{"mode", "enforce"}, {"id", "42"}},
			check: func(t *testing.T, a *Agent) {
				require.Equal(t, ModeEnforce, a.Mode)
				require.Equal(t, "1000", a.User)
				require.Equal(t, AfterKillRestart, a.AfterKill)
				require.Equal(t, "42", a.ID, "a flag's text is a string")
			},
		},
		{
			name:  "startup_timeout derives from the merged heartbeat_timeout",
			file:  "checks: {heartbeat_timeout: 30s}",
			flags: []flag{{"checks.heartbeat_timeout", "20s"}},
			check: func(t *testing.T, a *Agent) {
				require.Equal(t, 20*time.Second, a.Checks.StartupTimeout)
				require.Equal(t, 20*time.Second, a.Checks.HeartbeatTimeoutMax)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var defs *Defaults
			if tc.defaults != "" {
				d, err := ParseDaemon([]byte("defaults:\n  "+indent(tc.defaults)), "hk.yaml")
				require.NoError(t, err)
				defs = &d.Defaults
			}
			a, err := ParseAgent([]byte(tc.file), "a.yaml", defs)
			require.NoError(t, err)
			for _, f := range tc.flags {
				require.NoError(t, a.Set(f.key, f.value), f.key)
			}
			a.Normalize()
			require.NoError(t, a.Validate(false))
			tc.check(t, a)
		})
	}
}

func indent(s string) string {
	out := ""
	for i, r := range s {
		out += string(r)
		if r == '\n' && i+1 < len(s) {
			out += "  "
		}
	}
	return out + "\n"
}

func TestSetErrors(t *testing.T) {
	for _, tc := range []struct {
		key, value, err string
		kind            ErrorKind
	}{
		{"chekcs.memory.kill", "1", `unknown key "chekcs"`, ErrUnknownKey},
		{"checks.memroy.kill", "1", `checks: unknown key "memroy"`, ErrUnknownKey},
		{"checks.memory.kill.x", "1", `checks.memory.kill: unknown key "x"`, ErrUnknownKey},
		{"checks.memory", "1GiB", `checks.memory: holds more than one value: set its keys one by one`, ErrBadValue},
		{"labels", "a", `labels: holds more than one value: set its keys one by one`, ErrBadValue},
		{"checks.memory.kill", "2Gb", `checks.memory.kill: bad size "2Gb": unknown unit "Gb" (want ` + sizeForms + `)`, ErrBadValue},
		{"checks.procs.kill", "4KiB", `checks.procs.kill: must be an integer, got string "4KiB"`, ErrBadValue},
		{"checks.heartbeat_timeout", "30", `checks.heartbeat_timeout: bad duration "30": missing unit (e.g. 30s)`, ErrBadValue},
		{"escalation.coop_signal", "SIGFOO", `escalation.coop_signal: unknown signal "SIGFOO" (want a name such as SIGINT or INT, a number 1-31, or none)`, ErrBadValue},
		{"mode", "enforcing", `mode: must be one of enforce, shadow, got "enforcing"`, ErrBadValue},
		{"id", "", `id: must not be empty (remove the key for the default)`, ErrBadValue},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			err := DefaultAgent().Set(tc.key, tc.value)
			require.EqualError(t, err, tc.err)
			require.ErrorIs(t, err, tc.kind)
			require.ErrorIs(t, err, ErrInvalid)
		})
	}
}

// TestSetEveryKey: every key that holds one value can be set from text.
func TestSetEveryKey(t *testing.T) {
	a := DefaultAgent()
	for _, kv := range []struct{ key, value string }{
		{"id", "bot"}, {"user", "1000"}, {"cwd", "/srv"}, {"mode", "shadow"}, {"after_kill", "restart"}, {"on_budget", "pause"}, {"pause_timeout", "10m"},
		{"restart.policy", "on-failure"}, {"restart.backoff", "2s"}, {"restart.max_backoff", "1m"},
		{"restart.max_restarts", "3"}, {"restart.window", "5m"}, {"restart.stable_after", "30s"},
		{"escalation.coop_signal", "none"}, {"escalation.coop_grace", "1s"}, {"escalation.term_grace", "2s"}, {"escalation.dump_wait", "0"}, {"escalation.ack_wait", "100ms"},
		{"checks.startup_timeout", "1m"}, {"checks.heartbeat_timeout", "10s"}, {"checks.heartbeat_timeout_min", "1s"},
		{"checks.heartbeat_timeout_max", "20s"}, {"checks.progress_timeout", "5m"}, {"checks.max_runtime", "2h"},
		{"checks.max_extension", "1h"}, {"checks.sample_interval", "500ms"},
		{"checks.memory.warn", "1GiB"}, {"checks.memory.kill", "1.5GiB"}, {"checks.memory.for", "10s"},
		{"checks.cpu_spin.percent", "95.5"}, {"checks.cpu_spin.for", "2m"}, {"checks.cpu_spin.only_without_progress", "true"},
		{"checks.procs.kill", "256"}, {"checks.fds.warn", "1_000"}, {"checks.tokens.kill", "0x10"},
		{"checks.cost.warn", "4"}, {"checks.tool_loop.repeats", "5"}, {"checks.error_streak.kill", "10"}, {"checks.steps.warn", "400"},
	} {
		require.NoError(t, a.Set(kv.key, kv.value), kv.key)
	}
	require.Equal(t, &Agent{
		ID: "bot", Labels: map[string]string{}, Env: map[string]string{}, User: "1000", Cwd: "/srv", Network: NetworkHost, Mode: ModeShadow, AfterKill: AfterKillRestart,
		OnBudget: OnBudgetPause, PauseTimeout: 10 * time.Minute,
		Restart:    Restart{Policy: RestartOnFailure, Backoff: 2 * time.Second, MaxBackoff: time.Minute, MaxRestarts: 3, Window: 5 * time.Minute, StableAfter: 30 * time.Second},
		Escalation: Escalation{CoopGrace: time.Second, TermGrace: 2 * time.Second, AckWait: 100 * time.Millisecond},
		Checks: Checks{
			StartupTimeout: time.Minute, HeartbeatTimeout: 10 * time.Second, HeartbeatTimeoutMin: time.Second, HeartbeatTimeoutMax: 20 * time.Second,
			ProgressTimeout: 5 * time.Minute, MaxRuntime: 2 * time.Hour, MaxExtension: time.Hour, SampleInterval: 500 * time.Millisecond,
			Memory:      &Sustained{Warn: 1 << 30, Kill: 3 << 29, For: 10 * time.Second},
			CPUSpin:     &CPUSpin{Percent: 95.5, For: 2 * time.Minute, OnlyWithoutProgress: true},
			Procs:       &Sustained{Kill: 256},
			FDs:         &Sustained{Warn: 1000},
			Tokens:      &Limit{Kill: 16},
			Cost:        &CostLimit{Warn: 4},
			ToolLoop:    &ToolLoop{Repeats: 5},
			ErrorStreak: &Limit{Kill: 10},
			Steps:       &Limit{Warn: 400},
		},
	}, a)
}

func TestChecksDescribe(t *testing.T) {
	c := exampleAgent("x.yaml").Checks
	require.Equal(t, []KV{
		{"startup_timeout", "1m"},
		{"heartbeat_timeout", "30s"},
		{"heartbeat_timeout_min", "100ms"},
		{"progress_timeout", "5m"},
		{"max_runtime", "2h"},
		{"max_extension", "30m"},
		{"sample_interval", "1s"},
		{"memory", "warn 1GiB, kill 2GiB for 10s"},
		{"cpu_spin", "95% for 2m without progress"},
		{"procs", "kill 256"},
		{"fds", "kill 4096"},
		{"tokens", "warn 800000, kill 1000000"},
		{"cost", "warn $4.00, kill $5.00"},
		{"tool_loop", "5 repeats"},
		{"error_streak", "kill 10"},
		{"steps", "kill 500"},
	}, c.Describe())

	c = Checks{Memory: &Sustained{Kill: 1536 << 20}, Procs: &Sustained{Warn: 10, For: time.Second}, CPUSpin: &CPUSpin{Percent: 200}, Cost: &CostLimit{Kill: 0.5}}
	require.Equal(t, []KV{
		{"memory", "kill 1.5GiB"},
		{"cpu_spin", "200%"},
		{"procs", "warn 10 for 1s"},
		{"cost", "kill $0.50"},
	}, c.Describe())
	require.Empty(t, Checks{}.Describe(), "everything off")
}

func TestEscalationDescribe(t *testing.T) {
	require.Equal(t, []KV{{"coop_signal", "SIGINT"}, {"coop_grace", "10s"}, {"term_grace", "5s"}, {"dump_wait", "200ms"}, {"ack_wait", "250ms"}}, DefaultAgent().Escalation.Describe())
	require.Equal(t, []KV{{"coop_signal", "none"}, {"coop_grace", "0"}, {"term_grace", "1m"}, {"dump_wait", "0"}, {"ack_wait", "0"}}, Escalation{TermGrace: time.Minute}.Describe())
}
