// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func render(t *testing.T, c *Certificate) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, Render(&b, c))
	return b.String()
}

func TestRenderGolden(t *testing.T) {
	c := fullCert()
	require.NoError(t, testSigner(t).Sign(c))
	out := render(t, c)
	golden(t, "full.render.golden.txt", []byte(out))

	lines := strings.Split(out, "\n")
	// Headline: agent, how and why; then when, how far, how it ended.
	assert.Equal(t, `research-bot killed (heartbeat_timeout: no heartbeat for 30.0s (timeout 30s) <after> "step 17" & more)`, lines[0])
	for _, want := range []string{"at 2026-12-02 10:15:03.123 UTC", "escalation reached sigkill after 2.013s", "signal SIGKILL", "ran 1h15m3.123s"} {
		assert.Contains(t, lines[1], want)
	}
	for _, want := range []string{
		"0193d5d8-7c4b-7a3e-9f21-0c5b1e2d3f40",
		"python3 /opt/bots/research/agent.py --task 'index docs'",
		"model=qwen2.5-7b team=research",
		"symptoms (2)", "warning", "terminal", "tree RSS 1.2GiB over warn 1GiB for 10s",
		"shutdown: reached sigkill (coop signal SIGINT, coop grace 10000 ms, term grace 5000 ms)",
		"sigkill_sent", "via=cgroup.kill", "11.25", // reaped took 11.25 ms
		"last heartbeat  2026-12-02T10:14:33.123Z (30s before the trigger)",
		"peak rss        1.2 GiB",
		"process tree (3)", "curl https://example.com",
		"survivors: none",
		"last stderr (last 20 of 32 lines)",
		"line 42 in plan_next_step_forever",
		"last stdout (last 1 of 1 lines)",
		"signature: ed25519 by key " + testSigner(t).KeyID(),
		"audit log    seq 1234  sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
	} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, "line 110 in helper", "only the last 20 lines of stderr")
	assert.Contains(t, out, "line 111 in helper")
}

func TestRenderHeadlines(t *testing.T) {
	shadow := fullCert()
	shadow.Mode = ModeShadow
	shadow.Exit = Exit{}
	shadow.Escalation.Reached = ReachedNone
	assert.True(t, strings.HasPrefix(render(t, shadow), "research-bot would have been killed (heartbeat_timeout: "))
	assert.Contains(t, render(t, shadow), "[shadow mode: nothing was signalled]")

	manual := fullCert()
	manual.TriggerType, manual.TriggerCheck, manual.TriggerReason = TriggerManual, "manual", "kill requested"
	manual.Operator, manual.OperatorReason = ptr("signal:SIGTERM"), ptr("bar says so")
	out := render(t, manual)
	assert.True(t, strings.HasPrefix(out, "research-bot killed by operator signal:SIGTERM (manual: bar says so)\n"), out)
	assert.Contains(t, out, "operator     signal:SIGTERM (bar says so)")

	external := fullCert()
	external.TriggerType, external.TriggerCheck, external.TriggerReason = TriggerExternal, TriggerExternal, "killed by SIGKILL (OOM killer?)"
	external.Escalation.Reached = ReachedNone
	out = render(t, external)
	assert.True(t, strings.HasPrefix(out, "research-bot died (external: killed by SIGKILL (OOM killer?)), not killed by hermeskilld\n"), out)

	exited := fullCert()
	exited.Exit = Exit{Code: ptr(3), CoreDumped: true}
	exited.Escalation.Reached = ReachedCooperative
	assert.Contains(t, render(t, exited), "escalation reached cooperative after 2.013s; exit code 3 (core dumped)")
}

func TestRenderSparse(t *testing.T) {
	out := render(t, &Certificate{Schema: Schema})
	assert.True(t, strings.HasPrefix(out, "- killed ()\n"), out)
	assert.Contains(t, out, "signature: none (unsigned)")
	assert.Contains(t, out, "last heartbeat  none")
	assert.NotContains(t, out, "audit log")
	assert.NotContains(t, out, "last stderr")
}

func TestRenderSurvivors(t *testing.T) {
	c := fullCert()
	c.Survivors = []Survivor{{PID: 4251, State: "D", Cmdline: "curl https://example.com"}}
	out := render(t, c)
	assert.Contains(t, out, "survivors (1): still alive when hermeskilld gave up")
	assert.Contains(t, out, "4251  D  curl https://example.com")
}

// TestRenderEscapesControls: what an agent wrote cannot drive the
// operator's terminal.
func TestRenderEscapesControls(t *testing.T) {
	c := fullCert()
	c.AgentID = "evil\x1b[2J"
	c.TriggerReason = "line1\nline2\r"
	c.LastOutput.Stderr = "ok\tcolumn\n\x1b]0;pwned\x07title\n\u202eevil\n"
	c.Labels["k\x1b"] = "v\x9b"
	out := render(t, c)
	assert.NotContains(t, out, "\x1b")
	assert.NotContains(t, out, "\x07")
	assert.NotContains(t, out, "\r")
	assert.NotContains(t, out, "\u202e")
	assert.NotContains(t, out, "\u009b")
	assert.Contains(t, out, `evil\x1b[2J killed (heartbeat_timeout: line1\nline2\r)`)
	assert.Contains(t, out, "  | ok\tcolumn\n", "tabs in output are kept")
	assert.Contains(t, out, `  | \x1b]0;pwned\atitle`)
	assert.Contains(t, out, `  | \u202eevil`)
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestRenderWriteError(t *testing.T) {
	require.EqualError(t, Render(failWriter{}, fullCert()), "disk full")
}

// A pause record says so in its headline; every certificate with pauses
// lists them: since when, how frozen, how many requests held, how long,
// how it ended.
func TestRenderPauses(t *testing.T) {
	paused := fullCert()
	paused.Mode, paused.TriggerCheck, paused.TriggerReason = ModePaused, "cost", "does not fit"
	paused.Exit, paused.TerminatedAt, paused.Escalation.Reached = Exit{}, time.Time{}, ReachedNone
	at := paused.TriggeredAt
	paused.Pauses = []Pause{{PausedAt: at, Check: "cost", Reason: "does not fit", Frozen: "cgroup", HeldRequests: 2, TimeoutMS: 3600000}}
	out := render(t, paused)
	assert.True(t, strings.HasPrefix(out, "research-bot paused (cost: does not fit) [pause record: LLM requests held, tree frozen until `hermeskilld resume research-bot` or the pause timeout]\n"), out)
	assert.Regexp(t, `(?m)^pauses \(1\)\n  PAUSED\s+CHECK\s+FROZEN\s+HELD\s+FOR\s+ENDED\s+DETAIL\n  \S+\s+cost\s+cgroup\s+2\s+0s\s+-\s+-$`, out)

	killed := fullCert()
	killed.Pauses = []Pause{{PausedAt: at, Check: "cost", Frozen: "sigstop", HeldRequests: 1, EndedAt: at.Add(time.Hour),
		Ended: PauseTimeout, DurationMS: 3600000}}
	assert.Regexp(t, `(?m)^  \S+\s+cost\s+sigstop\s+1\s+1h0m0s\s+timeout\s+-$`, render(t, killed))
}

// A network: allowlist run's certificate shows what its egress proxy did,
// each destination on a row; a string of the agent's is escaped.
func TestRenderEgress(t *testing.T) {
	c := fullCert()
	c.Egress = &Egress{Allow: []string{"api.github.com:443", "*.pypi.org:443"}, Passed: 3, Refused: 21, BytesOut: 2048, BytesIn: 3 << 20,
		Revoked: true, TunnelsCut: 1, LastByteAt: c.TriggeredAt.Add(150 * time.Microsecond),
		Destinations: []EgressDestination{
			{Destination: "api.github.com:443", Passed: 3, BytesOut: 2048, BytesIn: 3 << 20},
			{Destination: "evil\x1b[2J.example:443", Refused: 21, RefusedReason: "is not in this agent's allowlist"},
		}, DestinationsOmitted: 4}
	out := render(t, c)
	for _, want := range []string{
		"egress: allow api.github.com:443, *.pypi.org:443",
		"passed     3 (0 failed, 0 over the tunnel bound)",
		"refused    21",
		"bytes      2.0 KiB out, 3.0 MiB in",
		"(0s after the trigger)",
		"revoked    1 tunnels cut",
		"api.github.com:443",
		"is not in this agent's allowlist",
		"(4 more destinations)",
	} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, "\x1b[2J")
	assert.NotContains(t, render(t, fullCert()), "egress:", "nothing without a proxy")
}
