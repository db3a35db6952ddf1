// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"crypto/ed25519"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/escalate"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func ptr[T any](v T) *T { return &v }

// testSeed makes the test signer deterministic: Ed25519 signatures are, so
// the golden file holds a stable signature.
var testSeed = []byte("hermeskill test key, not secret!")

func testSigner(t testing.TB) *Signer {
	t.Helper()
	s, err := NewSigner(ed25519.NewKeyFromSeed(testSeed))
	require.NoError(t, err)
	return s
}

// fullCert is a certificate with every field set, as a wedged agent killed
// with SIGKILL after ignoring SIGINT and SIGTERM would have.
func fullCert() *Certificate {
	trig := time.Date(2026, 12, 2, 10, 15, 3, 123456789, time.UTC)
	at := func(ms float64) time.Time { return trig.Add(time.Duration(ms * float64(time.Millisecond))) }
	var stderr strings.Builder
	stderr.WriteString("Thread 0x00007f1c (most recent call first):\n")
	for i := range 30 {
		stderr.WriteString("  File \"/opt/bots/research/agent.py\", line " + strconv.Itoa(100+i) + " in helper\n")
	}
	stderr.WriteString("  File \"/opt/bots/research/agent.py\", line 42 in plan_next_step_forever\n")
	return &Certificate{
		Schema:        Schema,
		CertID:        "0193d5d8-7c4b-7a3e-9f21-0c5b1e2d3f40",
		AgentID:       "research-bot",
		Host:          "agents-7",
		Mode:          ModeEnforce,
		Labels:        map[string]string{"team": "research", "model": "qwen2.5-7b"},
		Command:       []string{"python3", "/opt/bots/research/agent.py", "--task", "index docs"},
		PID:           4242,
		Containment:   ContainmentCgroup,
		StartedAt:     time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC),
		TriggeredAt:   trig,
		TerminatedAt:  at(2013.25),
		TriggerType:   TriggerAuto,
		TriggerCheck:  "heartbeat_timeout",
		TriggerReason: "no heartbeat for 30.0s (timeout 30s) <after> \"step 17\" & more",
		Escalation:    Escalation{Reached: ReachedSigkill, CoopSignal: "SIGINT", CoopGraceMS: 10000, TermGraceMS: 5000},
		Exit:          Exit{Signal: ptr("SIGKILL")},
		SymptomsLog: []Symptom{
			{At: at(-12000), Check: "memory", Severity: SeverityWarning, Observed: "1.2GiB", Threshold: "1GiB", Message: "tree RSS 1.2GiB over warn 1GiB for 10s"},
			{At: trig, Check: "heartbeat_timeout", Severity: SeverityTerminal, Observed: "30.0s", Threshold: "30s", Message: "no heartbeat for 30.0s (timeout 30s)"},
		},
		ShutdownLog: []Step{
			{Step: escalate.StepDumpSignal, At: at(0.2), DurationMS: 200.5, Detail: map[string]any{"signal": "SIGUSR2"}},
			{Step: escalate.StepCoopSignal, At: at(200.9), DurationMS: 10.4, Detail: map[string]any{"signal": "SIGINT", "pid": 4242.0}},
			{Step: escalate.StepSIGTERM, At: at(1001.3), DurationMS: 0.4, Detail: map[string]any{"pids": []any{4242.0, 4250.0, 4251.0}}},
			{Step: escalate.StepSIGKILL, At: at(2002), DurationMS: 0.15, Detail: map[string]any{"via": "cgroup.kill"}},
			{Step: escalate.StepReaped, At: at(2013.25), DurationMS: 11.25},
		},
		FinalState: FinalState{
			Status: "indexing 3/10", Progress: 17, Tokens: 123456, CostUSD: 1.2345, LastTool: "web_search",
			LastHeartbeatAt: trig.Add(-30 * time.Second), Heartbeats: 4500, PeakRSSBytes: 1288490188,
			CPUUserS: 3600.5, CPUSysS: 12.25, ProcsKilled: 3, Errors: 2, Errno: ptr(5),
		},
		ProcessTree: []Proc{
			{PID: 4242, PPID: 4241, Cmdline: "python3 /opt/bots/research/agent.py --task index docs", State: "R", RSSBytes: 1181116006, CPUS: 3590.5, Threads: 4, FDs: 12},
			{PID: 4250, PPID: 4242, Cmdline: "sh -c curl https://example.com", State: "S", RSSBytes: 2097152, CPUS: 0.01, Threads: 1, FDs: 3},
			{PID: 4251, PPID: 4250, Cmdline: "curl https://example.com", State: "D", RSSBytes: 5242880, CPUS: 10, Threads: 1, FDs: 5},
		},
		LastOutput: &LastOutput{Stderr: stderr.String(), Stdout: "step 17: planning\n"},
		Survivors:  []Survivor{},
		Metered: &Metered{Requests: 42, Refused: 1, Errors: 2, Tokens: 130000, CostUSD: 1.3125, CostKnown: true,
			Models: []ModelUsage{{Model: "gpt-4.1-mini", Requests: 42, InputTokens: 100000, OutputTokens: 30000,
				CachedInputTokens: 20000, CostUSD: 1.3125, Priced: true}},
			FirstRequestAt: trig.Add(-time.Hour), LastRequestAt: trig.Add(-time.Second), RevokedAt: trig},
		AuditAnchor: &AuditAnchor{Seq: 1234, SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
	}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create it")
	require.Equal(t, string(want), string(got), "golden file %s differs; if intended, run go test -update", path)
}
