// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
)

// A kill leaves Kubernetes its reason: the termination message file holds
// the check, the stage and the certificate's id, within 4 KiB, replacing
// what was there.
func TestSuperviseWritesTerminationLog(t *testing.T) {
	dir := t.TempDir()
	tlog := filepath.Join(dir, "termination-log")
	require.NoError(t, os.WriteFile(tlog, []byte("left by an earlier container\n"), 0o644))
	r := hk(t, "supervise", "--id", "tlog", "--max-runtime", "1s", "--coop-grace", "300ms", "--term-grace", "300ms",
		"--certs-dir", dir, "--termination-log", tlog, "--", python(t), "-c", "import time; time.sleep(60)")
	require.Equal(t, 130, r.code)
	c := cert(t, dir)
	msg := string(mustRead(t, tlog))
	t.Logf("termination message:\n%s", msg)
	assert.LessOrEqual(t, len(msg), certs.DigestMax)
	assert.Regexp(t, `^hermeskilld: tlog killed \(max_runtime: ran for `, msg)
	assert.Contains(t, msg, "escalation reached cooperative")
	assert.Contains(t, msg, "signal SIGINT")
	assert.Contains(t, msg, "certificate: "+c["cert_id"].(string))
	assert.NotContains(t, msg, "earlier container")

	// A run that ends by itself has no certificate: the file is left as is.
	require.NoError(t, os.WriteFile(tlog, nil, 0o644))
	r = hk(t, "supervise", "--id", "tlog", "--certs-dir", t.TempDir(), "--termination-log", tlog, "--", "/bin/true")
	require.Equal(t, 0, r.code)
	assert.Empty(t, mustRead(t, tlog))
}

// Kubernetes' own file is written only when it exists: supervise outside
// a pod never makes one, and a path it cannot write loses nothing else.
func TestTerminationLogPaths(t *testing.T) {
	path, create := terminationLog("/x/y")
	assert.Equal(t, "/x/y", path)
	assert.True(t, create)

	if _, err := os.Stat(kubeTerminationLog); os.IsNotExist(err) {
		path, _ = terminationLog("")
		assert.Empty(t, path, "no pod: no termination message")
	}

	missing := filepath.Join(t.TempDir(), "gone")
	out := supervisor.Outcome{Cert: &certs.Certificate{CertID: "c1", AgentID: "a", TriggerCheck: "manual"}}
	writeTerminationLog(missing, false, out, zap.NewNop())
	assert.NoFileExists(t, missing, "Kubernetes' file is never created")
	writeTerminationLog(filepath.Join(missing, "sub", "file"), true, out, zap.NewNop()) // logged, not fatal
}
