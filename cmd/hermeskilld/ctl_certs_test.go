// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/calibrate"
	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/outbox"
)

// certFixture is a certificates directory written with internal/certs.
type certFixture struct {
	dir    string
	pub    string   // the signing key's public half
	other  string   // another key's public half
	paths  []string // signed: research-bot, ops-bot, research-bot; then one unsigned
	certs  []*certs.Certificate
	signer *certs.Signer
}

var certT0 = time.Date(2026, 12, 2, 10, 15, 3, 0, time.UTC)

func testCertificate(agent, check string, at time.Time) *certs.Certificate {
	sig := "SIGKILL"
	op, why := "uid:0(root)", "rollout gone wrong"
	c := &certs.Certificate{AgentID: agent, Host: "host1", Mode: certs.ModeEnforce,
		Command: []string{"python3", "agent.py"}, PID: 4242, Containment: certs.ContainmentCgroup,
		StartedAt: at.Add(-time.Hour), TriggeredAt: at, TerminatedAt: at.Add(2 * time.Second),
		TriggerType: certs.TriggerAuto, TriggerCheck: check, TriggerReason: "no heartbeat for 30.0s (timeout 30s)",
		Escalation: certs.Escalation{Reached: certs.ReachedSigkill, CoopSignal: "SIGINT", CoopGraceMS: 10000, TermGraceMS: 5000},
		Exit:       certs.Exit{Signal: &sig},
	}
	if check == "manual" {
		c.TriggerType, c.Operator, c.OperatorReason, c.TriggerReason = certs.TriggerManual, &op, &why, "killed by "+op
	}
	return c
}

func newCertFixture(t *testing.T) *certFixture {
	t.Helper()
	f := &certFixture{dir: t.TempDir()}
	keys := t.TempDir()
	var err error
	f.pub, err = certs.GenerateKey(filepath.Join(keys, "signing.key"))
	require.NoError(t, err)
	f.signer, err = certs.LoadSigner(filepath.Join(keys, "signing.key"))
	require.NoError(t, err)
	f.other, err = certs.GenerateKey(filepath.Join(keys, "other.key"))
	require.NoError(t, err)
	for i, spec := range []struct{ agent, check string }{
		{"research-bot", "heartbeat_timeout"}, {"ops-bot", "manual"}, {"research-bot", "tool_loop"}, {"unsigned-bot", "memory"},
	} {
		c := testCertificate(spec.agent, spec.check, certT0.Add(time.Duration(i)*time.Minute))
		s := f.signer
		if spec.agent == "unsigned-bot" {
			s = nil
		}
		p, err := certs.Write(f.dir, c, s)
		require.NoError(t, err)
		f.paths = append(f.paths, p)
		f.certs = append(f.certs, c)
	}
	return f
}

func TestCertsLs(t *testing.T) {
	f := newCertFixture(t)
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "planted.json"), []byte("not json"), 0o640))
	r := ctlRun(t, "certs", "ls", "--dir", f.dir)
	require.Equal(t, 0, r.code)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 6)
	assert.Regexp(t, `^TRIGGERED\s+AGENT\s+CHECK\s+TYPE\s+REACHED\s+MODE\s+SIGNED\s+CERT\s+REASON$`, lines[0])
	assert.Regexp(t, `^\S+\s+research-bot\s+heartbeat_timeout\s+auto\s+sigkill\s+enforce\s+yes\s+`+f.certs[0].CertID+`\s+no heartbeat for 30\.0s \(timeout 30s\)$`, lines[1])
	assert.Regexp(t, `^\S+\s+ops-bot\s+manual\s+manual\s+`, lines[2])
	assert.Regexp(t, `\s+unsigned-bot\s+memory\s+auto\s+sigkill\s+enforce\s+no\s+`, lines[4])
	assert.Contains(t, r.stdout, "planted.json")
	assert.Contains(t, r.stdout, "unreadable: ")

	r = ctlRun(t, "certs", "ls", "--dir", f.dir, "--agent", "research-bot", "--json")
	require.Equal(t, 0, r.code)
	var list []control.CertSummary
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Len(t, list, 2)
	assert.Equal(t, f.paths[0], list[0].Path)
	assert.Equal(t, "tool_loop", list[1].TriggerCheck)
	assert.True(t, list[0].Signed)
	assert.Contains(t, r.stderr, "planted.json", "an unreadable file is reported, not hidden")

	r = ctlRun(t, "certs", "ls", "--dir", filepath.Join(f.dir, "nope"))
	assert.Equal(t, exitFailure, r.code)
}

func TestCertsFromDaemon(t *testing.T) {
	f := newCertFixture(t)
	b := fleet(time.Now())
	for i, c := range f.certs {
		data := mustRead(t, f.paths[i])
		b.AddCert(summaryOf(f.paths[i], c), data)
	}
	sock := serveFake(t, b, control.ServerOptions{})

	r := ctlRun(t, "certs", "ls", "--control-socket", sock, "--agent", "ops-bot")
	require.Equal(t, 0, r.code)
	assert.Regexp(t, `(?m)^\S+\s+ops-bot\s+manual\s+manual\s+sigkill\s+enforce\s+yes\s+`+f.certs[1].CertID+`\s+killed by uid:0\(root\)$`, r.stdout)

	r = ctlRun(t, "certs", "show", "--control-socket", sock, f.certs[1].CertID, "--pubkey", f.pub)
	require.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "ops-bot")
	assert.Contains(t, r.stdout, "signature check: valid")

	r = ctlRun(t, "certs", "show", "--json", "--control-socket", sock, f.certs[0].CertID)
	require.Equal(t, 0, r.code)
	assert.Equal(t, string(mustRead(t, f.paths[0])), r.stdout, "the file as stored")

	r = ctlRun(t, "certs", "show", "--control-socket", sock, "no-such-cert")
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "no-such-cert")

	// Labels go next to the certificate the daemon names.
	r = ctlRun(t, "certs", "label", "--control-socket", sock, f.certs[2].CertID, "--verdict", "true-positive")
	require.Equal(t, 0, r.code)
	labels, err := calibrate.ReadLabels(f.dir)
	require.NoError(t, err)
	require.Len(t, labels, 1)
	assert.Equal(t, "tool_loop", labels[0].TriggerCheck)
}

func TestCertsWithoutDaemon(t *testing.T) {
	// No daemon and no --dir: the default directory, whatever it holds.
	sock := filepath.Join(socketDir(t), "control.sock")
	r := ctlRun(t, "certs", "ls", "--control-socket", sock)
	assert.Equal(t, 0, r.code)

	// A file named on the command line needs neither.
	f := newCertFixture(t)
	r = ctlRun(t, "certs", "show", "--control-socket", sock, f.paths[0])
	require.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "research-bot")
}

func TestCertsShow(t *testing.T) {
	f := newCertFixture(t)
	r := ctlRun(t, "certs", "show", f.paths[0])
	require.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "research-bot")
	assert.Contains(t, r.stdout, "heartbeat_timeout")
	assert.Contains(t, r.stdout, "hermeskilld certs verify", "without a key, Render says where to check")
	assert.NotContains(t, r.stdout, "signature check")

	r = ctlRun(t, "certs", "show", "--pubkey", f.pub, f.paths[0], f.paths[1])
	require.Equal(t, 0, r.code)
	assert.Equal(t, 2, strings.Count(r.stdout, "signature check: valid (key "+f.signer.KeyID()+")"))

	r = ctlRun(t, "certs", "show", "--pubkey", f.other, f.paths[0])
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "hermeskilld: "+f.paths[0]+": signature check FAILED: certificate signed by another key")
	assert.Contains(t, r.stdout, "research-bot", "the certificate is still shown")

	r = ctlRun(t, "certs", "show", "--json", f.paths[1])
	require.Equal(t, 0, r.code)
	assert.Equal(t, string(mustRead(t, f.paths[1])), r.stdout)

	// By id, and by a unique part of it, in --dir.
	r = ctlRun(t, "certs", "show", "--dir", f.dir, "--json", f.certs[2].CertID)
	require.Equal(t, 0, r.code)
	assert.Equal(t, string(mustRead(t, f.paths[2])), r.stdout)
	r = ctlRun(t, "certs", "show", "--dir", f.dir, "--json", "ops-bot")
	require.Equal(t, 0, r.code)
	assert.Equal(t, string(mustRead(t, f.paths[1])), r.stdout)
	r = ctlRun(t, "certs", "show", "--dir", f.dir, "research-bot")
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, `"research-bot" matches 2 certificates`)
	r = ctlRun(t, "certs", "show", "--dir", f.dir, "nothing")
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, `no certificate "nothing" in `+f.dir)

	r = ctlRun(t, "certs", "show", filepath.Join(f.dir, "missing.json"))
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "missing.json")

	r = ctlRun(t, "certs", "show")
	assert.Equal(t, exitUsage, r.code)
}

func TestCertsVerify(t *testing.T) {
	f := newCertFixture(t)
	signed := f.paths[:3]

	r := ctlRun(t, append([]string{"certs", "verify"}, signed...)...)
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "--pubkey FILE is required")

	r = ctlRun(t, append([]string{"certs", "verify", "--pubkey", f.pub}, signed...)...)
	require.Equal(t, 0, r.code)
	for _, p := range signed {
		assert.Contains(t, r.stdout, "OK    "+p+"\n")
	}
	assert.Contains(t, r.stdout, "3 certificate(s) verified with key "+f.signer.KeyID())

	// A certificate edited after signing.
	tampered := filepath.Join(t.TempDir(), "tampered.json")
	data := strings.Replace(string(mustRead(t, f.paths[0])), "no heartbeat for 30.0s", "no heartbeat for 99.0s", 1)
	require.NoError(t, os.WriteFile(tampered, []byte(data), 0o640))
	r = ctlRun(t, "certs", "verify", "--pubkey", f.pub, f.paths[1], tampered)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stdout, "OK    "+f.paths[1])
	assert.Contains(t, r.stderr, "FAIL  "+tampered+": certificate content does not match its signature")
	assert.Contains(t, r.stderr, "hermeskilld: 1 of 2 certificate(s) FAILED verification: "+tampered)

	// The whole directory: the unsigned one fails, loudly, by name.
	r = ctlRun(t, "certs", "verify", "--pubkey", f.pub, f.dir)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "FAIL  "+f.paths[3]+": certificate is not signed")
	assert.Equal(t, 3, strings.Count(r.stdout, "OK    "))

	r = ctlRun(t, "certs", "verify", "--pubkey", f.other, f.paths[0])
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "FAIL  "+f.paths[0]+": certificate signed by another key")

	r = ctlRun(t, "certs", "verify", "--pubkey", f.paths[0], f.paths[0])
	assert.Equal(t, exitFailure, r.code, "a certificate is not a key")

	r = ctlRun(t, "certs", "verify", "--pubkey", f.pub, filepath.Join(f.dir, "missing.json"))
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "FAIL  "+filepath.Join(f.dir, "missing.json"))
}

func TestCertsLabel(t *testing.T) {
	f := newCertFixture(t)
	before := mustRead(t, f.paths[0])

	r := ctlRun(t, "certs", "label", f.paths[0])
	assert.Equal(t, exitUsage, r.code)
	r = ctlRun(t, "certs", "label", f.paths[0], "--verdict", "maybe")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "--verdict must be true-positive or false-positive")

	r = ctlRun(t, "certs", "label", f.paths[0], "--verdict", "false-positive", "--note", "slow API, not a wedge")
	require.Equal(t, 0, r.code)
	labelsPath := filepath.Join(f.dir, calibrate.LabelsFile)
	assert.Equal(t, "certificate "+f.certs[0].CertID+" (agent research-bot, heartbeat_timeout) labelled false-positive in "+labelsPath+"\n", r.stdout)

	r = ctlRun(t, "certs", "label", "--dir", f.dir, f.certs[1].CertID, "--verdict", "true-positive")
	require.Equal(t, 0, r.code)

	assert.Equal(t, before, mustRead(t, f.paths[0]), "the certificate is never modified")
	r = ctlRun(t, "certs", "verify", "--pubkey", f.pub, f.paths[0])
	assert.Equal(t, 0, r.code)

	fi, err := os.Stat(labelsPath)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm())
	labels, err := calibrate.ReadLabels(f.dir)
	require.NoError(t, err)
	require.Len(t, labels, 2)
	assert.Equal(t, calibrate.Label{CertID: f.certs[0].CertID, AgentID: "research-bot", TriggerCheck: "heartbeat_timeout",
		Verdict: calibrate.FalsePositive, Note: "slow API, not a wedge", At: labels[0].At, By: control.CallerName(os.Getuid())}, labels[0])
	assert.WithinDuration(t, time.Now(), labels[0].At, time.Minute)
	assert.Equal(t, "manual", labels[1].TriggerCheck)
	assert.Equal(t, calibrate.TruePositive, labels[1].Verdict)

	var line map[string]any
	first, _, _ := strings.Cut(string(mustRead(t, labelsPath)), "\n")
	require.NoError(t, json.Unmarshal([]byte(first), &line))
	for _, k := range []string{"cert_id", "agent_id", "trigger_check", "verdict", "note", "at", "by"} {
		assert.Contains(t, line, k)
	}

	r = ctlRun(t, "certs", "label", "--dir", f.dir, "nothing", "--verdict", "true-positive")
	assert.Equal(t, exitFailure, r.code)
}

// writeReceipt writes a directive receipt as the daemon stores it in
// outbox/receipts/, signed by s over its canonical JSON (nil: unsigned).
func writeReceipt(t *testing.T, dir string, s *certs.Signer) string {
	t.Helper()
	r := outbox.Receipt{Schema: outbox.ReceiptSchema, Host: "agents-7", DirectiveID: "d-2041", Action: "estop",
		ReceivedAt: certT0, AcknowledgedAt: certT0.Add(time.Second),
		Runs:   []outbox.RunEnded{{AgentID: "research-bot", CertID: "01a2", TreeEmpty: true, Revoked: true, Reached: "sigterm"}},
		Failed: []outbox.Failure{{AgentID: "triage", Error: "not running; quarantined"}}}
	b, err := json.Marshal(r)
	require.NoError(t, err)
	if s != nil {
		r.Signature, err = s.SignJSON(b)
		require.NoError(t, err)
		b, err = json.Marshal(r)
		require.NoError(t, err)
	}
	require.NoError(t, os.MkdirAll(dir, 0o750))
	p := filepath.Join(dir, "receipt-0123456789abcdef0123456789abcdef.json")
	require.NoError(t, os.WriteFile(p, append(b, '\n'), 0o640))
	return p
}

// A directive receipt verifies as what it is, alone, in its directory, or
// beside certificates; one altered, unsigned or signed by another key
// fails, said of a receipt.
func TestCertsVerifyReceipt(t *testing.T) {
	f := newCertFixture(t)
	receipts := filepath.Join(t.TempDir(), "outbox", "receipts")
	rp := writeReceipt(t, receipts, f.signer)

	r := ctlRun(t, "certs", "verify", "--pubkey", f.pub, rp)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "OK    "+rp+" (receipt of directive d-2041, estop)\n"+
		"1 receipt(s) verified with key "+f.signer.KeyID()+"\n", r.stdout)

	r = ctlRun(t, "certs", "verify", "--pubkey", f.pub, receipts)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "OK    "+rp+" (receipt of directive d-2041, estop)\n")
	assert.Contains(t, r.stdout, "1 receipt(s) verified with key ")

	r = ctlRun(t, "certs", "verify", "--pubkey", f.pub, f.paths[0], f.paths[1], rp)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "2 certificate(s) and 1 receipt(s) verified with key "+f.signer.KeyID())

	tampered := filepath.Join(t.TempDir(), "tampered.json")
	data := strings.Replace(string(mustRead(t, rp)), `"tree_empty":true`, `"tree_empty":false`, 1)
	require.NotEqual(t, string(mustRead(t, rp)), data)
	require.NoError(t, os.WriteFile(tampered, []byte(data), 0o640))
	r = ctlRun(t, "certs", "verify", "--pubkey", f.pub, f.paths[0], tampered)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "FAIL  "+tampered+": receipt content does not match its signature\n")
	assert.Contains(t, r.stderr, "hermeskilld: 1 of 1 certificate(s) and 1 receipt(s) FAILED verification: "+tampered)

	unsigned := writeReceipt(t, t.TempDir(), nil)
	r = ctlRun(t, "certs", "verify", "--pubkey", f.pub, unsigned)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "FAIL  "+unsigned+": receipt is not signed\n")
	assert.Contains(t, r.stderr, "1 of 1 receipt(s) FAILED verification")

	r = ctlRun(t, "certs", "verify", "--pubkey", f.other, rp)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "FAIL  "+rp+": receipt signed by another key: signed by \""+f.signer.KeyID()+"\"")
}
