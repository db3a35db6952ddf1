// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// subAgentParent is a parent agent with no hermeskill code: one call of
// its own, then a sub-agent under a `hermeskilld supervise` of its own
// (argv: hermeskilld, the child's certs dir, python, the child agent),
// then calls until its budget stops it.
const subAgentParent = `
import json, os, subprocess, sys, time, urllib.request
hk, child_certs, py, child = sys.argv[1:5]
base = os.environ["OPENAI_BASE_URL"].rstrip("/")

def call():
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}
    req = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=60) as r:
        r.read()

call()
rc = subprocess.run([hk, "supervise", "--id", "sub", "--max-cost", "0.30", "--certs-dir", child_certs,
                     "--coop-grace", "300ms", "--term-grace", "300ms", "--", py, child, "5", "wait"]).returncode
print("sub-agent ended", rc, flush=True)
while True:
    try:
        call()
    except Exception:
        time.sleep(0.05)
`

// keyedUpstream is usageUpstream's answer ($0.12 a request with
// usagePrices) with the Authorization each request carried.
func keyedUpstream(t *testing.T) (url string, seen func() []string) {
	t.Helper()
	var mu sync.Mutex
	var auths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-test",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":1000,"completion_tokens":100,"total_tokens":1100}}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1", func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), auths...)
	}
}

// A supervise inside a supervised agent is a child run: its gateway
// forwards through the parent's with the parent's handle (the provider
// key enters neither agent; the upstream sees only the key), its own
// budget stops it (its certificate names its parent), and the parent is
// charged for its requests: the parent's budget counts them, and its
// certificate lists what the child spent.
func TestSubAgentThroughParentGateway(t *testing.T) {
	t.Parallel()
	upstream, seen := keyedUpstream(t)
	dir := t.TempDir()
	prices := writeTestFile(t, dir, "prices.yaml", usagePrices)
	key := filepath.Join(dir, "openai.key")
	require.NoError(t, os.WriteFile(key, []byte("sk-provider-secret\n"), 0o600))
	parentAgent := writeTestFile(t, dir, "parent.py", subAgentParent)
	childAgent := writeTestFile(t, dir, "child.py", usageAgent)
	parentCerts, childCerts := filepath.Join(dir, "parent-certs"), filepath.Join(dir, "child-certs")

	r := hkRun(t, nil, "supervise", "--id", "parent", "--certs-dir", parentCerts, "--max-cost", "0.60",
		"--llm-upstream", "openai="+upstream, "--llm-key-file", "openai="+key, "--llm-prices", prices,
		"--coop-grace", "300ms", "--term-grace", "300ms",
		"--", python(t), parentAgent, os.Args[0], childCerts, python(t), childAgent)
	require.NotEqual(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "sub-agent ended", "the sub-agent's supervise returned before the parent was stopped")
	assert.Regexp(t, `(?m)^hermeskilld: agent parent killed \(cost: `, r.stderr)

	child := cert(t, childCerts)
	assert.Equal(t, "sub", child["agent_id"])
	assert.Equal(t, "cost", child["trigger_check"])
	assert.Equal(t, "parent", child["parent_run"])
	cm := child["metered"].(map[string]any)
	assert.Equal(t, 3.0, cm["requests"], "$0.36 of 3 requests crossed the sub-agent's $0.30")
	assert.InDelta(t, 0.36, cm["cost_usd"], 1e-9)

	parent := cert(t, parentCerts)
	assert.Equal(t, "cost", parent["trigger_check"])
	assert.NotContains(t, parent, "parent_run")
	pm := parent["metered"].(map[string]any)
	assert.Equal(t, 5.0, pm["requests"], "1 of its own, 3 of the sub-agent's, 1 more that reached $0.60")
	assert.InDelta(t, 0.60, pm["cost_usd"], 1e-9, "the parent is charged for the sub-agent")
	children, ok := parent["children"].([]any)
	require.True(t, ok, "the parent's certificate lists its children: %v", parent["children"])
	require.Len(t, children, 1)
	c := children[0].(map[string]any)
	assert.Equal(t, "sub", c["run"])
	assert.Equal(t, 3.0, c["requests"])
	assert.Equal(t, 3300.0, c["tokens"])
	assert.InDelta(t, 0.36, c["cost_usd"], 1e-9)

	show := hkRun(t, nil, "certs", "show", certPath(t, parentCerts))
	require.Equal(t, 0, show.code, show.stderr)
	assert.Regexp(t, `(?m)^sub-agents\s+sub: 3 requests, 3300 tokens, \$0\.3600$`, show.stdout)
	show = hkRun(t, nil, "certs", "show", certPath(t, childCerts))
	require.Equal(t, 0, show.code, show.stderr)
	assert.Regexp(t, `(?m)^parent run\s+parent \(its spend is the parent's too\)$`, show.stdout)

	auths := seen()
	require.Len(t, auths, 5)
	for _, a := range auths {
		assert.Equal(t, "Bearer sk-provider-secret", a, "the upstream sees the provider key only")
	}
}

// certPath is the one certificate file in dir.
func certPath(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	return files[0]
}
