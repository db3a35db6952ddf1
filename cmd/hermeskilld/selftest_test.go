// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
)

// selftest on this host: the canary climbs every rung, its tree ends
// empty, the certificate is signed and verifies, and it is delivered to
// the control plane.
func TestSelftestPasses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := filepath.Join(dir, "signing.key")
	pubPath, err := certs.GenerateKey(key)
	require.NoError(t, err)
	pub, err := certs.LoadPublicKey(pubPath)
	require.NoError(t, err)
	var mu sync.Mutex
	var delivered []string
	plane := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		delivered = append(delivered, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(plane.Close)

	r := hk(t, "selftest", "--certs-dir", filepath.Join(dir, "certs"), "--state-dir", filepath.Join(dir, "state"),
		"--signing-key", key, "--control-plane-url", plane.URL+"/api", "--json")
	require.Equal(t, 0, r.code, r.stdout)
	var rep selftestReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	assert.True(t, rep.OK)
	var names []string
	for _, s := range rep.Steps {
		names = append(names, s.Step)
		assert.True(t, s.OK, "%s: %s", s.Step, s.Detail)
	}
	assert.Equal(t, []string{"host services", "start canary", "cooperative stop", "SIGTERM", "SIGKILL", "tree empty",
		"certificate written", "certificate signed", "control plane"}, names)
	assert.Contains(t, rep.Steps[8].Detail, "delivered to")

	c := readCert(t, filepath.Join(dir, "certs"))
	assert.Equal(t, canaryID, c.AgentID)
	assert.Equal(t, "sigkill", c.Escalation.Reached)
	assert.Subset(t, stepNames(c), []string{"coop_signal_sent", "coop_wait", "sigterm_sent", "term_wait", "sigkill_sent", "reaped"})
	raw, err := certs.ReadFile(filepath.Join(dir, "certs", filepath.Base(strings.Fields(rep.Steps[6].Detail)[0])))
	require.NoError(t, err)
	require.NoError(t, certs.Verify(raw, pub))
	mu.Lock()
	assert.Equal(t, []string{"POST /api/agents/" + canaryID + "/kill_events"}, delivered)
	mu.Unlock()

	// Unsigned, and a control plane that is not there: both said, the
	// certificate queued, and the selftest still passes.
	r = hk(t, "selftest", "--certs-dir", filepath.Join(dir, "certs2"), "--state-dir", filepath.Join(dir, "state2"),
		"--control-plane-url", "http://127.0.0.1:1/api", "--timeout", "200ms")
	require.Equal(t, 0, r.code, r.stdout)
	assert.Regexp(t, `ok +certificate signed .*unsigned \(no signing key configured\)`, r.stdout)
	assert.Regexp(t, `ok +control plane .*queued in `, r.stdout)
	assert.Contains(t, r.stdout, "selftest passed")
}

// A broken halt path fails the selftest, naming the step: here a
// certificates directory that cannot be made.
func TestSelftestFailsNamingTheStep(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "not-a-dir")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	r := hk(t, "selftest", "--certs-dir", filepath.Join(file, "certs"), "--state-dir", filepath.Join(dir, "state"))
	assert.Equal(t, 1, r.code)
	assert.Regexp(t, `FAIL +certificates directory .*not a directory`, r.stdout)
	assert.Contains(t, r.stdout, "selftest FAILED")

	// A signing key that does not load: the host's services fail.
	key := filepath.Join(dir, "bad.key")
	require.NoError(t, os.WriteFile(key, []byte("not a key"), 0o600))
	r = hk(t, "selftest", "--certs-dir", filepath.Join(dir, "certs"), "--state-dir", filepath.Join(dir, "state"),
		"--signing-key", key, "--json")
	assert.Equal(t, 1, r.code)
	var rep selftestReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	assert.False(t, rep.OK)
	require.NotEmpty(t, rep.Steps)
	last := rep.Steps[len(rep.Steps)-1]
	assert.Equal(t, "host services", last.Step)
	assert.False(t, last.OK)
	assert.Contains(t, last.Detail, "signing key")
}
