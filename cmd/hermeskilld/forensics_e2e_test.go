// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/control"
)

const triggerAgent = `
import os, socket, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); a = os.environ["HERMESKILL_SOCKET"]
s.sendto(b"READY=1", a)
for i in range(5):
    s.sendto(b"WATCHDOG=1\nPROGRESS=%d" % i, a); time.sleep(0.05)
s.sendto(b"WATCHDOG=trigger\nSTATUS=looping", a); time.sleep(30)
`

// Through supervise: the audit log of a kill verifies, against its anchor, and any
// tampering is found and named, with the line; a signed certificate verifies and fails
// after any edit.
func TestSupervisedKillAuditAndCertificateAreTamperEvident(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "signing.key")
	r := hk(t, "keygen", key)
	require.Equal(t, 0, r.code, r.stderr)
	log := filepath.Join(dir, "audit.jsonl")
	certsDir := filepath.Join(dir, "certs")
	r = hk(t, "supervise", "--id", "aud", "--audit-log", log, "--signing-key", key, "--coop-grace", "200ms",
		"--term-grace", "200ms", "--certs-dir", certsDir, "--", python(t), agent(t, dir, triggerAgent))
	require.NotEqual(t, 0, r.code)
	c := cert(t, certsDir)
	require.Equal(t, "self_reported", c["trigger_check"])
	require.NotNil(t, c["signature"])

	r = hkQuiet(t, "audit", "verify", log)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	require.Regexp(t, `^.*audit.jsonl: \d+ lines, chain intact, anchored at seq \d+\n$`, r.stdout)

	lines := strings.SplitAfter(string(mustRead(t, log)), "\n")
	lines = lines[:len(lines)-1] // each line with its "\n"; nothing after the last
	require.GreaterOrEqual(t, len(lines), 5, "started, symptom, ladder steps, exited, certificate")
	anchor := mustRead(t, log+".anchor")
	// verify checks content, a copy of the log, beside a copy of its anchor.
	verify := func(content string, flags ...string) result {
		p := filepath.Join(t.TempDir(), "audit.jsonl")
		require.NoError(t, os.WriteFile(p, []byte(content), 0o640))
		require.NoError(t, os.WriteFile(p+".anchor", anchor, 0o640))
		return hkQuiet(t, append(append([]string{"audit", "verify"}, flags...), p)...)
	}
	last := len(lines)
	r = verify(strings.Join(lines, ""))
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, fmt.Sprintf("%d lines, chain intact, anchored at seq %d", last, last))

	edited := append([]string(nil), lines...)
	edited[2] = strings.Replace(edited[2], `"agent_id":"aud"`, `"agent_id":"aux"`, 1)
	r = verify(strings.Join(edited, ""))
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stdout, ": line 4: edited or reordered", "an edit breaks the link of the next line")

	deleted := append(append([]string(nil), lines[:2]...), lines[3:]...)
	r = verify(strings.Join(deleted, ""))
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stdout, ": line 3: deleted line(s): seq jumps from 2 to 4")

	swapped := append([]string(nil), lines...)
	swapped[1], swapped[2] = swapped[2], swapped[1]
	r = verify(strings.Join(swapped, ""))
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stdout, ": line 2: reordered: lines 2 and 3 swapped (seq 3 before seq 2)")

	r = verify(strings.Join(lines[:last-2], ""))
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stdout, fmt.Sprintf(": tail cut: seq %d-%d missing", last-1, last))
	r = verify(strings.Join(lines[:last-2], ""), "--no-anchor")
	require.Equal(t, 0, r.code, "the chain alone cannot see a cut tail")

	lastEdited := append([]string(nil), lines...)
	lastEdited[last-1] = strings.Replace(lastEdited[last-1], `"agent_id":"aud"`, `"agent_id":"aux"`, 1)
	require.NotEqual(t, lines[last-1], lastEdited[last-1])
	r = verify(strings.Join(lastEdited, ""))
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stdout, fmt.Sprintf(": line %d: edited: seq %d is not the line anchored", last, last))

	r = verify(strings.Join(lines[1:], ""))
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stdout, ": first line missing: seq 1 ")

	sum := sha256.Sum256([]byte(strings.TrimSuffix(lines[last-1], "\n")))
	forged := fmt.Sprintf(`{"seq":%d,"time":"2026-12-02T10:15:03Z","type":"operator_request","data":{"uid":0},"prev_sha256":"%x"}`+"\n", last+1, sum)
	r = verify(strings.Join(lines, "") + forged)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stdout, fmt.Sprintf(": line %d: lines past the anchor: seq %d (the anchor ends at seq %d)", last+1, last+1, last))

	// What a writer killed inside write(2) leaves: a torn line after the anchored one.
	r = verify(strings.Join(lines, "") + lines[last-1][:len(lines[last-1])/2])
	require.Equal(t, 0, r.code, "a torn last line is what a crash leaves")
	require.Contains(t, r.stderr, "torn")

	// The certificate verifies, and fails after any edit.
	files, _ := filepath.Glob(filepath.Join(certsDir, "*.json"))
	require.Len(t, files, 1)
	r = hkQuiet(t, "certs", "verify", "--pubkey", key+".pub", files[0])
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	raw := mustRead(t, files[0])
	for _, edit := range [][2]string{{`"aud"`, `"aux"`}, {`"self_reported"`, `"manual"`}, {`"cooperative"`, `"sigterm"`}} {
		if !bytes.Contains(raw, []byte(edit[0])) {
			continue
		}
		p := filepath.Join(t.TempDir(), filepath.Base(files[0]))
		require.NoError(t, os.WriteFile(p, bytes.Replace(raw, []byte(edit[0]), []byte(edit[1]), 1), 0o640))
		r = hkQuiet(t, "certs", "verify", "--pubkey", key+".pub", p)
		require.Equal(t, 1, r.code, "edit %s -> %s passed verification", edit[0], edit[1])
	}
}

// controlPlane is a real HTTP server standing for the fleet's control
// plane: it fails the first `fail` deliveries, dedups by Idempotency-Key,
// and serves directives.
type controlPlane struct {
	srv *httptest.Server

	mu         sync.Mutex
	down       bool // kill events are refused with 503 while set
	attempts   int
	byKey      map[string]int // deliveries accepted per Idempotency-Key
	auth       []string
	directives map[string]string // agent -> JSON body
}

func newControlPlane(t *testing.T, down bool) *controlPlane {
	cp := &controlPlane{down: down, byKey: map[string]int{}, directives: map[string]string{}}
	cp.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cp.mu.Lock()
		defer cp.mu.Unlock()
		cp.auth = append(cp.auth, r.Header.Get("Authorization"))
		switch {
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/kill_events"):
			cp.attempts++
			if cp.down {
				http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
				return
			}
			var body map[string]any
			data, _ := io.ReadAll(r.Body)
			if json.Unmarshal(data, &body) != nil || body["death_certificate"] == nil {
				http.Error(w, "bad payload", http.StatusBadRequest)
				return
			}
			cp.byKey[r.Header.Get("Idempotency-Key")]++
			w.WriteHeader(http.StatusCreated)
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/directives"):
			agent := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/agents/"), "/directives")
			if body, ok := cp.directives[agent]; ok {
				io.WriteString(w, body)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(cp.srv.Close)
	return cp
}

func (cp *controlPlane) setDown(down bool) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.down = down
}

func (cp *controlPlane) attemptCount() int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.attempts
}

func (cp *controlPlane) delivered() map[string]int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	out := map[string]int{}
	for k, v := range cp.byKey {
		out[k] = v
	}
	return out
}

func (cp *controlPlane) config(t *testing.T, root string) string {
	token := filepath.Join(root, "cp.token")
	require.NoError(t, os.WriteFile(token, []byte("s3cret\n"), 0o600))
	return fmt.Sprintf("control_plane: {url: %q, token_file: %s, poll_interval: 200ms, timeout: 2s}\n", cp.srv.URL, token)
}

// The control plane is down until the restarted daemon has
// tried it too, then up; the certificate arrives exactly once per
// Idempotency-Key, across a daemon restart in between.
func TestControlPlaneDelivery(t *testing.T) {
	cp := newControlPlane(t, true)
	m := marker(t)
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	root := shortTemp(t)
	d := startDaemonIn(t, root, cp.config(t, root))
	d.writeAgent("cpbot", sleeper(t, "cpbot", m, ""))
	d.waitState("cpbot", control.StateRunning)
	r := d.ctl("kill", "cpbot", "--reason", "for the control plane")
	require.Equal(t, 0, r.code, r.stderr)
	certID := d.certs()[0]["cert_id"].(string)

	// Restart the daemon while the delivery is still failing.
	require.Eventually(t, func() bool { return cp.attemptCount() >= 1 }, 30*time.Second, 20*time.Millisecond)
	d.stop(syscall.SIGTERM)
	require.Empty(t, cp.delivered(), "nothing was accepted yet")
	before := cp.attemptCount()
	d.start()
	require.Eventually(t, func() bool { return cp.attemptCount() > before }, 30*time.Second, 20*time.Millisecond,
		"the restarted daemon never retried; daemon log:\n%s", d.logText())
	require.Empty(t, cp.delivered(), "nothing was accepted yet")
	cp.setDown(false)
	require.Eventually(t, func() bool { return cp.delivered()[certID] >= 1 }, 60*time.Second, 50*time.Millisecond,
		"the certificate never arrived; daemon log:\n%s", d.logText())
	require.Never(t, func() bool { return cp.delivered()[certID] > 1 }, time.Second, 100*time.Millisecond)
	require.Equal(t, map[string]int{certID: 1}, cp.delivered())
	cp.mu.Lock()
	require.Contains(t, cp.auth, "Bearer s3cret")
	cp.mu.Unlock()
}

// A directive on the control plane kills the named
// agent; the certificate's operator comes from the directive.
func TestControlPlaneDirective(t *testing.T) {
	cp := newControlPlane(t, false)
	m := marker(t)
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	root := shortTemp(t)
	d := startDaemonIn(t, root, cp.config(t, root))
	d.writeAgent("target", sleeper(t, "target", m, ""))
	d.writeAgent("bystander", sleeper(t, "bystander", m, ""))
	d.waitState("target", control.StateRunning)
	d.waitState("bystander", control.StateRunning)
	cp.mu.Lock()
	cp.directives["target"] = `{"directives":[{"id":"d-1","action":"kill","reason":"fleet says stop","operator":"alice@cp"}]}`
	cp.mu.Unlock()
	d.waitState("target", control.StateQuarantined)
	require.Eventually(t, func() bool { return len(d.certs()) == 1 }, 10*time.Second, 20*time.Millisecond)
	c := d.certs()[0]
	require.Equal(t, "target", c["agent_id"])
	require.Equal(t, "control-plane:alice@cp", c["operator"])
	require.Equal(t, "fleet says stop", c["operator_reason"])
	require.Equal(t, control.StateRunning, d.agentsByID()["bystander"].State)
}

// /metrics after a scripted scenario: two agents,
// one killed by heartbeat_timeout, one forged datagram.
func TestMetricsScenario(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	m := marker(t)
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	d := startDaemon(t, fmt.Sprintf("metrics: {listen: %q}\n", addr))
	d.writeAgent("steady", sleeper(t, "steady", m, ""))
	d.writeAgent("silent", fmt.Sprintf(`id: silent
command: [%s, -c, "import os, socket, time\nsocket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b'READY=1', os.environ['HERMESKILL_SOCKET'])\ntime.sleep(60)", %q]
escalation: {coop_grace: 200ms, term_grace: 200ms}
checks: {heartbeat_timeout: 300ms}
`, python(t), m))
	d.waitState("steady", control.StateRunning)
	d.waitState("silent", control.StateQuarantined)

	// One forged datagram: from this process, not in steady's tree.
	conn, err := net.Dial("unixgram", filepath.Join(d.root, "run", "agents", "steady", "notify.sock"))
	require.NoError(t, err)
	_, err = conn.Write([]byte("WATCHDOG=1"))
	require.NoError(t, err)
	conn.Close()

	scrape := func() string {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	var text string
	require.Eventually(t, func() bool {
		text = scrape()
		return strings.Contains(text, `hermeskill_datagrams_dropped_total{agent="steady",reason="forged"} 1`)
	}, 20*time.Second, 50*time.Millisecond, "metrics:\n%s", text)
	require.Regexp(t, `hermeskill_kills_total\{check="heartbeat_timeout",mode="enforce",reached="[a-z]+",trigger_type="auto"\} 1`, text)
	for _, want := range []string{
		`hermeskill_symptoms_total{check="heartbeat_timeout",severity="terminal"} 1`,
		`hermeskill_agents{state="running"} 1`,
		`hermeskill_agents{state="quarantined"} 1`,
		`hermeskill_certificates_written_total 1`,
		`hermeskill_kill_seconds_count 1`,
		`hermeskill_audit_events_lost_total{reason="queue_full"} 0`,
		`hermeskill_audit_events_lost_total{reason="write_failed"} 0`,
	} {
		require.Contains(t, text, want)
	}
}
