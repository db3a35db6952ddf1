// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/escalate"
)

func TestMarshalGolden(t *testing.T) {
	c := fullCert()
	require.NoError(t, testSigner(t).Sign(c))
	got, err := Marshal(c)
	require.NoError(t, err)
	golden(t, "full.golden.json", got)
	assert.True(t, strings.HasSuffix(string(got), "}\n"), "trailing newline")
	again, err := Marshal(c)
	require.NoError(t, err)
	assert.Equal(t, got, again, "stable")
}

// designFields are the field paths of the certificate schema as first
// designed: none may go missing.
var designFields = []string{
	"schema", "cert_id", "agent_id", "host", "mode", "command", "pid",
	"started_at", "triggered_at", "terminated_at", "trigger_type", "trigger_check", "trigger_reason",
	"operator", "operator_reason",
	"escalation.reached", "escalation.coop_signal", "escalation.coop_grace_ms", "escalation.term_grace_ms",
	"exit.code", "exit.signal", "exit.core_dumped",
	"symptoms_log.at", "symptoms_log.check", "symptoms_log.severity", "symptoms_log.observed",
	"symptoms_log.threshold", "symptoms_log.message",
	"shutdown_log.step", "shutdown_log.at", "shutdown_log.duration_ms", "shutdown_log.detail",
	"final_state.status", "final_state.progress", "final_state.tokens", "final_state.cost_usd",
	"final_state.last_tool", "final_state.last_heartbeat_at", "final_state.heartbeats",
	"final_state.peak_rss_bytes", "final_state.cpu_user_s", "final_state.cpu_sys_s", "final_state.procs_killed",
	"process_tree.pid", "process_tree.ppid", "process_tree.cmdline", "process_tree.state",
	"process_tree.rss_bytes", "process_tree.cpu_s", "process_tree.threads", "process_tree.fds",
	"last_output.stderr", "last_output.stdout", "survivors",
	"signature.alg", "signature.key_id", "signature.value",
}

// lookup follows a dotted path; in a list it looks into the first element.
func lookup(v any, path string) (any, bool) {
	for _, k := range strings.Split(path, ".") {
		if l, ok := v.([]any); ok && len(l) > 0 {
			v = l[0]
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

func TestGoldenHasEveryDesignField(t *testing.T) {
	c := fullCert()
	require.NoError(t, testSigner(t).Sign(c))
	b, err := Marshal(c)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	for _, f := range designFields {
		_, ok := lookup(m, f)
		assert.True(t, ok, "field %s missing", f)
	}
	// Null for an automatic SIGKILL death.
	for _, f := range []string{"operator", "operator_reason", "exit.code"} {
		v, _ := lookup(m, f)
		assert.Nil(t, v, f)
	}
	assert.Equal(t, []any{}, m["survivors"], "survivors is [] not null")
	// Not in the certificate example, but carried by every certificate of a
	// supervisor with an audit log.
	assert.Equal(t, map[string]any{"seq": 1234.0, "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}, m["audit_anchor"])
	assert.Equal(t, "2026-12-02T10:15:03.123456789Z", m["triggered_at"])
}

func TestMarshalZeroCertificate(t *testing.T) {
	b, err := Marshal(&Certificate{Schema: Schema})
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))

	for _, f := range []string{"started_at", "triggered_at", "terminated_at", "operator", "operator_reason",
		"exit.code", "exit.signal", "final_state.last_heartbeat_at"} {
		v, ok := lookup(m, f)
		assert.True(t, ok, "%s present", f)
		assert.Nil(t, v, "%s is null", f)
	}
	for _, f := range []string{"command", "symptoms_log", "shutdown_log", "process_tree", "survivors"} {
		assert.Equal(t, []any{}, m[f], "%s is [] not null", f)
	}
	for _, f := range []string{"labels", "containment", "confinement", "last_output", "audit_anchor", "signature", "final_state.errno"} {
		_, ok := lookup(m, f)
		assert.False(t, ok, "%s omitted when empty", f)
	}
}

func TestMarshalManualExited(t *testing.T) {
	c := &Certificate{
		Schema: Schema, TriggerType: TriggerManual, TriggerCheck: "manual",
		Operator: ptr("signal:SIGTERM"), OperatorReason: ptr("bar says so"),
		Exit:        Exit{Code: ptr(3)},
		ShutdownLog: []Step{{Step: escalate.StepReaped, DurationMS: 1}},
	}
	b, err := json.Marshal(c)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	assert.Equal(t, "signal:SIGTERM", m["operator"])
	assert.Equal(t, "bar says so", m["operator_reason"])
	assert.Equal(t, map[string]any{"code": 3.0, "signal": nil, "core_dumped": false}, m["exit"])
	step := m["shutdown_log"].([]any)[0].(map[string]any)
	assert.NotContains(t, step, "detail", "detail omitted when empty")
	assert.Nil(t, step["at"])
}

func TestMarshalTimesInUTC(t *testing.T) {
	zone := time.FixedZone("CET", 3600)
	c := &Certificate{Schema: Schema, StartedAt: time.Date(2026, 12, 2, 11, 0, 0, 5, zone)}
	b, err := Marshal(c)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"started_at": "2026-12-02T10:00:00.000000005Z"`)

	got, err := Parse(b)
	require.NoError(t, err)
	assert.True(t, got.StartedAt.Equal(c.StartedAt))
	assert.Equal(t, time.UTC, got.StartedAt.Location())
}

func TestMarshalHTMLEscaping(t *testing.T) {
	c := &Certificate{Schema: Schema, TriggerReason: "rss > 1GiB & <rising>"}
	b, err := Marshal(c)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"rss > 1GiB & <rising>"`, "the file is for people too")

	// json.Marshal escapes as it always does, and means the same.
	escaped, err := json.Marshal(c)
	require.NoError(t, err)
	assert.Contains(t, string(escaped), `rss \u003e 1GiB \u0026 \u003crising\u003e`)
	ca, err := Canonical(b)
	require.NoError(t, err)
	cb, err := Canonical(escaped)
	require.NoError(t, err)
	assert.Equal(t, string(ca), string(cb))
}

func TestMarshalNil(t *testing.T) {
	_, err := Marshal(nil)
	require.Error(t, err)
}

// TestWireMirrorsPublic checks the derived wire forms: same fields, same
// order, same JSON tags, same types except that time.Time is jsonTime.
func TestWireMirrorsPublic(t *testing.T) {
	for pub, w := range map[reflect.Type]wire{
		reflect.TypeFor[Certificate](): certificateWire(), reflect.TypeFor[Symptom](): symptomWire(),
		reflect.TypeFor[Step](): stepWire(), reflect.TypeFor[FinalState](): finalStateWire(), reflect.TypeFor[Metered](): meteredWire(),
		reflect.TypeFor[Egress](): egressWire(),
	} {
		require.Equal(t, pub.NumField(), w.typ.NumField(), "%s", pub)
		for i := range pub.NumField() {
			p, f := pub.Field(i), w.typ.Field(i)
			assert.Equal(t, p.Name, f.Name, "%s field %d", pub, i)
			assert.Equal(t, p.Tag, f.Tag, "%s.%s", pub, p.Name)
			want := p.Type
			if want == reflect.TypeFor[time.Time]() {
				want = reflect.TypeFor[jsonTime]()
			}
			assert.Equal(t, want, f.Type, "%s.%s", pub, p.Name)
		}
	}
}

func TestUnmarshalRejectsBadTime(t *testing.T) {
	var c Certificate
	err := json.Unmarshal([]byte(`{"schema":"`+Schema+`","started_at":"yesterday"}`), &c)
	require.Error(t, err)
}
