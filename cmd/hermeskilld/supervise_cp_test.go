// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fleetPlane is a control plane on a fixed loopback address, for
// supervise: it can be down (nothing listens: connection refused), answer
// 503 to the first kill events, and serve kill directives. It counts the
// events it accepted per Idempotency-Key (a real control plane creates
// one event per key; here a second acceptance would show a re-send).
type fleetPlane struct {
	addr string
	srv  *http.Server

	mu         sync.Mutex
	unavail    int            // answer 503 to this many more kill events
	posts      map[string]int // kill events received per key
	accepted   map[string]int // answered 201 per key
	bodies     map[string]map[string]any
	auth       []string
	polls      map[string]int
	directives map[string]string // agent id -> the body of GET directives
}

// newFleetPlane reserves a loopback address where nothing listens yet.
func newFleetPlane(t *testing.T) *fleetPlane {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return &fleetPlane{addr: addr, posts: map[string]int{}, accepted: map[string]int{},
		bodies: map[string]map[string]any{}, polls: map[string]int{}, directives: map[string]string{}}
}

func (cp *fleetPlane) url() string { return "http://" + cp.addr + "/api" }

// up starts serving on the reserved address; unavail kill events are
// answered 503 first.
func (cp *fleetPlane) up(t *testing.T, unavail int) {
	cp.mu.Lock()
	cp.unavail = unavail
	cp.mu.Unlock()
	var ln net.Listener
	require.Eventually(t, func() bool {
		var err error
		ln, err = net.Listen("tcp", cp.addr)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "the reserved address %s is taken", cp.addr)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/agents/{agent}/kill_events", cp.killEvent)
	mux.HandleFunc("GET /api/agents/{agent}/directives", cp.directivesFor)
	cp.srv = &http.Server{Handler: mux}
	go cp.srv.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { cp.srv.Close() })
}

func (cp *fleetPlane) killEvent(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	data, _ := io.ReadAll(r.Body)
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.auth = append(cp.auth, r.Header.Get("Authorization"))
	cp.posts[key]++
	if cp.unavail > 0 {
		cp.unavail--
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	var body map[string]any
	if json.Unmarshal(data, &body) != nil || body["death_certificate"] == nil {
		http.Error(w, "bad payload", http.StatusBadRequest)
		return
	}
	cp.accepted[key]++
	cp.bodies[key] = body
	w.WriteHeader(http.StatusCreated)
}

func (cp *fleetPlane) directivesFor(w http.ResponseWriter, r *http.Request) {
	agent := r.PathValue("agent")
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.auth = append(cp.auth, r.Header.Get("Authorization"))
	cp.polls[agent]++
	if body, ok := cp.directives[agent]; ok {
		io.WriteString(w, body)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (cp *fleetPlane) acceptedCopy() map[string]int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	out := map[string]int{}
	for k, v := range cp.accepted {
		out[k] = v
	}
	return out
}

func (cp *fleetPlane) postsOf(key string) int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.posts[key]
}

// fleetAgent says READY, prints "ready", writes its pid to the file
// named by its first argument, and sleeps until SIGINT (the cooperative
// stop), which it answers with exit 0.
const fleetAgent = `
import os, socket, sys, time
socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"READY=1", os.environ["NOTIFY_SOCKET"])
open(sys.argv[1], "w").write(str(os.getpid()))
print("ready", flush=True)
try:
    while True:
        time.sleep(0.1)
except KeyboardInterrupt:
    sys.exit(0)
`

func cpToken(t *testing.T, dir string) string {
	p := filepath.Join(dir, "cp.token")
	require.NoError(t, os.WriteFile(p, []byte("s3cret\n"), 0o600))
	return p
}

// certIDs are the cert_ids of the certificates in dir.
func certIDs(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	ids := map[string]bool{}
	for _, f := range files {
		var c struct {
			CertID string `json:"cert_id"`
		}
		require.NoError(t, json.Unmarshal(mustRead(t, f), &c))
		ids[c.CertID] = true
	}
	return ids
}

// The fleet path across an outage. Run 1: the control plane is down
// (connection refused); the agent is killed by a check, the exit status is
// what it always is (124), the certificate is left in the outbox of the
// default state directory (beside the certificates directory) and the
// exit line says so. The control plane comes back answering 503 twice.
// Run 2, same state directory: the earlier certificate is delivered at
// start, while the agent still runs; then a stop signal kills the agent,
// and its certificate is delivered before exit. Each certificate is
// accepted exactly once, with the bearer token.
func TestSuperviseControlPlaneOutageThenRecovery(t *testing.T) {
	root := t.TempDir()
	certsDir := filepath.Join(root, "certs")
	cp := newFleetPlane(t)
	token := cpToken(t, root)
	m := marker(t)
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	src := agent(t, root, fleetAgent)
	args := func(more ...string) []string {
		return append([]string{"supervise", "--id", "fleet-bot", "--certs-dir", certsDir,
			"--control-plane-url", cp.url(), "--control-plane-token-file", token, "--coop-grace", "10s"}, more...)
	}

	r1 := hk(t, append(args("--max-runtime", "1s", "--flush-timeout", "1s", "--"), python(t), src, filepath.Join(root, "pid1"), m)...)
	require.Equal(t, 124, r1.code, "an automatic kill the agent answered with 0 is 124, control plane or not")
	ids := certIDs(t, certsDir)
	require.Len(t, ids, 1)
	var first string
	for id := range ids {
		first = id
	}
	require.Regexp(t, `hermeskilld: agent fleet-bot killed \(max_runtime: .*\); escalation reached cooperative after [0-9.]+s; certificate: `+
		regexpQuote(certsDir)+`/\S+\.json; certificate queued for the control plane \(1 undelivered, will be retried by the next run using `+
		regexpQuote(root)+`\)\n`, r1.stderr)
	require.FileExists(t, filepath.Join(root, "outbox", first+".json"), "the default state directory holds the certificates directory")

	cp.up(t, 2)
	h := hkStart(t, nil, append(args("--flush-timeout", "60s", "--"), python(t), src, filepath.Join(root, "pid2"), m)...)
	h.expect(t, "^ready$")
	require.Eventually(t, func() bool { return cp.acceptedCopy()[first] == 1 }, 60*time.Second, 20*time.Millisecond,
		"the certificate of run 1 was not delivered while run 2's agent ran; stderr:\n%s", h.stderr.String())
	require.GreaterOrEqual(t, cp.postsOf(first), 3, "two 503s, then the acceptance")
	require.NoError(t, h.cmd.Process.Signal(syscall.SIGTERM))
	r2 := h.wait(t)
	require.Equal(t, 0, r2.code, "a manual kill the agent answered with 0 stays 0")

	ids = certIDs(t, certsDir)
	require.Len(t, ids, 2)
	delete(ids, first)
	var second string
	for id := range ids {
		second = id
	}
	require.Equal(t, map[string]int{first: 1, second: 1}, cp.acceptedCopy(), "each certificate exactly once")
	require.Regexp(t, `hermeskilld: agent fleet-bot killed \(manual: .*\); .*; certificate: `+regexpQuote(certsDir)+
		`/\S+\.json; certificate delivered to the control plane; 1 certificate of an earlier run delivered to the control plane\n`, r2.stderr)
	left, err := filepath.Glob(filepath.Join(root, "outbox", "*.json"))
	require.NoError(t, err)
	require.Empty(t, left, "the outbox is empty")
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, a := range cp.auth {
		require.Equal(t, "Bearer s3cret", a)
	}
	dc := cp.bodies[second]["death_certificate"].(map[string]any)
	require.Equal(t, "signal:SIGTERM", dc["operator"])
}

// A kill directive from the control plane kills the running agent through
// the ladder; the certificate names the directive's operator and reason
// and reaches the control plane before supervise exits. The control plane
// comes from the agent file (--config), polled every 200ms.
func TestSuperviseControlPlaneDirective(t *testing.T) {
	root := t.TempDir()
	certsDir := filepath.Join(root, "certs")
	stateDir := filepath.Join(root, "state")
	cp := newFleetPlane(t)
	cp.up(t, 0)
	m := marker(t)
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	cfg := writeTestFile(t, root, "agent.yaml", fmt.Sprintf(
		"id: fleet-target\ncontrol_plane: {url: %q, token_file: %s, poll_interval: 200ms, timeout: 5s}\n", cp.url(), cpToken(t, root)))
	h := hkStart(t, nil, "supervise", "--config", cfg, "--certs-dir", certsDir, "--state-dir", stateDir, "--flush-timeout", "60s",
		"--", python(t), agent(t, root, fleetAgent), filepath.Join(root, "pid"), m)
	h.expect(t, "^ready$")
	require.Eventually(t, func() bool { cp.mu.Lock(); defer cp.mu.Unlock(); return cp.polls["fleet-target"] > 0 },
		60*time.Second, 20*time.Millisecond, "no directive poll; stderr:\n%s", h.stderr.String())
	cp.mu.Lock()
	cp.directives["fleet-target"] = `{"directives":[{"id":"d-1","action":"kill","reason":"fleet says stop","operator":"alice@cp"}]}`
	cp.mu.Unlock()
	r := h.wait(t)
	require.Equal(t, 0, r.code, "the agent's own status: it answered the operator's stop with 0")

	c := readCert(t, certsDir)
	require.Equal(t, "manual", c.TriggerType)
	require.NotNil(t, c.Operator)
	require.Equal(t, "control-plane:alice@cp", *c.Operator)
	require.NotNil(t, c.OperatorReason)
	require.Equal(t, "fleet says stop", *c.OperatorReason)
	require.Equal(t, "cooperative", string(c.Escalation.Reached))
	require.Equal(t, map[string]int{c.CertID: 1}, cp.acceptedCopy())
	require.Contains(t, r.stderr, "; certificate delivered to the control plane\n")
	require.NoDirExists(t, filepath.Join(root, "outbox"), "--state-dir, not the default, holds the outbox")
	require.DirExists(t, filepath.Join(stateDir, "outbox"))
}

// What supervise refuses before it starts anything (exit 125): a token
// file others may read, a token without a URL, a URL in clear text to
// another host, and a state directory another supervise delivers from.
func TestSuperviseControlPlaneRefusals(t *testing.T) {
	root := t.TempDir()
	ran := filepath.Join(root, "ran")
	cmd := []string{"--", "/bin/sh", "-c", "touch " + ran}
	loose := filepath.Join(root, "loose.token")
	require.NoError(t, os.WriteFile(loose, []byte("s3cret\n"), 0o644))
	require.NoError(t, os.Chmod(loose, 0o644))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"token readable by others", []string{"--control-plane-url", "http://127.0.0.1:9/api", "--control-plane-token-file", loose},
			"mode 0644 is readable or writable by group or others (chmod 600 it)"},
		{"token without url", []string{"--control-plane-token-file", cpToken(t, root)}, "control_plane.url: required"},
		{"http elsewhere", []string{"--control-plane-url", "http://cp.example/api"}, "use https"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hk(t, append(append([]string{"supervise", "--certs-dir", filepath.Join(root, "certs")}, tc.args...), cmd...)...)
			require.Equal(t, 125, r.code)
			require.Contains(t, r.stderr, tc.want)
			require.NoFileExists(t, ran, "the agent never started")
		})
	}

	t.Run("state dir in use", func(t *testing.T) {
		m := marker(t)
		t.Cleanup(func() { requireNoSurvivors(t, m) })
		cp := newFleetPlane(t)
		cp.up(t, 0)
		state := filepath.Join(root, "shared")
		base := []string{"supervise", "--certs-dir", filepath.Join(root, "certs"), "--state-dir", state, "--control-plane-url", cp.url()}
		h := hkStart(t, nil, append(base, "--", python(t), agent(t, root, fleetAgent), filepath.Join(root, "pid"), m)...)
		h.expect(t, "^ready$")
		r := hk(t, append(base, cmd...)...)
		require.Equal(t, 125, r.code)
		require.Contains(t, r.stderr, "outbox directory in use: another hermeskilld delivers from --state-dir "+state)
		require.NoFileExists(t, ran)
		require.NoError(t, h.cmd.Process.Signal(syscall.SIGTERM))
		require.Equal(t, 0, h.wait(t).code)
	})
}
