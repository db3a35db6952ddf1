// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// Secrets of the operator's, in hermeskilld's environment and in the agent
// file: none may reach the agent or a log line.
const (
	shellKey   = "sk-operator-shell-key"
	shellOrg   = "org-operator-shell"
	shellToken = "sk-ant-operator-token"
	fileKey    = "sk-from-agent-file"
	fileAnt    = "sk-ant-from-agent-file"
	fileBase   = "https://elsewhere.example/v1"
	localKey   = "sk-local-upstream"
)

// With the gateway on, a real agent (a shell running env, a Python one
// dumping os.environ) gets every variable but the providers' credentials
// and endpoints: OPENAI_AGENTS_DISABLE_TRACING and the others pass, from
// hermeskilld's environment and from the agent file's env:, which wins as
// everywhere else; the key and base URL are the gateway's, whichever
// source set them; an organisation, a token, a key of a provider with no
// upstream are removed. The log names each removed variable once, never
// its value.
func TestGatewayEnvPassesAllButCredentials(t *testing.T) {
	python, _ := exec.LookPath("python3")
	agents := map[string]func(out string) []string{
		"sh env": func(out string) []string { return []string{"/bin/sh", "-c", `exec env >"$1"`, "sh", out} },
		"python os.environ": func(out string) []string {
			if python == "" {
				t.Skip("python3 not found in PATH: the os.environ agent needs it (apt-get install python3)")
			}
			return []string{python, "-c", "import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], 'w'))", out}
		},
	}
	for name, command := range agents {
		t.Run(name, func(t *testing.T) {
			gw := newGateway(t)
			// hermeskilld's environment, as an operator's shell might have it.
			t.Setenv("OPENAI_API_KEY", shellKey)
			t.Setenv("OPENAI_ORG_ID", shellOrg)
			t.Setenv("ANTHROPIC_AUTH_TOKEN", shellToken)
			t.Setenv("HERMESKILL_LLM_LOCAL_API_KEY", localKey)
			t.Setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
			t.Setenv("ANTHROPIC_LOG", "debug")
			t.Setenv("OPENAI_DEFAULT_MODEL", "gpt-from-shell")

			out := filepath.Join(t.TempDir(), "env")
			a := agentWith(config.Checks{})
			a.ID = "env-check"
			a.Command = command(out)
			a.Env = map[string]string{
				"OPENAI_DEFAULT_MODEL": "gpt-from-file", // a setting: the file wins
				"MY_SETTING":           "kept",
				"OPENAI_API_KEY":       fileKey,  // the gateway's own: its value is kept
				"OPENAI_BASE_URL":      fileBase, // likewise
				"ANTHROPIC_API_KEY":    fileAnt,  // no anthropic upstream: removed
			}
			logs, seen := observer.New(zapcore.DebugLevel)
			r := startRealWith(t, a, func(o *Options) {
				o.Gateway = gw
				o.Log = zap.New(logs)
			})
			res := r.Wait()
			require.Zero(t, res.Exit.ShellCode(), "the agent: %s", res.Exit)

			env := readAgentEnv(t, out)
			for k, want := range map[string]string{
				"OPENAI_AGENTS_DISABLE_TRACING": "1",
				"ANTHROPIC_LOG":                 "debug",
				"OPENAI_DEFAULT_MODEL":          "gpt-from-file",
				"MY_SETTING":                    "kept",
			} {
				assert.Equal(t, want, env[k], "%s passes", k)
			}
			assert.Regexp(t, `^hk-[A-Za-z0-9_-]{43}$`, env["OPENAI_API_KEY"], "the run's handle")
			assert.Regexp(t, `^http://127\.0\.0\.1:\d+/openai$`, env["OPENAI_BASE_URL"], "the gateway")
			for _, k := range []string{"OPENAI_ORG_ID", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY", "HERMESKILL_LLM_LOCAL_API_KEY"} {
				assert.NotContains(t, env, k)
			}
			secrets := []string{shellKey, shellOrg, shellToken, fileKey, fileAnt, fileBase, localKey}
			for k, v := range env {
				for _, s := range secrets {
					assert.NotContains(t, v, s, "the agent's %s", k)
				}
			}

			// The log: hermeskilld's environment at info, the agent file
			// at warn; a name set in both is said once, as the file's.
			named := map[string]int{}
			var lines []string
			for _, e := range seen.FilterMessageSnippet("LLM gateway:").All() {
				b, err := json.Marshal(e.ContextMap())
				require.NoError(t, err)
				lines = append(lines, e.Level.String()+" "+e.Message+" "+string(b))
				for _, s := range secrets {
					assert.NotContains(t, e.Message+string(b), s, "a value in the log")
				}
				for _, f := range []string{"replaced", "removed"} {
					if names, ok := e.ContextMap()[f].([]any); ok {
						for _, n := range names {
							named[n.(string)]++
						}
					}
				}
			}
			assert.Equal(t, []string{
				`info LLM gateway: provider credentials and endpoints of hermeskilld's environment not passed to the agent ` +
					`{"agent":"env-check","removed":["ANTHROPIC_AUTH_TOKEN","HERMESKILL_LLM_LOCAL_API_KEY","OPENAI_ORG_ID"]}`,
				`warn LLM gateway: the agent file's env: sets provider credentials or endpoints, which are the gateway's: not passed to the agent ` +
					`{"agent":"env-check","removed":["ANTHROPIC_API_KEY"],"replaced":["OPENAI_API_KEY","OPENAI_BASE_URL"]}`,
			}, lines)
			for n, c := range named {
				assert.Equal(t, 1, c, "%s named once", n)
			}
		})
	}
}

// Without the gateway, nothing is removed: the agent file's env: and
// hermeskilld's environment pass as they are, keys included (the agent
// talks to its provider itself).
func TestNoGatewayPassesProviderVars(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", shellKey)
	out := filepath.Join(t.TempDir(), "env")
	a := agentWith(config.Checks{})
	a.ID = "env-check"
	a.Command = []string{"/bin/sh", "-c", `exec env >"$1"`, "sh", out}
	a.Env = map[string]string{"ANTHROPIC_BASE_URL": "https://api.anthropic.com"}
	res := startRealWith(t, a, nil).Wait()
	require.Zero(t, res.Exit.ShellCode(), "the agent: %s", res.Exit)
	env := readAgentEnv(t, out)
	assert.Equal(t, shellKey, env["OPENAI_API_KEY"])
	assert.Equal(t, "https://api.anthropic.com", env["ANTHROPIC_BASE_URL"])
}

// readAgentEnv reads what an agent of the tests above wrote of its
// environment: a JSON object (python) or env(1)'s lines (sh).
func readAgentEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	env := map[string]string{}
	if json.Unmarshal(data, &env) == nil {
		return env
	}
	start := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	var last string
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if start.MatchString(l) {
			k, v, _ := strings.Cut(l, "=")
			env[k], last = v, k
		} else if last != "" { // a value with a newline in it
			env[last] += "\n" + l
		}
	}
	return env
}

// withoutProviderVars removes the gateway's variables from both sources,
// and names each once, as the agent file's when both set it; every other
// variable passes untouched, the inputs too.
func TestWithoutProviderVars(t *testing.T) {
	base := []string{"PATH=/usr/bin", "OPENAI_API_KEY=a", "OPENAI_AGENTS_DISABLE_TRACING=1", "OPENAI_ORG_ID=o",
		"ANTHROPIC_LOG=debug", "OPENAI_ORG_ID=o2", "NOEQUALS", "HERMESKILL_LLM_X_BASE_URL=u"}
	extra := map[string]string{"OPENAI_API_KEY": "b", "ANTHROPIC_BASE_URL": "c", "OPENAI_DEFAULT_MODEL": "m"}
	origBase, origExtra := slices.Clone(base), map[string]string{"OPENAI_API_KEY": "b", "ANTHROPIC_BASE_URL": "c", "OPENAI_DEFAULT_MODEL": "m"}

	gotBase, gotExtra, s := withoutProviderVars(base, extra)
	assert.Equal(t, []string{"PATH=/usr/bin", "OPENAI_AGENTS_DISABLE_TRACING=1", "ANTHROPIC_LOG=debug", "NOEQUALS"}, gotBase)
	assert.Equal(t, map[string]string{"OPENAI_DEFAULT_MODEL": "m"}, gotExtra)
	assert.Equal(t, []string{"HERMESKILL_LLM_X_BASE_URL", "OPENAI_ORG_ID"}, s.inherited)
	assert.Equal(t, []string{"ANTHROPIC_BASE_URL", "OPENAI_API_KEY"}, s.file)
	assert.Equal(t, origBase, base)
	assert.Equal(t, origExtra, extra)
}
