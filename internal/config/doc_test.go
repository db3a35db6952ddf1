package config

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// docBlock returns the first indented block after the doc.go heading, as
// YAML.
func docBlock(t *testing.T, heading string) []byte {
	t.Helper()
	src, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(src), "// # "+heading+"\n")
	require.True(t, ok, heading)
	var b strings.Builder
	in := false
	for _, line := range strings.Split(after, "\n") {
		y, isCode := strings.CutPrefix(line, "//\t")
		if isCode {
			in = true
			b.WriteString(y + "\n")
		} else if in {
			break
		}
	}
	return []byte(b.String())
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
// but not the free-form names of labels, env and key_files, the elements of lists,
// or what is below the daemon's defaults section.
func docKeys(t *testing.T, data []byte, v any) []string {
	t.Helper()
	d := newDecoder("doc.go")
	root, ok := d.document(data)
	require.True(t, ok)
	d.mapping(root, "", reflect.ValueOf(v).Elem(), scope{})
	require.Empty(t, d.errs)
	var keys []string
	for k := range d.lines {
		if !strings.HasPrefix(k, "labels.") && !strings.HasPrefix(k, "env.") && !strings.HasPrefix(k, "gateway.key_files.") &&
			!strings.HasPrefix(k, "defaults.") && !strings.Contains(k, "[") {
			keys = append(keys, k)
		}
	}
	return keys
}

// The annotated references in the package comment are real files: they
// parse, and they set every key of the schema, nothing else.
func TestDocReferenceAgent(t *testing.T) {
	data := docBlock(t, "Agent file")
	a, err := ParseAgent(data, "doc.go", nil)
	require.NoError(t, err)
	a.Normalize()
	require.NoError(t, a.Validate(true))

	require.ElementsMatch(t, schemaKeys(reflect.TypeFor[Agent](), ""), docKeys(t, data, DefaultAgent()))
}

func TestDocReferenceDaemon(t *testing.T) {
	data := docBlock(t, "Daemon file")
	d, err := ParseDaemon(data, "doc.go")
	require.NoError(t, err)
	require.NotNil(t, d.ControlPlane)

	require.ElementsMatch(t, schemaKeys(reflect.TypeFor[Daemon](), ""), docKeys(t, data, DefaultDaemon()))
}

// TestSchemaKeys pins the schema, so that a change of it is seen in review
// together with the reference in doc.go that the tests above hold to it.
func TestSchemaKeys(t *testing.T) {
	require.Equal(t, []string{
		"id", "labels", "command", "user", "cwd", "env", "mode", "after_kill",
		"restart", "restart.policy", "restart.backoff", "restart.max_backoff", "restart.max_restarts", "restart.window", "restart.stable_after",
		"escalation", "escalation.coop_signal", "escalation.coop_grace", "escalation.term_grace", "escalation.dump_wait",
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
		"gateway", "gateway.upstreams", "gateway.key_files", "gateway.prices", "gateway.listen",
	}, schemaKeys(reflect.TypeFor[Agent](), ""))
	require.Equal(t, []string{
		"state_dir", "runtime_dir", "agents_dir", "estop_file",
		"control", "control.read_group", "control.operators_group",
		"metrics", "metrics.listen", "metrics.agent_label_limit", "signing_key",
		"control_plane", "control_plane.url", "control_plane.token_file", "control_plane.poll_interval", "control_plane.timeout", "control_plane.max_outbox",
		"gateway", "gateway.upstreams", "gateway.key_files", "gateway.prices", "gateway.listen",
		"containment", "audit", "audit.max_bytes", "audit.keep", "logs", "logs.max_bytes", "logs.keep", "heartbeat_rate", "defaults",
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
