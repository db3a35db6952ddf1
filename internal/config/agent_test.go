// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"io/fs"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// exampleAgent is the sample agent file (examples/config) as parsed (not
// normalized): testdata/agent/ok-example-research-bot.yaml.
func exampleAgent(source string) *Agent {
	return &Agent{
		ID:           "research-bot",
		Labels:       map[string]string{"team": "research", "model": "qwen2.5-7b"},
		Command:      []string{"python3", "/opt/bots/research/agent.py"},
		User:         "bots",
		Cwd:          "/opt/bots/research",
		Env:          map[string]string{"LOG_LEVEL": "info"},
		Network:      NetworkHost,
		Mode:         ModeEnforce,
		AfterKill:    AfterKillQuarantine,
		OnBudget:     OnBudgetKill,
		PauseTimeout: DefaultPauseTimeout,
		Restart: Restart{
			Policy: RestartOnFailure, Backoff: time.Second, MaxBackoff: 5 * time.Minute,
			MaxRestarts: 5, Window: 10 * time.Minute, StableAfter: time.Minute,
		},
		Escalation: Escalation{CoopSignal: syscall.SIGINT, CoopGrace: 10 * time.Second, TermGrace: 5 * time.Second, DumpWait: 200 * time.Millisecond, AckWait: 250 * time.Millisecond},
		Checks: Checks{
			StartupTimeout:      60 * time.Second,
			HeartbeatTimeout:    30 * time.Second,
			HeartbeatTimeoutMin: 100 * time.Millisecond,
			ProgressTimeout:     5 * time.Minute,
			MaxRuntime:          2 * time.Hour,
			MaxExtension:        DefaultMaxExtension,
			SampleInterval:      time.Second,
			Memory:              &Sustained{Warn: 1 << 30, Kill: 2 << 30, For: 10 * time.Second},
			CPUSpin:             &CPUSpin{Percent: 95, For: 2 * time.Minute, OnlyWithoutProgress: true},
			Procs:               &Sustained{Kill: 256},
			FDs:                 &Sustained{Kill: 4096},
			Tokens:              &Limit{Warn: 800000, Kill: 1000000},
			Cost:                &CostLimit{Warn: 4, Kill: 5},
			ToolLoop:            &ToolLoop{Repeats: 5},
			ErrorStreak:         &Limit{Kill: 10},
			Steps:               &Limit{Kill: 500},
		},
		Source: source,
	}
}

func TestLoadAgentDesignExample(t *testing.T) {
	const path = "testdata/agent/ok-example-research-bot.yaml"
	a, err := LoadAgent(path, nil)
	require.NoError(t, err)
	require.Equal(t, exampleAgent(path), a)

	a.Normalize()
	require.Equal(t, 30*time.Second, a.Checks.HeartbeatTimeoutMax)
	require.Equal(t, 60*time.Second, a.Checks.StartupTimeout, "an explicit startup_timeout is kept")
	require.NoError(t, a.Validate(true))
}

func TestLoadAgentDesignExampleOverDesignDefaults(t *testing.T) {
	d, err := LoadDaemon("testdata/daemon/ok-example-hermeskilld.yaml")
	require.NoError(t, err)
	const path = "testdata/agent/ok-example-research-bot.yaml"
	a, err := LoadAgent(path, &d.Defaults)
	require.NoError(t, err)
	require.Equal(t, exampleAgent(path), a, "the example sets everything its defaults set")
}

func TestLoadAgentOKFixtures(t *testing.T) {
	for _, tc := range []struct {
		file  string
		check func(t *testing.T, a *Agent)
	}{
		{"ok-empty.yaml", func(t *testing.T, a *Agent) {
			want := DefaultAgent()
			want.Source = "testdata/agent/ok-empty.yaml"
			require.Equal(t, want, a)
		}},
		{"ok-comments-only.yaml", func(t *testing.T, a *Agent) {
			want := DefaultAgent()
			want.Source = "testdata/agent/ok-comments-only.yaml"
			require.Equal(t, want, a)
		}},
		{"ok-budget.yaml", func(t *testing.T, a *Agent) {
			require.Equal(t, &CostLimit{Warn: 1, Kill: 2}, a.Checks.Cost)
			require.Equal(t, 200*time.Millisecond, a.Escalation.CoopGrace)
			require.Equal(t, 200*time.Millisecond, a.Escalation.TermGrace)
			require.Equal(t, syscall.SIGINT, a.Escalation.CoopSignal, "not set: the default")
		}},
		{"ok-short-forms.yaml", func(t *testing.T, a *Agent) {
			require.Equal(t, []string{"python3", "-c", "import time\nwhile True: time.sleep(1)"}, a.Command)
			require.Equal(t, syscall.Signal(0), a.Escalation.CoopSignal)
			require.Equal(t, time.Duration(0), a.Escalation.DumpWait)
			require.Equal(t, 1500*time.Millisecond, a.Checks.HeartbeatTimeout)
			require.Equal(t, &Sustained{Kill: 512 << 20}, a.Checks.Memory)
			require.Equal(t, &ToolLoop{Repeats: 3}, a.Checks.ToolLoop)
			require.Equal(t, &Sustained{Warn: 1000, Kill: 2048, For: 5 * time.Second}, a.Checks.Procs)
			require.Equal(t, &CostLimit{Kill: 5}, a.Checks.Cost)
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			a, err := LoadAgent("testdata/agent/"+tc.file, nil)
			require.NoError(t, err)
			tc.check(t, a)
			a.Normalize()
			require.NoError(t, a.Validate(false))
		})
	}
}

// TestLoadAgentBadFixtures covers one file per error class; the first (and
// only) error must be exact, file and line included.
func TestLoadAgentBadFixtures(t *testing.T) {
	for file, want := range map[string]string{
		"bad-unknown-key.yaml":        `:4: unknown key "chekcs" (known: id, labels, command, user, cwd, env, writable, network, allow, mode, after_kill, on_budget, pause_timeout, restart, escalation, checks, gateway, control_plane); did you mean "checks"?`,
		"bad-unknown-nested-key.yaml": `:5: checks: unknown key "memroy" (known: startup_timeout, heartbeat_timeout, heartbeat_timeout_min, heartbeat_timeout_max, progress_timeout, max_runtime, max_extension, sample_interval, memory, cpu_spin, procs, fds, tokens, cost, tool_loop, error_streak, steps, denials, cost_rate, requests_rate, tokens_rate, egress); did you mean "memory"?`,
		"bad-command-string.yaml":     `:2: command: must be a list of strings such as [python3, agent.py, --fast], got a single string (no shell is involved: split the arguments yourself)`,
		"bad-duration.yaml":           `:4: checks.heartbeat_timeout: bad duration "30": missing unit (e.g. 30s)`,
		"bad-size.yaml":               `:6: checks.memory.kill: bad size "2Gb": unknown unit "Gb" (want ` + sizeForms + `)`,
		"bad-signal.yaml":             `:4: escalation.coop_signal: unknown signal "SIGFOO" (want a name such as SIGINT or INT, a number 1-31, or none)`,
		"bad-enum.yaml":               `:3: mode: must be one of enforce, shadow, got "enforcing"`,
		"bad-negative.yaml":           `:4: checks.tokens.kill: must not be negative, got -5`,
		"bad-warn-above-kill.yaml":    `:5: checks.memory: warn 3GiB is above kill 2GiB`,
		"bad-duplicate-key.yaml":      `:5: checks: duplicate key "heartbeat_timeout" (first at line 4)`,
		"bad-tab.yaml":                `:4: YAML syntax: found character that cannot start any token (YAML does not allow tabs for indentation: use spaces)`,
		"bad-syntax.yaml":             `:2: YAML syntax: did not find expected ',' or ']'`,
		"bad-env-reserved.yaml":       `:5: env.NOTIFY_SOCKET: set by hermeskilld for the agent, cannot be overridden`,
		"bad-env-not-string.yaml":     `:4: env.DEBUG: must be a string, got boolean true (quote it: "true")`,
		"bad-two-documents.yaml":      `:3: more than one YAML document (---); put one configuration in a file`,
		"bad-wrong-type.yaml":         `:3: checks: must be a mapping (key: value), got a list`,
		"bad-id.yaml":                 `:1: id: ".hidden" must be 1-64 letters, digits, '.', '_' or '-', not starting with '.' or '-'`,
	} {
		t.Run(file, func(t *testing.T) {
			path := "testdata/agent/" + file
			_, err := LoadAgent(path, nil)
			require.EqualError(t, err, path+want)
			require.ErrorIs(t, err, ErrInvalid)
			var e *Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, path, e.File)
		})
	}
}

func TestParseAgentErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, err string
	}{
		// document
		{"list document", "- a\n", `agent.yaml:1: the file must be a mapping (key: value), got a list`},
		{"scalar document", "hello\n", `agent.yaml:1: the file must be a mapping (key: value), got string "hello"`},
		{"unknown alias", "id: a\ncommand: *cmd\n", `agent.yaml:2: YAML syntax: alias *cmd refers to no anchor &cmd defined before it`},
		{"syntax on line 1", "id: a: b\n", `agent.yaml:1: YAML syntax: mapping values are not allowed in this context`},
		{"block syntax", "id: x\nchecks:\n  - 1\n  memory: 2\n", `agent.yaml:3: YAML syntax: did not find expected '-' indicator`},
		{"tab indentation", "checks:\n  memory:\n\t kill: 1\n", `agent.yaml:3: YAML syntax: found character that cannot start any token (YAML does not allow tabs for indentation: use spaces)`},
		{"tab after a key", "id: a\n\tcommand: [x]\n", `agent.yaml:2: YAML syntax: found a tab character that violates indentation (YAML does not allow tabs for indentation: use spaces)`},
		{"merge key", "base: &b {id: x}\n<<: *b\n", `agent.yaml:1: unknown key "base" (known: id, labels, command, user, cwd, env, writable, network, allow, mode, after_kill, on_budget, pause_timeout, restart, escalation, checks, gateway, control_plane)` + "\n" +
			`agent.yaml:2: merge keys (<<) are not supported; repeat the keys, or use the daemon's defaults`},
		{"non-string key", "? [a]\n: 1\n", `agent.yaml:1: keys must be strings, got a list`},
		{"unknown key, no suggestion", "zzz: 1\n", `agent.yaml:1: unknown key "zzz" (known: id, labels, command, user, cwd, env, writable, network, allow, mode, after_kill, on_budget, pause_timeout, restart, escalation, checks, gateway, control_plane)`},
		{"duplicate top key", "id: a\nid: b\n", `agent.yaml:2: duplicate key "id" (first at line 1)`},
		// id
		{"id integer", "id: 42\n", `agent.yaml:1: id: must be a string, got integer 42 (quote it: "42")`},
		{"id date", "id: 2024-01-01\n", `agent.yaml:1: id: must be a string, got date 2024-01-01 (quote it: "2024-01-01")`},
		{"id empty", "id: \"\"\n", `agent.yaml:1: id: must not be empty (remove the key for the default)`},
		{"id dash", "id: -x\n", `agent.yaml:1: id: "-x" must be 1-64 letters, digits, '.', '_' or '-', not starting with '.' or '-'`},
		{"id slash", "id: a/b\n", `agent.yaml:1: id: "a/b" must be 1-64 letters, digits, '.', '_' or '-', not starting with '.' or '-'`},
		{"id too long", "id: " + strings.Repeat("a", 65) + "\n", `agent.yaml:1: id: "` + strings.Repeat("a", 65) + `" must be 1-64 letters, digits, '.', '_' or '-', not starting with '.' or '-'`},
		{"id null", "id:\n", `agent.yaml:1: id: missing value (want a string)`},
		// command
		{"command empty", "command: []\n", `agent.yaml:1: command: must not be empty: the argv list such as [python3, agent.py]`},
		{"command number", "command: [sleep, 10]\n", `agent.yaml:1: command[1]: must be a string, got integer 10 (quote it: "10")`},
		{"command null", "command:\n", `agent.yaml:1: command: must be a list of strings such as [python3, agent.py], got no value`},
		{"command mapping", "command: {a: b}\n", `agent.yaml:1: command: must be a list of strings such as [python3, agent.py], got a mapping`},
		{"command nested list", "command:\n  - python3\n  - [a]\n", `agent.yaml:3: command[1]: must be a string, got a list`},
		{"command empty program", "id: x\ncommand:\n  - \"\"\n", `agent.yaml:3: command: the program (first element) must not be empty`},
		{"command NUL", "command: [\"a\\0b\"]\n", `agent.yaml:1: command[0]: must not contain a NUL byte`},
		// user, cwd, env, labels
		{"user bool", "user: true\n", `agent.yaml:1: user: must be a string, got boolean true (quote it: "true")`},
		{"user negative uid", "user: -1\n", `agent.yaml:1: user: bad numeric id -1`},
		{"cwd relative", "cwd: work\n", `agent.yaml:1: cwd: "work" must be an absolute path`},
		{"writable relative", "writable:\n  - /tmp\n  - out\n", `agent.yaml:3: writable: "out" must be an absolute path`},
		{"writable empty", "writable: []\n", `agent.yaml:1: writable: must not be empty: name the paths the agent may write beneath, or leave writable out for files unconfined`},
		{"writable string", "writable: /tmp\n", `agent.yaml:1: writable: must be a list of absolute paths such as [/srv/bot, /tmp], got string "/tmp"`},
		{"env bad name", "env:\n  1X: a\n", `agent.yaml:2: env: "1X" is not a valid variable name (letters, digits and '_', not starting with a digit)`},
		{"env reserved", "env: {HERMESKILL_SOCKET: /x}\n", `agent.yaml:1: env.HERMESKILL_SOCKET: set by hermeskilld for the agent, cannot be overridden`},
		{"env reserved stream", "env: {HERMESKILL_STREAM_SOCKET: /x}\n", `agent.yaml:1: env.HERMESKILL_STREAM_SOCKET: set by hermeskilld for the agent, cannot be overridden`},
		{"env null value", "env:\n  A: b\n  FOO:\n", `agent.yaml:3: env.FOO: missing value (want a string)`},
		{"env number", "env: {PORT: 8080}\n", `agent.yaml:1: env.PORT: must be a string, got integer 8080 (quote it: "8080")`},
		{"env list", "env: [A=b]\n", `agent.yaml:1: env: must be a mapping of names to strings, got a list`},
		{"env duplicate", "env:\n  A: b\n  A: c\n", `agent.yaml:3: env: duplicate key "A" (first at line 2)`},
		{"label bad key", "labels:\n  \"a b\": c\n", `agent.yaml:2: labels: "a b" is not a valid label name (up to 63 letters, digits, '_', '.', '/', '-', starting with a letter or '_')`},
		{"label long value", "labels:\n  a: " + strings.Repeat("x", 257) + "\n", `agent.yaml:2: labels.a: longer than 256 bytes`},
		{"label number", "labels: {version: 2}\n", `agent.yaml:1: labels.version: must be a string, got integer 2 (quote it: "2")`},
		// enums
		{"after_kill", "after_kill: respawn\n", `agent.yaml:1: after_kill: must be one of quarantine, restart, got "respawn"`},
		{"mode number", "mode: 1\n", `agent.yaml:1: mode: must be a string, got integer 1 (quote it: "1")`},
		// restart
		{"restart policy", "restart: {policy: sometimes}\n", `agent.yaml:1: restart.policy: must be one of never, on-failure, always, got "sometimes"`},
		{"restart unknown", "restart:\n  backof: 1s\n", `agent.yaml:2: restart: unknown key "backof" (known: policy, backoff, max_backoff, max_restarts, window, stable_after); did you mean "backoff"?`},
		{"restart backoff above max", "restart:\n  backoff: 10m\n", `agent.yaml:2: restart.backoff: 10m is above max_backoff 5m`},
		{"restart window 0", "restart:\n  window: 0\n", `agent.yaml:2: restart.window: must be above 0 when max_restarts is set`},
		{"restart max_restarts float", "restart: {max_restarts: 2.5}\n", `agent.yaml:1: restart.max_restarts: must be an integer, got number 2.5`},
		{"restart scalar", "restart: always\n", `agent.yaml:1: restart: must be a mapping (key: value), got string "always"`},
		// escalation
		{"coop SIGKILL", "escalation: {coop_signal: KILL}\n", `agent.yaml:1: escalation.coop_signal: SIGKILL cannot be caught, so it is no cooperative stop (use none to skip that stage)`},
		{"coop 99", "escalation: {coop_signal: 99}\n", `agent.yaml:1: escalation.coop_signal: unknown signal "99" (want a name such as SIGINT or INT, a number 1-31, or none)`},
		{"coop bool", "escalation: {coop_signal: false}\n", `agent.yaml:1: escalation.coop_signal: must be a signal such as SIGINT, or none, got boolean false`},
		{"coop null", "escalation:\n  coop_signal:\n", `agent.yaml:2: escalation.coop_signal: missing value (want a signal such as SIGINT, or none)`},
		{"grace negative", "escalation:\n  coop_grace: 1s\n  term_grace: -1s\n", `agent.yaml:3: escalation.term_grace: bad duration "-1s": negative`},
		{"grace list", "escalation: {dump_wait: [1s]}\n", `agent.yaml:1: escalation.dump_wait: must be a duration such as 30s, got a list`},
		{"grace bool", "escalation: {dump_wait: true}\n", `agent.yaml:1: escalation.dump_wait: must be a duration such as 30s, got boolean true`},
		// checks: timeouts
		{"timeout float", "checks: {max_runtime: 1.5}\n", `agent.yaml:1: checks.max_runtime: bad duration "1.5": missing unit (e.g. 1.5s)`},
		{"timeout null", "checks:\n  max_runtime:\n", `agent.yaml:2: checks.max_runtime: missing value (want a duration such as 30s)`},
		{"max_extension negative", "checks:\n  max_extension: -5m\n", `agent.yaml:2: checks.max_extension: bad duration "-5m": negative`},
		{"max_extension bare number", "checks: {max_extension: 60}\n", `agent.yaml:1: checks.max_extension: bad duration "60": missing unit (e.g. 60s)`},
		{"sample interval tiny", "checks: {sample_interval: 1ms}\n", `agent.yaml:1: checks.sample_interval: must be at least 10ms`},
		{"min above timeout", "checks:\n  heartbeat_timeout: 1s\n  heartbeat_timeout_min: 2s\n", `agent.yaml:3: checks.heartbeat_timeout_min: 2s is above heartbeat_timeout 1s`},
		{"min above max", "checks:\n  heartbeat_timeout: 1s\n  heartbeat_timeout_max: 5s\n  heartbeat_timeout_min: 6s\n", `agent.yaml:4: checks.heartbeat_timeout_min: 6s is above heartbeat_timeout_max 5s`},
		{"max below timeout", "checks:\n  heartbeat_timeout: 10s\n  heartbeat_timeout_max: 5s\n", `agent.yaml:3: checks.heartbeat_timeout_max: 5s is below heartbeat_timeout 10s`},
		// checks: thresholds
		{"memory float bytes", "checks:\n  memory: {kill: 1.5}\n", `agent.yaml:2: checks.memory.kill: bad size "1.5": a number of bytes must be whole`},
		{"memory negative bytes", "checks:\n  memory: {kill: -1}\n", `agent.yaml:2: checks.memory.kill: must not be negative, got -1`},
		{"memory negative size", "checks:\n  memory: {kill: -1GiB}\n", `agent.yaml:2: checks.memory.kill: bad size "-1GiB": negative`},
		{"memory unknown", "checks:\n  memory: {limit: 1GiB}\n", `agent.yaml:2: checks.memory: unknown key "limit" (known: warn, kill, for)`},
		{"memory scalar", "checks:\n  memory: 2GiB\n", `agent.yaml:2: checks.memory: must be a mapping (key: value), got string "2GiB"`},
		{"memory for", "checks:\n  memory: {kill: 1GiB, for: 10}\n", `agent.yaml:2: checks.memory.for: bad duration "10": missing unit (e.g. 10s)`},
		{"procs string", "checks:\n  procs: {kill: \"256\"}\n", `agent.yaml:2: checks.procs.kill: must be an integer, got string "256"`},
		{"procs float", "checks:\n  procs: {kill: 1.5}\n", `agent.yaml:2: checks.procs.kill: must be an integer, got number 1.5`},
		{"procs huge", "checks:\n  procs: {kill: 99999999999999999999}\n", `agent.yaml:2: checks.procs.kill: must be an integer, got number 99999999999999999999`},
		{"fds size", "checks:\n  fds: {kill: 4KiB}\n", `agent.yaml:2: checks.fds.kill: must be an integer, got string "4KiB"`},
		{"fds explicit str tag", "checks:\n  fds: {kill: !!str 5}\n", `agent.yaml:2: checks.fds.kill: must be an integer, got string "5"`},
		{"tokens warn above kill", "checks:\n  tokens:\n    kill: 10\n    warn: 11\n", `agent.yaml:4: checks.tokens: warn 11 is above kill 10`},
		{"steps warn above kill", "checks:\n  steps: {warn: 11, kill: 10}\n", `agent.yaml:2: checks.steps: warn 11 is above kill 10`},
		{"error streak negative", "checks:\n  error_streak: {kill: -1}\n", `agent.yaml:2: checks.error_streak.kill: must not be negative, got -1`},
		{"cost nan", "checks:\n  cost: {kill: .nan}\n", `agent.yaml:2: checks.cost.kill: must be a finite number, got .nan`},
		{"cost inf", "checks:\n  cost: {kill: .inf}\n", `agent.yaml:2: checks.cost.kill: must be a finite number, got .inf`},
		{"cost string", "checks:\n  cost: {kill: 5 USD}\n", `agent.yaml:2: checks.cost.kill: must be a number, got string "5 USD"`},
		{"cost negative", "checks:\n  cost: {kill: -0.5}\n", `agent.yaml:2: checks.cost.kill: must not be negative, got -0.5`},
		{"cost warn above kill", "checks:\n  cost: {warn: 5.5, kill: 5}\n", `agent.yaml:2: checks.cost: warn 5.5 is above kill 5`},
		{"cpu negative", "checks:\n  cpu_spin: {percent: -5}\n", `agent.yaml:2: checks.cpu_spin.percent: must not be negative, got -5`},
		{"cpu bool", "checks:\n  cpu_spin: {percent: 90, only_without_progress: yes}\n", `agent.yaml:2: checks.cpu_spin.only_without_progress: must be true or false, got string "yes"`},
		{"tool loop 1", "checks:\n  tool_loop: 1\n", `agent.yaml:2: checks.tool_loop: repeats must be at least 2 (or 0 for off), got 1`},
		{"tool loop repeats 1", "checks:\n  tool_loop:\n    repeats: 1\n", `agent.yaml:3: checks.tool_loop: repeats must be at least 2 (or 0 for off), got 1`},
		{"tool loop string", "checks:\n  tool_loop: five\n", `agent.yaml:2: checks.tool_loop: must be an integer, got string "five"`},
		{"tool loop list", "checks:\n  tool_loop: [5]\n", `agent.yaml:2: checks.tool_loop: must be a mapping (key: value), got a list`},
		{"tool loop huge", "checks:\n  tool_loop: 9999999999\n", `agent.yaml:2: checks.tool_loop: integer 9999999999 out of range`},
		{"on_budget unknown", "on_budget: stop\n", `agent.yaml:1: on_budget: must be one of kill, pause, got "stop"`},
		{"pause_timeout zero", "on_budget: pause\npause_timeout: 0s\n", `agent.yaml:2: pause_timeout: must be above 0: a pause is never endless (the default is 1h)`},
		// several errors, in file order
		{"several", "mode: x\nchecks:\n  memory: {kill: 2Gb}\nenv: {A: 1}\n", strings.Join([]string{
			`agent.yaml:1: mode: must be one of enforce, shadow, got "x"`,
			`agent.yaml:3: checks.memory.kill: bad size "2Gb": unknown unit "Gb" (want ` + sizeForms + `)`,
			`agent.yaml:4: env.A: must be a string, got integer 1 (quote it: "1")`,
		}, "\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseAgent([]byte(tc.yaml), "agent.yaml", nil)
			require.EqualError(t, err, tc.err)
			require.ErrorIs(t, err, ErrInvalid)
		})
	}
}

func TestParseAgentManyErrorsAreCapped(t *testing.T) {
	var b strings.Builder
	for i := range 30 {
		b.WriteString("k")
		b.WriteString(strings.Repeat("z", i+1))
		b.WriteString(": 1\n")
	}
	_, err := ParseAgent([]byte(b.String()), "agent.yaml", nil)
	errs := err.(interface{ Unwrap() []error }).Unwrap()
	require.Len(t, errs, maxErrors+1)
	require.EqualError(t, errs[maxErrors], "agent.yaml: 10 more errors not shown")
	var first *Error
	require.ErrorAs(t, err, &first)
	require.Equal(t, 1, first.Line)
	require.Equal(t, 1, first.Column)
}

func TestParseAgentAccepts(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		check      func(t *testing.T, a *Agent)
	}{
		{"null document", "~\n", func(t *testing.T, a *Agent) { require.Equal(t, "", a.ID) }},
		{"explicit document", "---\nid: a\n...\n", func(t *testing.T, a *Agent) { require.Equal(t, "a", a.ID) }},
		{"anchors", "command: &c [python3, a.py]\nlabels: {cmd: &n bot}\nid: *n\n", func(t *testing.T, a *Agent) {
			require.Equal(t, "bot", a.ID)
		}},
		{"numeric user", "user: 1000\n", func(t *testing.T, a *Agent) { require.Equal(t, "1000", a.User) }},
		{"quoted numbers", "command: [sleep, \"10\"]\nenv: {PORT: \"8080\"}\n", func(t *testing.T, a *Agent) {
			require.Equal(t, []string{"sleep", "10"}, a.Command)
			require.Equal(t, "8080", a.Env["PORT"])
		}},
		{"empty argv element", "command: [echo, \"\"]\n", func(t *testing.T, a *Agent) { require.Equal(t, []string{"echo", ""}, a.Command) }},
		{"signal forms", "escalation: {coop_signal: 15}\n", func(t *testing.T, a *Agent) { require.Equal(t, syscall.SIGTERM, a.Escalation.CoopSignal) }},
		{"signal lower", "escalation: {coop_signal: usr1}\n", func(t *testing.T, a *Agent) { require.Equal(t, syscall.SIGUSR1, a.Escalation.CoopSignal) }},
		{"size as int", "checks: {memory: {kill: 1_073_741_824}}\n", func(t *testing.T, a *Agent) {
			require.Equal(t, int64(1<<30), a.Checks.Memory.Kill)
		}},
		{"warn equals kill", "checks: {tokens: {warn: 5, kill: 5}}\n", func(t *testing.T, a *Agent) {
			require.Equal(t, &Limit{Warn: 5, Kill: 5}, a.Checks.Tokens)
		}},
		{"warn only", "checks: {memory: {warn: 1GiB}}\n", func(t *testing.T, a *Agent) {
			require.Equal(t, &Sustained{Warn: 1 << 30}, a.Checks.Memory)
		}},
		{"empty check is off", "checks: {memory: {}, cpu_spin: {for: 1m}, tool_loop: 0}\n", func(t *testing.T, a *Agent) {
			require.Nil(t, a.Checks.Memory)
			require.Nil(t, a.Checks.CPUSpin)
			require.Nil(t, a.Checks.ToolLoop)
		}},
		{"cpu over 100", "checks: {cpu_spin: {percent: 250}}\n", func(t *testing.T, a *Agent) {
			require.Equal(t, &CPUSpin{Percent: 250}, a.Checks.CPUSpin)
		}},
		{"empty sections", "restart:\nescalation: {}\nchecks:\nlabels:\nenv: {}\n", func(t *testing.T, a *Agent) {
			want := DefaultAgent()
			want.Source = "agent.yaml"
			require.Equal(t, want, a)
		}},
		{"agent may loosen when allowed", "checks: {heartbeat_timeout: 10s, heartbeat_timeout_max: 1m, heartbeat_timeout_min: 1s}\n", func(t *testing.T, a *Agent) {
			require.Equal(t, time.Minute, a.Checks.HeartbeatTimeoutMax)
			require.Equal(t, time.Second, a.Checks.HeartbeatTimeoutMin)
		}},
		{"tight heartbeat lowers the default min", "checks: {heartbeat_timeout: 50ms}\n", func(t *testing.T, a *Agent) {
			require.Equal(t, 100*time.Millisecond, a.Checks.HeartbeatTimeoutMin, "not normalized yet")
			a.Normalize()
			require.Equal(t, 50*time.Millisecond, a.Checks.HeartbeatTimeoutMin)
		}},
		{"max_extension", "checks: {max_extension: 2h}\n", func(t *testing.T, a *Agent) {
			require.Equal(t, 2*time.Hour, a.Checks.MaxExtension)
		}},
		{"max_extension 0 is the default", "checks: {max_extension: 0}\n", func(t *testing.T, a *Agent) {
			a.Normalize()
			require.Equal(t, DefaultMaxExtension, a.Checks.MaxExtension)
		}},
		{"comments and flow style", "# agent\nid: a # inline\nchecks: {\n  memory: {kill: 1GiB},\n}\n", func(t *testing.T, a *Agent) {
			require.Equal(t, int64(1<<30), a.Checks.Memory.Kill)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseAgent([]byte(tc.yaml), "agent.yaml", nil)
			require.NoError(t, err)
			tc.check(t, a)
		})
	}
}

const mergeDaemon = `
defaults:
  mode: shadow
  user: bots
  labels: {team: research, site: lab}
  env: {LOG_LEVEL: info, REGION: eu}
  restart: {policy: on-failure, backoff: 2s, max_restarts: 3}
  escalation: {coop_signal: SIGUSR1, coop_grace: 3s, term_grace: 2s}
  checks:
    heartbeat_timeout: 30s
    progress_timeout: 5m
    max_extension: 1h
    memory: {warn: 1GiB, kill: 2GiB, for: 10s}
    tokens: {warn: 800, kill: 1000}
    tool_loop: 5
`

func mergeDefaults(t *testing.T) *Defaults {
	t.Helper()
	d, err := ParseDaemon([]byte(mergeDaemon), "hermeskilld.yaml")
	require.NoError(t, err)
	return &d.Defaults
}

func TestParseAgentMergesDefaults(t *testing.T) {
	defs := mergeDefaults(t)
	a, err := ParseAgent([]byte(`
id: bot
command: [python3, agent.py]
labels: {team: infra}
env: {LOG_LEVEL: debug}
restart: {backoff: 5s}
escalation: {coop_grace: 1s}
checks:
  heartbeat_timeout: 10s
  memory: {kill: 4GiB}
  tokens: {}
`), "bot.yaml", defs)
	require.NoError(t, err)

	require.Equal(t, ModeShadow, a.Mode, "inherited")
	require.Equal(t, "bots", a.User, "inherited")
	require.Equal(t, map[string]string{"team": "infra", "site": "lab"}, a.Labels, "merged, the agent's key wins")
	require.Equal(t, map[string]string{"LOG_LEVEL": "debug", "REGION": "eu"}, a.Env, "merged, the agent's key wins")
	require.Equal(t, Restart{Policy: RestartOnFailure, Backoff: 5 * time.Second, MaxBackoff: 5 * time.Minute, MaxRestarts: 3, Window: 10 * time.Minute, StableAfter: time.Minute}, a.Restart, "key by key")
	require.Equal(t, Escalation{CoopSignal: syscall.SIGUSR1, CoopGrace: time.Second, TermGrace: 2 * time.Second, DumpWait: 200 * time.Millisecond, AckWait: 250 * time.Millisecond}, a.Escalation, "key by key")
	require.Equal(t, 10*time.Second, a.Checks.HeartbeatTimeout, "the agent's timeout wins")
	require.Equal(t, 5*time.Minute, a.Checks.ProgressTimeout, "an unmentioned timeout is inherited")
	require.Equal(t, time.Hour, a.Checks.MaxExtension, "inherited")
	require.Equal(t, &Sustained{Kill: 4 << 30}, a.Checks.Memory, "a check set in the agent replaces the default's as a whole")
	require.Nil(t, a.Checks.Tokens, "{} turns an inherited check off")
	require.Equal(t, &ToolLoop{Repeats: 5}, a.Checks.ToolLoop, "an unmentioned check is inherited")

	a.Normalize()
	require.Equal(t, 10*time.Second, a.Checks.StartupTimeout, "derived from the merged heartbeat timeout")
	require.NoError(t, a.Validate(true))
}

func TestParseAgentTurnsInheritedChecksOff(t *testing.T) {
	a, err := ParseAgent([]byte("checks:\n  heartbeat_timeout: 0\n  memory:\n  tool_loop: 0\n"), "a.yaml", mergeDefaults(t))
	require.NoError(t, err)
	require.Zero(t, a.Checks.HeartbeatTimeout)
	require.Nil(t, a.Checks.Memory)
	require.Nil(t, a.Checks.ToolLoop)
	require.Equal(t, &Limit{Warn: 800, Kill: 1000}, a.Checks.Tokens)
	a.Normalize()
	require.Zero(t, a.Checks.StartupTimeout)
	require.Zero(t, a.Checks.HeartbeatTimeoutMax)
}

func TestParseAgentEmptyOverDefaults(t *testing.T) {
	defs := mergeDefaults(t)
	a, err := ParseAgent(nil, "empty.yaml", defs)
	require.NoError(t, err)
	want := defs.Agent()
	want.Source = "empty.yaml"
	require.Equal(t, want, a)
	require.Equal(t, DefaultAgent(), (*Defaults)(nil).Agent())
	require.Equal(t, DefaultAgent(), (&Defaults{}).Agent())
}

func TestParseAgentErrorAgainstInheritedValue(t *testing.T) {
	// The defaults' memory warn is fine on its own; the agent's check
	// replaces it as a whole, so no conflict. Restart merges key by key:
	// the agent's max_backoff conflicts with the inherited backoff.
	_, err := ParseAgent([]byte("id: a\nrestart:\n  max_backoff: 1s\n"), "a.yaml", mergeDefaults(t))
	require.EqualError(t, err, "a.yaml:2: restart.backoff: 2s is above max_backoff 1s")
}

func TestLoadAgentDoesNotShareDefaults(t *testing.T) {
	defs := mergeDefaults(t)
	a, err := ParseAgent([]byte("id: a\n"), "a.yaml", defs)
	require.NoError(t, err)
	a.Checks.Memory.Kill = 1
	a.Labels["team"] = "x"
	a.Env["NEW"] = "1"
	b, err := ParseAgent([]byte("id: b\n"), "b.yaml", defs)
	require.NoError(t, err)
	require.Equal(t, int64(2<<30), b.Checks.Memory.Kill)
	require.Equal(t, "research", b.Labels["team"])
	require.NotContains(t, b.Env, "NEW")
}

func TestParseAgentConcurrentWithSharedDefaults(t *testing.T) {
	defs := mergeDefaults(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			a, err := ParseAgent([]byte("id: a\nlabels: {x: y}\nchecks: {memory: {kill: 1GiB}}\n"), "a.yaml", defs)
			if err == nil {
				a.Normalize()
				a.Labels["z"] = "w"
			}
		})
	}
	wg.Wait()
}

func TestLoadAgentMissingFile(t *testing.T) {
	_, err := LoadAgent("testdata/agent/does-not-exist.yaml", nil)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NotErrorIs(t, err, ErrInvalid)
}

func TestParseAgentTooLarge(t *testing.T) {
	data := []byte("id: a\n# " + strings.Repeat("x", maxFileSize) + "\n")
	_, err := ParseAgent(data, "a.yaml", nil)
	require.EqualError(t, err, "a.yaml: file is larger than 1MiB")
}

func TestParseAgentNotUTF8(t *testing.T) {
	_, err := ParseAgent([]byte("id: \xff\n"), "a.yaml", nil)
	require.EqualError(t, err, "a.yaml: file is not valid UTF-8")
}

func TestNormalize(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Checks
		want Checks
	}{
		{
			name: "startup (at least the floor) and max follow the heartbeat timeout",
			in:   Checks{HeartbeatTimeout: 30 * time.Second, HeartbeatTimeoutMin: 100 * time.Millisecond, SampleInterval: time.Second},
			want: Checks{MaxExtension: DefaultMaxExtension, StartupTimeout: 30 * time.Second, HeartbeatTimeout: 30 * time.Second, HeartbeatTimeoutMin: 100 * time.Millisecond, HeartbeatTimeoutMax: 30 * time.Second, SampleInterval: time.Second},
		},
		{
			name: "explicit values are kept",
			in:   Checks{StartupTimeout: time.Minute, HeartbeatTimeout: 30 * time.Second, HeartbeatTimeoutMin: time.Second, HeartbeatTimeoutMax: 2 * time.Minute, SampleInterval: 5 * time.Second},
			want: Checks{MaxExtension: DefaultMaxExtension, StartupTimeout: time.Minute, HeartbeatTimeout: 30 * time.Second, HeartbeatTimeoutMin: time.Second, HeartbeatTimeoutMax: 2 * time.Minute, SampleInterval: 5 * time.Second},
		},
		{
			name: "no heartbeat: nothing derived",
			in:   Checks{HeartbeatTimeoutMin: 100 * time.Millisecond},
			want: Checks{MaxExtension: DefaultMaxExtension, HeartbeatTimeoutMin: 100 * time.Millisecond, SampleInterval: time.Second},
		},
		{
			name: "min lowered to a tight max",
			in:   Checks{HeartbeatTimeout: 50 * time.Millisecond, HeartbeatTimeoutMin: 100 * time.Millisecond, SampleInterval: time.Second},
			want: Checks{MaxExtension: DefaultMaxExtension, StartupTimeout: StartupFloor, HeartbeatTimeout: 50 * time.Millisecond, HeartbeatTimeoutMin: 50 * time.Millisecond, HeartbeatTimeoutMax: 50 * time.Millisecond, SampleInterval: time.Second},
		},
		{
			name: "an explicit max_extension is kept",
			in:   Checks{MaxExtension: time.Hour, SampleInterval: time.Second},
			want: Checks{MaxExtension: time.Hour, SampleInterval: time.Second},
		},
		{
			name: "checks without thresholds are dropped",
			in: Checks{SampleInterval: time.Second, Memory: &Sustained{For: time.Second}, Procs: &Sustained{}, FDs: &Sustained{Kill: 1},
				CPUSpin: &CPUSpin{For: time.Minute}, Tokens: &Limit{}, Cost: &CostLimit{}, ToolLoop: &ToolLoop{}, ErrorStreak: &Limit{}, Steps: &Limit{Warn: 1}},
			want: Checks{MaxExtension: DefaultMaxExtension, SampleInterval: time.Second, FDs: &Sustained{Kill: 1}, Steps: &Limit{Warn: 1}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Agent{Checks: tc.in}
			a.Normalize()
			require.Equal(t, tc.want, a.Checks)
		})
	}
}

func TestNormalizeAfterFlags(t *testing.T) {
	// supervise: a file with a heartbeat timeout, then --heartbeat-timeout.
	a, err := ParseAgent([]byte("checks: {heartbeat_timeout: 30s}\n"), "a.yaml", nil)
	require.NoError(t, err)
	a.Checks.HeartbeatTimeout = 20 * time.Second
	a.Normalize()
	require.Equal(t, 20*time.Second, a.Checks.StartupTimeout)
	require.Equal(t, 20*time.Second, a.Checks.HeartbeatTimeoutMax)
}

func TestValidate(t *testing.T) {
	ok := func() *Agent {
		a := DefaultAgent()
		a.ID, a.Command = "bot", []string{"python3", "agent.py"}
		return a
	}
	for _, tc := range []struct {
		name    string
		mut     func(a *Agent)
		require bool
		err     string
	}{
		{name: "defaults", mut: func(a *Agent) {}, require: true},
		{name: "missing id and command", mut: func(a *Agent) { a.ID, a.Command = "", nil }, require: true,
			err: "id: required\ncommand: required: the argv list such as [python3, agent.py]"},
		{name: "missing id and command for supervise", mut: func(a *Agent) { a.ID, a.Command = "", nil }},
		{name: "source named", mut: func(a *Agent) { a.ID, a.Source = "", "bot.yaml" }, require: true, err: "bot.yaml: id: required"},
		{name: "bad id from a flag", mut: func(a *Agent) { a.ID = ".x" }, err: `id: ".x" must be 1-64 letters, digits, '.', '_' or '-', not starting with '.' or '-'`},
		{name: "warn above kill from a flag", mut: func(a *Agent) { a.Checks.Memory = &Sustained{Warn: 3 << 30, Kill: 2 << 30} },
			err: "checks.memory: warn 3GiB is above kill 2GiB"},
		{name: "negative from a flag", mut: func(a *Agent) { a.Checks.MaxRuntime = -time.Second }, err: "checks.max_runtime: must not be negative"},
		{name: "negative max_extension from a flag", mut: func(a *Agent) { a.Checks.MaxExtension = -time.Minute }, err: "checks.max_extension: must not be negative"},
		{name: "negative count", mut: func(a *Agent) { a.Checks.Procs = &Sustained{Kill: -1} }, err: "checks.procs.kill: must not be negative"},
		{name: "negative cost", mut: func(a *Agent) { a.Checks.Cost = &CostLimit{Kill: -1} }, err: "checks.cost.kill: must not be negative"},
		{name: "negative cpu", mut: func(a *Agent) { a.Checks.CPUSpin = &CPUSpin{Percent: -1} }, err: "checks.cpu_spin.percent: must not be negative"},
		{name: "tool loop 1", mut: func(a *Agent) { a.Checks.ToolLoop = &ToolLoop{Repeats: 1} }, err: "checks.tool_loop: repeats must be at least 2 (or 0 for off), got 1"},
		{name: "SIGSTOP", mut: func(a *Agent) { a.Escalation.CoopSignal = syscall.SIGSTOP },
			err: "escalation.coop_signal: SIGSTOP cannot be caught, so it is no cooperative stop (use none to skip that stage)"},
		{name: "no coop signal", mut: func(a *Agent) { a.Escalation.CoopSignal = 0 }},
		{name: "negative grace", mut: func(a *Agent) { a.Escalation.TermGrace = -1 }, err: "escalation.term_grace: must not be negative"},
		{name: "zero value enums", mut: func(a *Agent) { a.Mode, a.AfterKill, a.Restart.Policy = "", "", "" },
			err: "mode: must be one of enforce, shadow, got \"\"\nafter_kill: must be one of quarantine, restart, got \"\"\nrestart.policy: must be one of never, on-failure, always, got \"\""},
		{name: "negative restarts", mut: func(a *Agent) { a.Restart.MaxRestarts = -1 }, err: "restart.max_restarts: must not be negative"},
		{name: "sample interval zero", mut: func(a *Agent) { a.Checks.SampleInterval = 0 }, err: "checks.sample_interval: must be at least 10ms"},
		{name: "relative cwd", mut: func(a *Agent) { a.Cwd = "x" }, err: `cwd: "x" must be an absolute path`},
		{name: "empty program", mut: func(a *Agent) { a.Command = []string{""} }, err: "command: the program (first element) must not be empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := ok()
			tc.mut(a)
			err := a.Validate(tc.require)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tc.err)
			require.ErrorIs(t, err, ErrInvalid)
		})
	}
}

func TestCloneIsDeep(t *testing.T) {
	a := exampleAgent("x.yaml")
	b := a.Clone()
	require.Equal(t, a, b)
	b.Labels["team"] = "other"
	b.Env["X"] = "y"
	b.Command[0] = "sh"
	b.Checks.Memory.Kill = 1
	b.Checks.Steps.Kill = 1
	require.Equal(t, exampleAgent("x.yaml"), a)
}
