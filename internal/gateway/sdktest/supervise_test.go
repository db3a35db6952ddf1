// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package sdktest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
)

// The end-to-end tests run the real `hermeskilld supervise`, built from
// this repository, with an agent built from testdata/agent: a program on
// the providers' official SDKs that contains nothing of hermeskill's.

var binDir string // where TestMain's temporary directory holds the builds

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hk-sdktest-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// binaries builds hermeskilld and the agent once, for every test that
// needs them.
var binaries = sync.OnceValues(func() (bins, error) {
	b := bins{hermeskilld: filepath.Join(binDir, "hermeskilld"), agent: filepath.Join(binDir, "agent")}
	gobin, err := exec.LookPath("go") // go test puts its own go first in PATH
	if err != nil {
		return b, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, build := range []struct{ dir, out, pkg string }{
		{"../../..", b.hermeskilld, "./cmd/hermeskilld"},
		{".", b.agent, "./testdata/agent"},
	} {
		cmd := exec.CommandContext(ctx, gobin, "build", "-o", build.out, build.pkg)
		cmd.Dir = build.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return b, errors.New("go build " + build.pkg + ": " + err.Error() + "\n" + string(out))
		}
	}
	return b, nil
})

type bins struct{ hermeskilld, agent string }

func built(t *testing.T) bins {
	t.Helper()
	b, err := binaries()
	require.NoError(t, err)
	return b
}

// operatorEnv is what hermeskilld's own environment holds of the
// providers, as an operator's shell might: the real keys and settings
// that would send the agent's SDKs elsewhere, which the agent must not
// get, and settings of the SDKs and their frameworks (operatorSettings),
// which it must.
var operatorEnv = append([]string{
	"OPENAI_API_KEY=" + openaiKey, "OPENAI_BASE_URL=https://api.openai.com/v1", "OPENAI_ORG_ID=org-operator",
	"ANTHROPIC_API_KEY=" + anthropicKey, "ANTHROPIC_BASE_URL=https://api.anthropic.com",
	// Read by frameworks on the SDKs (LangChain's ChatAnthropic takes it
	// before ANTHROPIC_BASE_URL; Codex CLI sends OPENAI_PROJECT).
	"ANTHROPIC_API_URL=https://api.anthropic.com", "OPENAI_PROJECT=proj-operator",
}, operatorSettings...)

// operatorSettings are the variables of operatorEnv that are neither
// credentials nor endpoints: they pass.
var operatorSettings = []string{"OPENAI_AGENTS_DISABLE_TRACING=1", "ANTHROPIC_LOG=debug"}

// e2e is one `hermeskilld supervise` run and what it left.
type e2e struct {
	dir    string
	code   int
	stderr string
}

// writeFile writes a file of the test, mode 0600 (key files need it).
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

// goAgent is the command of testdata/agent with args; it reports to
// dir/agent.jsonl (e2e.agent reads it).
func goAgent(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	return append([]string{built(t).agent, "-report", filepath.Join(dir, "agent.jsonl")}, args...)
}

// supervise runs hermeskilld supervise with args (before --) and the
// agent's command, within a bound, and returns when it exited.
func supervise(t *testing.T, dir string, args []string, agent ...string) e2e {
	t.Helper()
	return superviseEnv(t, dir, nil, args, agent...)
}

// superviseEnv is supervise with env added to hermeskilld's environment
// after operatorEnv (a name set in both takes env's value).
func superviseEnv(t *testing.T, dir string, env, args []string, agent ...string) e2e {
	t.Helper()
	b := built(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	argv := append([]string{"supervise", "--certs-dir", filepath.Join(dir, "certs"),
		"--audit-log", filepath.Join(dir, "audit.jsonl"), "--coop-grace", "5s", "--term-grace", "2s"}, args...)
	argv = append(append(argv, "--"), agent...)
	cmd := exec.CommandContext(ctx, b.hermeskilld, argv...)
	cmd.Env = append(append(os.Environ(), operatorEnv...), env...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	r := e2e{dir: dir, code: cmd.ProcessState.ExitCode(), stderr: stderr.String()}
	t.Logf("%s hermeskilld %s -> %d\n%s", time.Now().Format("15:04:05.000"), strings.Join(argv, " "), r.code, r.stderr)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		require.NoError(t, err)
	}
	require.NoError(t, ctx.Err(), "hermeskilld overran its bound")
	return r
}

// cert is the run's one certificate, decoded, and whether its JSON has a
// metered block.
func (r e2e) cert(t *testing.T) (*certs.Certificate, map[string]json.RawMessage) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(r.dir, "certs", "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1, "one certificate; hermeskilld said:\n%s", r.stderr)
	data, err := os.ReadFile(files[0])
	require.NoError(t, err)
	var c certs.Certificate
	require.NoError(t, json.Unmarshal(data, &c))
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &raw))
	return &c, raw
}

// agentLine is one line of the agent's report (testdata/agent).
type agentLine struct {
	Env     []string `json:"env"`
	N       int      `json:"n"`
	OK      bool     `json:"ok"`
	Tools   int      `json:"tools"`
	Finish  string   `json:"finish"`
	Text    int      `json:"text"`
	Status  int      `json:"status"`
	Code    string   `json:"code"`
	Err     string   `json:"err"`
	Message string   `json:"message"`
	Held    bool     `json:"held"`
	HeldErr string   `json:"held_err"`
}

// agentReport is what the agent wrote: its environment, then its
// requests' outcomes in order, and its held stream's, if any.
type agentReport struct {
	env      map[string]string
	requests []agentLine
	held     *agentLine
}

func (r e2e) agent(t *testing.T) agentReport {
	t.Helper()
	rep := agentReport{}
	rep.env = readAgentLines(t, r, func(l agentLine) []string {
		switch {
		case l.Env != nil:
			return l.Env
		case l.Held:
			rep.held = &l
		default:
			rep.requests = append(rep.requests, l)
		}
		return nil
	})
	return rep
}

// readAgentLines reads the agent's report, agent.jsonl, one JSON line of
// type L at a time, and returns the environment the agent wrote: the
// KEY=VALUE entries take returns (nil for the other lines).
func readAgentLines[L any](t *testing.T, r e2e, take func(L) []string) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(r.dir, "agent.jsonl"))
	require.NoError(t, err, "the agent wrote no report; hermeskilld said:\n%s", r.stderr)
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l L
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
		for _, kv := range take(l) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, env, "the agent wrote its environment")
	return env
}

// auditLines are the audit log's lines of type typ, as JSON text.
func (r e2e) auditLines(t *testing.T, typ string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(r.dir, "audit.jsonl"))
	require.NoError(t, err)
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var v struct {
			Type string `json:"type"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &v), l)
		if v.Type == typ {
			out = append(out, l)
		}
	}
	return out
}

// checkKeys checks that the provider's key never reached the agent and
// that the provider saw only it: the agent's environment has the
// gateway's base URL and a handle for the upstream it uses (and nothing
// of the operator's), the provider got the real key in every request and
// never the agent's handle.
func checkKeys(t *testing.T, rep agentReport, p *provider, keyVar, baseVar, upstream string) {
	t.Helper()
	handle := rep.env[keyVar]
	assert.True(t, strings.HasPrefix(handle, "hk-"), "%s is a handle of the gateway's, not %q", keyVar, handle)
	assert.Regexp(t, `^http://127\.0\.0\.1:\d+/`+upstream+`$`, rep.env[baseVar])
	for k, v := range rep.env {
		assert.NotContains(t, v, openaiKey, "the agent's %s", k)
		assert.NotContains(t, v, anthropicKey, "the agent's %s", k)
		assert.NotContains(t, v, "api.openai.com", "the agent's %s", k)
		assert.NotContains(t, v, "api.anthropic.com", "the agent's %s", k)
	}
	assert.NotContains(t, rep.env, "OPENAI_ORG_ID", "an inherited organisation id is not passed")
	assert.NotContains(t, rep.env, "OPENAI_PROJECT", "nor a project id")
	assert.NotContains(t, rep.env, "ANTHROPIC_API_URL", "nor an endpoint the gateway does not set")
	for _, kv := range operatorSettings {
		k, v, _ := strings.Cut(kv, "=")
		assert.Equal(t, v, rep.env[k], "the inherited setting %s passes", k)
	}
	seen := p.requests()
	require.NotEmpty(t, seen)
	for i, s := range seen {
		assert.True(t, s.KeyOK, "request %d to %s carried the real key, alone", i, s.Path)
		assert.NotContains(t, s.Headers, handle, "request %d: the agent's handle never leaves the gateway", i)
	}
}

// checkEnvLog checks that hermeskilld's log names, on its one line about
// them, the operator's variables the agent did not get, with none of
// their values.
func checkEnvLog(t *testing.T, r e2e, names ...string) {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.Contains(l, "LLM gateway: provider credentials and endpoints of hermeskilld's environment") {
			lines = append(lines, l)
		}
	}
	require.Len(t, lines, 1, "one line names the variables not passed:\n%s", r.stderr)
	for _, n := range names {
		assert.Contains(t, lines[0], `"`+n+`"`)
	}
	for _, kv := range operatorEnv {
		_, v, _ := strings.Cut(kv, "=")
		if !slices.Contains(operatorSettings, kv) {
			assert.NotContains(t, r.stderr, v, "a value in hermeskilld's log")
		}
	}
}

// checkRevocation checks the kill's first step and what reached the
// provider around it: the ladder began by revoking the agent's handle
// (before any signal); the provider got nothing from the agent after the
// revocation but requests already in flight then, which were cut; every
// request the agent sent after its first refusal was refused too, and
// none of the refused ones reached the provider.
func checkRevocation(t *testing.T, c *certs.Certificate, raw map[string]json.RawMessage, rep agentReport, p *provider) {
	t.Helper()
	require.Contains(t, raw, "metered")
	require.NotNil(t, c.Metered)
	m := c.Metered
	require.NotEmpty(t, c.ShutdownLog)
	first := c.ShutdownLog[0]
	require.Equal(t, "capabilities_revoked", first.Step, "the ladder's first step")
	require.False(t, m.RevokedAt.IsZero())
	assert.False(t, m.RevokedAt.Before(c.TriggeredAt), "revoked %s, triggered %s", m.RevokedAt, c.TriggeredAt)
	assert.False(t, m.RevokedAt.Before(first.At), "the step (at %s) revoked the handle (at %s)", first.At, m.RevokedAt)
	cut, _ := first.Detail["llm_requests_cut"].(float64)

	seen := p.requests()
	after, cutSeen := 0, 0
	for _, s := range seen {
		if s.At.After(m.RevokedAt) {
			after++
		}
		if s.Cut {
			cutSeen++
		}
	}
	assert.LessOrEqual(t, after, int(cut), "the provider got %d requests after the revocation; only the %v in flight may have", after, cut)
	assert.LessOrEqual(t, cutSeen, int(cut), "every request the provider saw cut was cut by the revocation")

	ok, refused, cutAgent := 0, 0, 0
	for _, l := range rep.requests {
		switch {
		case l.OK:
			require.Zero(t, refused+cutAgent, "request %d was answered after a refusal", l.N)
			ok++
		case l.Status == 0:
			// In flight at the revocation: a stream the gateway ended with
			// the provider's error event.
			assert.Contains(t, l.Err, "revoked", "request %d", l.N)
			cutAgent++
		default:
			assert.Equal(t, 403, l.Status, "request %d: %s", l.N, l.Err)
			assert.Contains(t, []string{"access_revoked", "permission_error"}, l.Code, "request %d: OpenAI's code, or Anthropic's error type", l.N)
			assert.Contains(t, l.Message, "revoked", "request %d: the gateway's message, in the provider's error format", l.N)
			refused++
		}
	}
	assert.LessOrEqual(t, cutAgent, int(cut))
	require.Positive(t, refused, "the agent's requests after the kill decision were refused")
	assert.Positive(t, m.Refused)
	assert.LessOrEqual(t, len(seen), ok+int(cut), "the provider saw the answered requests and those cut, never a refused one")
	assert.LessOrEqual(t, int64(len(seen)), m.Requests, "the provider saw only requests the gateway forwarded")
	assert.LessOrEqual(t, m.Requests-int64(len(seen)), int64(cut), "every forwarded request but one cut on its way reached the provider")
}

// checkAudit checks the audit log's line per LLM request: one for each
// request forwarded or refused, none holding a key or the agent's handle.
func checkAudit(t *testing.T, r e2e, c *certs.Certificate, handle string) {
	t.Helper()
	lines := r.auditLines(t, "llm_request")
	assert.Len(t, lines, int(c.Metered.Requests+c.Metered.Refused), "one audit line per LLM request")
	for _, l := range lines {
		assert.NotContains(t, l, openaiKey)
		assert.NotContains(t, l, anthropicKey)
		assert.NotContains(t, l, handle)
	}
}
