package config

import (
	"os"
	"slices"
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

// The annotated references in the package comment are real files: they
// parse, and they mention every key.
func TestDocReferenceAgent(t *testing.T) {
	data := docBlock(t, "Agent file")
	a, err := ParseAgent(data, "doc.go", nil)
	require.NoError(t, err)
	a.Normalize()
	require.NoError(t, a.Validate(true))

	d := newDecoder("doc.go")
	root, ok := d.document(data)
	require.True(t, ok)
	d.agent(root, "", false)
	require.Empty(t, d.errs)
	var keys []string
	for k := range d.lines {
		if !strings.HasPrefix(k, "labels.") && !strings.HasPrefix(k, "env.") && !strings.Contains(k, "[") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	require.Equal(t, []string{
		"after_kill", "checks",
		"checks.cost", "checks.cost.kill", "checks.cost.warn",
		"checks.cpu_spin", "checks.cpu_spin.for", "checks.cpu_spin.only_without_progress", "checks.cpu_spin.percent",
		"checks.error_streak", "checks.error_streak.kill", "checks.error_streak.warn",
		"checks.fds", "checks.fds.for", "checks.fds.kill", "checks.fds.warn",
		"checks.heartbeat_timeout", "checks.heartbeat_timeout_max", "checks.heartbeat_timeout_min",
		"checks.max_extension", "checks.max_runtime",
		"checks.memory", "checks.memory.for", "checks.memory.kill", "checks.memory.warn",
		"checks.procs", "checks.procs.for", "checks.procs.kill", "checks.procs.warn",
		"checks.progress_timeout", "checks.sample_interval", "checks.startup_timeout",
		"checks.steps", "checks.steps.kill", "checks.steps.warn",
		"checks.tokens", "checks.tokens.kill", "checks.tokens.warn",
		"checks.tool_loop", "checks.tool_loop.repeats",
		"command", "cwd", "env",
		"escalation", "escalation.coop_grace", "escalation.coop_signal", "escalation.dump_wait", "escalation.term_grace",
		"id", "labels", "mode",
		"restart", "restart.backoff", "restart.max_backoff", "restart.max_restarts", "restart.policy", "restart.stable_after", "restart.window",
		"user",
	}, keys)
}

func TestDocReferenceDaemon(t *testing.T) {
	data := docBlock(t, "Daemon file")
	d, err := ParseDaemon(data, "doc.go")
	require.NoError(t, err)
	require.NotNil(t, d.ControlPlane)

	text := "\n" + string(data)
	for _, k := range []string{"state_dir", "runtime_dir", "agents_dir", "estop_file", "control", "metrics", "signing_key",
		"control_plane", "containment", "audit", "logs", "heartbeat_rate", "defaults"} {
		require.Contains(t, text, "\n"+k+":", k)
	}
	for _, k := range []string{"read_group", "operators_group", "listen", "agent_label_limit", "url", "token_file",
		"poll_interval", "timeout", "max_outbox", "max_bytes", "keep"} {
		require.Contains(t, text, k+":", k)
	}
}
