// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package collectortest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The agent: this test binary, re-executed with HK_OTEL_AGENT set. It
// calls its model through the gateway HK_OTEL_AGENT times (the base URL
// and the handle hermeskilld gave it), then waits to be killed.
func TestMain(m *testing.M) {
	if n := os.Getenv("HK_OTEL_AGENT"); n != "" {
		agent(n)
		return
	}
	dir, err := os.MkdirTemp("", "hk-collectortest-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func agent(n string) {
	base, key := os.Getenv("OPENAI_BASE_URL"), os.Getenv("OPENAI_API_KEY")
	for range len(n) { // "xx": two requests
		req, _ := http.NewRequest(http.MethodPost, base+"/chat/completions",
			strings.NewReader(`{"model":"gpt-4.1-mini","messages":[{"role":"user","content":"a secret prompt"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body) //nolint:errcheck
			resp.Body.Close()
		}
	}
	select {}
}

var binDir string

// hermeskilld builds bin/hermeskilld of this repository once.
var hermeskilld = sync.OnceValues(func() (string, error) {
	out := filepath.Join(binDir, "hermeskilld")
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", out, "./cmd/hermeskilld")
	cmd.Dir = "../../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", errors.New("go build: " + err.Error() + "\n" + string(b))
	}
	return out, nil
})

func built(t *testing.T) string {
	t.Helper()
	b, err := hermeskilld()
	require.NoError(t, err)
	return b
}

const upstreamKey = "sk-upstream-secret"

// fakeOpenAI answers chat completions with a tool call and usage.
func fakeOpenAI(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) //nolint:errcheck
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"gpt-4.1-mini-2025-04-14",
"choices":[{"index":0,"message":{"role":"assistant","content":"a secret completion","tool_calls":[
{"id":"call_1","type":"function","function":{"name":"web_search","arguments":"{\"q\":\"x\"}"}}]},"finish_reason":"tool_calls"}],
"usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150}}`) //nolint:errcheck
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

// TestSuperviseKillExported: supervise kills an agent that called its
// model twice through the gateway; the collector received the run's span
// with the two requests' GenAI spans under it, and the certificate's log
// record with its attributes, in the run's trace. Nothing of the prompt,
// the completion, the key or the handle is in anything it received.
func TestSuperviseKillExported(t *testing.T) {
	t.Parallel()
	bin := built(t)
	endpoint, col := startCollector(t)
	dir := t.TempDir()
	keyFile := writeFile(t, dir, "openai.key", upstreamKey+"\n")
	agentFile := writeFile(t, dir, "agent.yaml", "id: otel-bot\nlabels: {team: research}\n")
	self, err := os.Executable()
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "supervise", "--config", agentFile, "--certs-dir", filepath.Join(dir, "certs"),
		"--llm-upstream", "openai="+fakeOpenAI(t), "--llm-key-file", "openai="+keyFile,
		"--max-runtime", "1s", "--coop-grace", "200ms", "--term-grace", "200ms", "--", self)
	cmd.Env = append(os.Environ(), "HK_OTEL_AGENT=xx", "OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint, "OTEL_RESOURCE_ATTRIBUTES=deployment.environment.name=test")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err = cmd.Run()
	t.Logf("supervise exited after %s: %v\n%s", time.Since(start), err, out.String())
	require.Equal(t, 130, cmd.ProcessState.ExitCode(), "killed by max_runtime: the agent died of the cooperative SIGINT")

	// Shutdown exported everything before supervise exited.
	certs := col.logsOf("hermeskill.certificate_written")
	require.Len(t, certs, 1, "the certificate's log record")
	c := certs[0]
	assert.Equal(t, "otel-bot", c.attrs["hermeskill.agent.id"])
	assert.Equal(t, "research", c.attrs["hermeskill.label.team"])
	assert.Equal(t, "max_runtime", c.attrs["hermeskill.check"])
	assert.Equal(t, "auto", c.attrs["hermeskill.trigger_type"])
	assert.Contains(t, []any{"cooperative", "sigterm", "sigkill"}, c.attrs["hermeskill.stage"])
	assert.NotEmpty(t, c.attrs["hermeskill.reason"])
	assert.Contains(t, c.attrs, "hermeskill.exit_code")
	assert.Equal(t, int64(2), c.attrs["hermeskill.llm_requests"])
	assert.Equal(t, int64(300), c.attrs["hermeskill.tokens"])
	var id string
	for _, f := range []string{"certs"} {
		ents, err := os.ReadDir(filepath.Join(dir, f))
		require.NoError(t, err)
		require.Len(t, ents, 1)
		var cert struct {
			CertID string `json:"cert_id"`
		}
		b, err := os.ReadFile(filepath.Join(dir, f, ents[0].Name()))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &cert))
		id = cert.CertID
	}
	assert.Equal(t, id, c.attrs["hermeskill.cert_id"], "the certificate on disk")
	assert.Equal(t, "hermeskilld", c.resource["service.name"])
	assert.Equal(t, "test", c.resource["deployment.environment.name"], "OTEL_RESOURCE_ATTRIBUTES")
	assert.NotEmpty(t, c.resource["host.name"])
	for _, ev := range []string{"hermeskill.agent_started", "hermeskill.symptom", "hermeskill.ladder_step", "hermeskill.agent_exited"} {
		assert.NotEmpty(t, col.logsOf(ev), ev)
	}

	spans := col.allSpans()
	var run *span
	var llm []span
	for i, s := range spans {
		switch {
		case s.name == "hermeskill.run otel-bot":
			run = &spans[i]
		case strings.HasPrefix(s.name, "chat "):
			llm = append(llm, s)
		}
	}
	require.NotNil(t, run, "the run's span: %+v", spans)
	assert.Equal(t, "max_runtime", run.attrs["hermeskill.check"])
	assert.Equal(t, id, run.attrs["hermeskill.cert_id"])
	assert.Equal(t, c.traceID, run.traceID, "the certificate's record is in the run's trace")
	assert.Equal(t, run.spanID, c.spanID)
	require.Len(t, llm, 2, "a span per request")
	for _, s := range llm {
		assert.Equal(t, "chat gpt-4.1-mini", s.name)
		assert.Equal(t, run.traceID, s.traceID)
		assert.Equal(t, run.spanID, s.parentID, "a child of the run's span")
		assert.Equal(t, "chat", s.attrs["gen_ai.operation.name"])
		assert.Equal(t, "openai", s.attrs["gen_ai.provider.name"])
		assert.Equal(t, "gpt-4.1-mini", s.attrs["gen_ai.request.model"])
		assert.Equal(t, "gpt-4.1-mini-2025-04-14", s.attrs["gen_ai.response.model"])
		assert.Equal(t, int64(120), s.attrs["gen_ai.usage.input_tokens"])
		assert.Equal(t, int64(30), s.attrs["gen_ai.usage.output_tokens"])
		assert.Equal(t, []any{"tool_calls"}, s.attrs["gen_ai.response.finish_reasons"])
		assert.Equal(t, []any{"web_search"}, s.attrs["hermeskill.tool_calls"])
		assert.Equal(t, "otel-bot", s.attrs["hermeskill.agent.id"])
		assert.False(t, s.start.Before(run.start) || s.end.After(run.end), "within the run")
	}

	// Never a prompt, a completion, a key or a handle.
	everything, err := json.Marshal(struct {
		L []record
		S []span
	}{col.logs, spans})
	require.NoError(t, err)
	dump := string(everything) + " " + dumpAttrs(col)
	for _, secret := range []string{"a secret prompt", "a secret completion", upstreamKey, "hk-"} {
		assert.NotContains(t, dump, secret)
	}
}

// dumpAttrs writes every attribute and body the collector received.
func dumpAttrs(s *sink) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"logs": fmtRecords(s.logs), "spans": fmtSpans(s.spans)})
	return string(b)
}

func fmtRecords(rs []record) []map[string]any {
	var out []map[string]any
	for _, r := range rs {
		out = append(out, map[string]any{"attrs": r.attrs, "resource": r.resource, "body": r.body})
	}
	return out
}

func fmtSpans(ss []span) []map[string]any {
	var out []map[string]any
	for _, s := range ss {
		out = append(out, map[string]any{"attrs": s.attrs, "resource": s.resource, "name": s.name})
	}
	return out
}

// TestDaemonKillExported: the daemon, its telemetry section pointing at
// the collector, kills an agent at its max_runtime; the certificate's
// record reaches the collector while the daemon runs.
func TestDaemonKillExported(t *testing.T) {
	t.Parallel()
	bin := built(t)
	endpoint, col := startCollector(t)
	root := t.TempDir()
	self, err := os.Executable()
	require.NoError(t, err)
	agents := filepath.Join(root, "agents")
	require.NoError(t, os.MkdirAll(agents, 0o755))
	writeFile(t, agents, "daemon-bot.yaml", "id: daemon-bot\nlabels: {team: ops}\ncommand: ["+self+"]\nenv: {HK_OTEL_AGENT: x}\n"+
		"checks: {max_runtime: 1s}\nescalation: {coop_grace: 200ms, term_grace: 200ms}\n")
	cfg := writeFile(t, root, "hk.yaml", "state_dir: "+filepath.Join(root, "state")+"\nruntime_dir: "+filepath.Join(root, "run")+
		"\nagents_dir: "+agents+"\ntelemetry: {endpoint: \""+endpoint+"\", shutdown_timeout: 2s}\n")

	cmd := exec.Command(bin, "daemon", "--config", cfg, "--log-format", "console")
	cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1") // the file's endpoint wins
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		t.Logf("daemon:\n%s", out.String())
	}()

	require.Eventually(t, func() bool { return len(col.logsOf("hermeskill.certificate_written")) > 0 },
		30*time.Second, 20*time.Millisecond, "the certificate's record, exported while the daemon runs")
	c := col.logsOf("hermeskill.certificate_written")[0]
	assert.Equal(t, "daemon-bot", c.attrs["hermeskill.agent.id"])
	assert.Equal(t, "ops", c.attrs["hermeskill.label.team"])
	assert.Equal(t, "max_runtime", c.attrs["hermeskill.check"])
	assert.Equal(t, "auto", c.attrs["hermeskill.trigger_type"])
	assert.NotEmpty(t, c.attrs["hermeskill.cert_id"])
	assert.NotEmpty(t, c.attrs["hermeskill.stage"])
	assert.Equal(t, "hermeskilld", c.resource["service.name"])
}
