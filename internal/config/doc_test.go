// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The configuration reference for people: its path relative to this
// package's directory (where go test runs), and its name in errors.
const (
	configDoc     = "../../docs/configuration.md"
	configDocName = "docs/configuration.md"
)

// docBlock is one ```yaml block of the reference.
type docBlock struct {
	section string // the "## " heading it is under
	file    string // the name its first line gives it: "# hermeskilld.yaml"
	line    int    // of its first line in the reference
	data    []byte // the block, after line-1 empty lines: an error's line is the reference's
}

// docBlocks returns every ```yaml block of the reference, in order. Each
// starts with a comment naming the file it is: "# hermeskilld.yaml" for
// the daemon file, any other "# NAME.yaml" for an agent file.
func docBlocks(t *testing.T) []docBlock {
	t.Helper()
	src, err := os.ReadFile(configDoc)
	require.NoError(t, err)
	var blocks []docBlock
	var cur *docBlock
	section := ""
	for i, line := range strings.Split(string(src), "\n") {
		switch {
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			if cur.file == "" {
				name, ok := strings.CutPrefix(line, "# ")
				name, _, _ = strings.Cut(name, ":")
				require.True(t, ok && strings.HasSuffix(name, ".yaml"),
					"%s:%d: a YAML block must start with a comment naming its file (# hermeskilld.yaml, # agents.d/NAME.yaml)", configDocName, cur.line)
				cur.file = name
			}
			cur.data = append(cur.data, line+"\n"...)
		case line == "```yaml":
			cur = &docBlock{section: section, line: i + 2, data: []byte(strings.Repeat("\n", i+1))}
		case strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
		}
	}
	require.Nil(t, cur, "a ```yaml block is not closed")
	return blocks
}

func (b docBlock) isDaemon() bool { return b.file == "hermeskilld.yaml" }

// reference returns the first block of the section: its annotated file.
func reference(t *testing.T, section string) docBlock {
	t.Helper()
	for _, b := range docBlocks(t) {
		if b.section == section {
			return b
		}
	}
	require.FailNow(t, "no YAML block under the heading", "## %s in %s", section, configDoc)
	return docBlock{}
}

// schemaKeys lists the path of every key of the struct type t below
// prefix, as the schema declares it: what a file may set. The daemon's
// defaults section is an agent file's: its keys are not listed again.
func schemaKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for _, f := range fieldsOf(t) {
		p := join(prefix, f.key)
		keys = append(keys, p)
		ft := t.Field(f.index).Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[Defaults]() {
			keys = append(keys, schemaKeys(ft, p)...)
		}
	}
	return keys
}

// docKeys decodes a reference block onto v and returns the keys it sets,
// but not the free-form names of labels, env and key_files, the elements
// of lists, or what is below the daemon's defaults section.
func docKeys(t *testing.T, b docBlock, v any) []string {
	t.Helper()
	d := newDecoder(configDocName)
	root, ok := d.document(b.data)
	require.True(t, ok)
	d.mapping(root, "", reflect.ValueOf(v).Elem(), scope{})
	require.Empty(t, d.errs)
	var keys []string
	for k := range d.lines {
		if !strings.HasPrefix(k, "labels.") && !strings.HasPrefix(k, "env.") && !strings.HasPrefix(k, "gateway.key_files.") &&
			!strings.HasPrefix(k, "telemetry.headers.") &&
			!strings.HasPrefix(k, "defaults.") && !strings.Contains(k, "[") {
			keys = append(keys, k)
		}
	}
	return keys
}

// The annotated files of the reference are real files: they parse, and
// they set every key of the schema, nothing else. A key added to the
// schema fails here until the reference describes it.
func TestDocReferenceAgent(t *testing.T) {
	b := reference(t, "Agent file")
	require.False(t, b.isDaemon(), "%s:%d", configDocName, b.line)
	a, err := ParseAgent(b.data, configDocName, nil)
	require.NoError(t, err)
	a.Normalize()
	require.NoError(t, a.Validate(true))

	require.ElementsMatch(t, schemaKeys(reflect.TypeFor[Agent](), ""), docKeys(t, b, DefaultAgent()))
}

func TestDocReferenceDaemon(t *testing.T) {
	b := reference(t, "Daemon file")
	require.True(t, b.isDaemon(), "%s:%d", configDocName, b.line)
	d, err := ParseDaemon(b.data, configDocName)
	require.NoError(t, err)
	require.NotNil(t, d.ControlPlane)

	require.ElementsMatch(t, schemaKeys(reflect.TypeFor[Daemon](), ""), docKeys(t, b, DefaultDaemon()))
}

// Every other example of the reference is a valid file too. An agent
// file is parsed over the defaults of the daemon file shown before it in
// the same section, as the daemon would read it.
func TestDocExamples(t *testing.T) {
	var defaults *Defaults
	section := ""
	for _, b := range docBlocks(t) {
		if b.section != section {
			section, defaults = b.section, nil
		}
		t.Run("line "+strconv.Itoa(b.line), func(t *testing.T) {
			if b.isDaemon() {
				d, err := ParseDaemon(b.data, configDocName)
				require.NoError(t, err)
				defaults = &d.Defaults
				return
			}
			a, err := ParseAgent(b.data, configDocName, defaults)
			require.NoError(t, err)
			a.Normalize()
			require.NoError(t, a.Validate(a.ID != ""))
		})
	}
}

// The merging example says what the agent runs with; so it does.
func TestDocMergeExample(t *testing.T) {
	var blocks []docBlock
	for _, b := range docBlocks(t) {
		if b.section == "Defaults and merging" {
			blocks = append(blocks, b)
		}
	}
	require.Len(t, blocks, 2)
	d, err := ParseDaemon(blocks[0].data, configDocName)
	require.NoError(t, err)
	a, err := ParseAgent(blocks[1].data, configDocName, &d.Defaults)
	require.NoError(t, err)
	a.Normalize()

	require.Equal(t, map[string]string{"team": "research", "model": "qwen2.5-7b"}, a.Labels)
	require.Equal(t, []KV{{"coop_signal", "SIGINT"}, {"coop_grace", "5s"}, {"term_grace", "10s"}, {"dump_wait", "200ms"}, {"ack_wait", "250ms"}},
		a.Escalation.Describe())
	require.Equal(t, []KV{
		{"startup_timeout", "30s"}, {"heartbeat_timeout", "30s"}, {"heartbeat_timeout_min", "100ms"},
		{"heartbeat_timeout_max", "30s"}, {"max_extension", "30m"}, {"sample_interval", "1s"},
		{"memory", "kill 4GiB"},
	}, a.Checks.Describe())
}

// TestSchemaKeys pins the schema, so that a change of it is seen in review
// together with the reference in docs/configuration.md that the tests
// above hold to it.
func TestSchemaKeys(t *testing.T) {
	require.Equal(t, []string{
		"id", "labels", "command", "user", "cwd", "env", "writable", "network", "allow", "mode", "after_kill", "on_budget", "pause_timeout",
		"restart", "restart.policy", "restart.backoff", "restart.max_backoff", "restart.max_restarts", "restart.window", "restart.stable_after",
		"escalation", "escalation.coop_signal", "escalation.coop_grace", "escalation.term_grace", "escalation.dump_wait", "escalation.ack_wait",
		"checks", "checks.startup_timeout", "checks.heartbeat_timeout", "checks.heartbeat_timeout_min", "checks.heartbeat_timeout_max",
		"checks.progress_timeout", "checks.max_runtime", "checks.max_extension", "checks.sample_interval",
		"checks.memory", "checks.memory.warn", "checks.memory.kill", "checks.memory.for",
		"checks.cpu_spin", "checks.cpu_spin.percent", "checks.cpu_spin.for", "checks.cpu_spin.only_without_progress",
		"checks.procs", "checks.procs.warn", "checks.procs.kill", "checks.procs.for",
		"checks.fds", "checks.fds.warn", "checks.fds.kill", "checks.fds.for",
		"checks.tokens", "checks.tokens.warn", "checks.tokens.kill",
		"checks.cost", "checks.cost.warn", "checks.cost.kill",
		"checks.tool_loop", "checks.tool_loop.repeats",
		"checks.error_streak", "checks.error_streak.warn", "checks.error_streak.kill",
		"checks.steps", "checks.steps.warn", "checks.steps.kill",
		"checks.denials", "checks.denials.warn", "checks.denials.kill",
		"checks.cost_rate", "checks.cost_rate.warn", "checks.cost_rate.kill", "checks.cost_rate.per",
		"checks.requests_rate", "checks.requests_rate.warn", "checks.requests_rate.kill", "checks.requests_rate.per",
		"checks.tokens_rate", "checks.tokens_rate.warn", "checks.tokens_rate.kill", "checks.tokens_rate.per",
		"checks.egress", "checks.egress.refusals", "checks.egress.refusals_warn", "checks.egress.bytes", "checks.egress.bytes_warn", "checks.egress.per",
		"gateway", "gateway.upstreams", "gateway.key_files", "gateway.prices", "gateway.listen", "gateway.default_max_output_tokens", "gateway.upstream_idle_conns",
		"control_plane", "control_plane.url", "control_plane.token_file", "control_plane.poll_interval", "control_plane.timeout", "control_plane.max_outbox", "control_plane.fail_closed_after",
	}, schemaKeys(reflect.TypeFor[Agent](), ""))
	require.Equal(t, []string{
		"state_dir", "runtime_dir", "agents_dir", "estop_file",
		"control", "control.read_group", "control.operators_group",
		"metrics", "metrics.listen", "metrics.agent_label_limit", "signing_key",
		"control_plane", "control_plane.url", "control_plane.token_file", "control_plane.poll_interval", "control_plane.timeout", "control_plane.max_outbox", "control_plane.fail_closed_after",
		"gateway", "gateway.upstreams", "gateway.key_files", "gateway.prices", "gateway.listen", "gateway.default_max_output_tokens", "gateway.upstream_idle_conns",
		"telemetry", "telemetry.endpoint", "telemetry.headers", "telemetry.timeout", "telemetry.shutdown_timeout",
		"containment", "audit", "audit.max_bytes", "audit.keep", "logs", "logs.max_bytes", "logs.keep", "heartbeat_rate", "budgets", "defaults",
	}, schemaKeys(reflect.TypeFor[Daemon](), ""))
}

// Every pointer of Checks is a check: it has its own rules (active,
// problems) and description, which Normalize, Validate and Describe use.
func TestChecksAreChecks(t *testing.T) {
	for f, v := range fields(reflect.ValueOf(&Checks{}).Elem()) {
		if v.Kind() == reflect.Pointer {
			require.Implements(t, (*check)(nil), v.Interface(), f.key)
		}
	}
}
