// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The simulated internet of these tests is the host's loopback at
// 127.0.0.2, listed by literal address: 127.0.0.1 is the agent's own
// loopback (NO_PROXY), where the gateway and the proxy are.

func needNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("the tests run as uid %d: a network namespace needs CAP_SYS_ADMIN (run go test as root)", os.Geteuid())
	}
}

// internet serves h on 127.0.0.2, plain or TLS.
func internet(t *testing.T, h http.Handler, tls bool) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

func hostPort(t *testing.T, s *httptest.Server) string {
	t.Helper()
	u, err := url.Parse(s.URL)
	require.NoError(t, err)
	return u.Host
}

// egressPython reaches the allowed plain and TLS upstreams through the
// proxy (urllib reads the proxy variables: absolute form for http,
// CONNECT for https), an unlisted host (403), the upstream directly
// (around the proxy) and an address off the host, and the LLM gateway
// (NO_PROXY: direct, inside the namespace).
const egressPython = `
import errno, json, os, socket, ssl, sys, urllib.request, urllib.error
plain, tls = sys.argv[1], sys.argv[2]

def get(url, ctx=None):
    try:
        with urllib.request.urlopen(url, timeout=10, context=ctx) as r:
            return "%d:%s" % (r.status, r.read().decode())
    except urllib.error.HTTPError as e:
        return "%d:%s" % (e.code, e.read().decode().strip())
    except urllib.error.URLError as e:
        return "urlerror:%s" % e.reason

def connect(host, port):
    try:
        socket.create_connection((host, port), timeout=5).close()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))

def ask():
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
    req = urllib.request.Request(os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status

h, p = plain.rsplit(":", 1)
print("python http=%s" % get("http://%s/py" % plain))
print("python https=%s" % get("https://%s/py" % tls, ssl._create_unverified_context()))
print("python unlisted=%s" % get("http://unlisted.example/"))
print("python direct=%s off-host=%s gateway=%s" % (connect(h, int(p)), connect("192.0.2.1", 80), ask()), flush=True)
`

// egressNode: Node 20's fetch ignores the proxy variables (undici's
// EnvHttpProxyAgent is not its default), so it connects directly, which
// the namespace refuses; node:http through the proxy, in absolute form,
// passes.
const egressNode = `
const http = require('node:http');
const plain = process.argv[2];
const proxy = new URL(process.env.HTTP_PROXY);
fetch('http://' + plain + '/node-fetch')
  .then(r => 'fetch=' + r.status)
  .catch(e => 'fetch=' + ((e.cause && e.cause.code) || e.message))
  .then(f => new Promise(done => {
    http.get({host: proxy.hostname, port: proxy.port, path: 'http://' + plain + '/node-http', headers: {Host: plain}}, res => {
      let b = '';
      res.on('data', d => b += d);
      res.on('end', () => done(f + ' http=' + res.statusCode + ':' + b));
    }).on('error', e => done(f + ' http=' + e.code));
  }))
  .then(line => console.log('node ' + line + ' v' + process.versions.node.split('.')[0]));
`

// network: allowlist with real clients inside the namespace: curl,
// Python's urllib and Node, each reaching the listed upstreams through
// the proxy and refused elsewhere; nothing reaches around it; the
// gateway is reached directly; the certificate-less clean exit still
// logs, and the daemon-less run's figures are in the egress block of a
// certificate when one is written (the next test).
func TestAllowlistClients(t *testing.T) {
	needNetns(t)
	node, nodeErr := exec.LookPath("node")
	curl, err := exec.LookPath("curl")
	require.NoError(t, err, "curl is needed (apt-get install curl)")
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	})
	plain, tls := internet(t, hello, false), internet(t, hello, true)
	upstream, _ := usageUpstream(t)
	dir := t.TempDir()
	py := writeTestFile(t, dir, "agent.py", egressPython)
	js := writeTestFile(t, dir, "agent.js", egressNode)
	script := fmt.Sprintf(`set -u
P=%[1]s T=%[2]s
echo "curl http=$(%[3]s -sS http://$P/curl)"
echo "curl https=$(%[3]s -sSk https://$T/curl)"
echo "curl unlisted=$(%[3]s -sS -w ' %%{http_code}' http://unlisted.example/)"
%[3]s -sS --noproxy '*' --max-time 5 http://$P/ >/dev/null 2>&1; echo "curl direct-exit=$?"
%[4]s %[5]s $P $T
`, hostPort(t, plain), hostPort(t, tls), curl, python(t), py)
	if nodeErr == nil {
		script += node + " " + js + " $P\n"
	}
	cmd := writeTestFile(t, dir, "agent.sh", script)
	r := hkRun(t, []string{"XDG_RUNTIME_DIR=" + dir}, "supervise", "--heartbeat-timeout", "0s",
		"--allow", hostPort(t, plain), "--allow", hostPort(t, tls), "--allow", "*.example.org:443",
		"--llm-upstream", "openai="+upstream, "--certs-dir", filepath.Join(dir, "certs"), "--", "/bin/sh", cmd)
	require.Equal(t, 0, r.code, r.stderr)
	want := "curl http=hello /curl\n" +
		"curl https=hello /curl\n" +
		"curl unlisted=egress to unlisted.example:80 is not in this agent's allowlist\n 403\n" +
		"curl direct-exit=7\n" +
		"python http=200:hello /py\n" +
		"python https=200:hello /py\n" +
		"python unlisted=403:egress to unlisted.example:80 is not in this agent's allowlist\n" +
		"python direct=ECONNREFUSED off-host=ENETUNREACH gateway=200\n"
	if nodeErr != nil {
		t.Logf("no node: %v", nodeErr)
		require.Equal(t, want, r.stdout)
	} else {
		// Node 20's fetch ignores the proxy variables; a later Node's
		// may not (NODE_USE_ENV_PROXY): then only its own line is logged.
		got, nodeLine, _ := strings.Cut(r.stdout, "node ")
		require.Equal(t, want, got)
		t.Logf("node %s", nodeLine)
		if strings.HasSuffix(nodeLine, " v20\n") {
			require.Equal(t, "fetch=ECONNREFUSED http=200:hello /node-http v20\n", nodeLine)
		} else {
			require.Contains(t, nodeLine, " http=200:hello /node-http ")
		}
	}
	require.Contains(t, r.stderr, `"confinement": "signals+network"`)
	require.Contains(t, r.stderr, "egress proxy serving the agent's namespace")
}

// A malformed --allow is refused before anything starts.
func TestAllowFlagRefused(t *testing.T) {
	dir := t.TempDir()
	r := hkRun(t, []string{"XDG_RUNTIME_DIR=" + dir}, "supervise", "--allow", "api.example.org", "--certs-dir", filepath.Join(dir, "certs"), "--", "/bin/true")
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, `allow: "api.example.org": must be HOST:PORT, such as api.github.com:443 or *.pypi.org:443`)
	r = hkRun(t, []string{"XDG_RUNTIME_DIR=" + dir}, "supervise", "--network", "gateway-only", "--allow", "api.example.org:443", "--certs-dir", filepath.Join(dir, "certs"), "--", "/bin/true")
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "allow: is only for network: allowlist (network is gateway-only)")
}

// egressRefuser asks for unlisted destinations until it is stopped.
const egressRefuser = `
import os, time, urllib.request, urllib.error
n = 0
while True:
    n += 1
    try:
        urllib.request.urlopen("http://unlisted-%d.example/" % (n % 3), timeout=5)
    except urllib.error.HTTPError as e:
        pass
    time.sleep(0.01)
`

// The egress check kills an agent that the proxy refused more than
// --max-egress-refusals times; the certificate says why, with the
// figures of each destination, and the revocation of the proxy and the
// gateway's handle comes first in the shutdown log. The first refusal of each destination is an audit line.
func TestEgressRefusalsKill(t *testing.T) {
	needNetns(t)
	dir := t.TempDir()
	py := writeTestFile(t, dir, "agent.py", egressRefuser)
	audit := filepath.Join(dir, "audit.jsonl")
	certsDir := filepath.Join(dir, "certs")
	upstream, _ := usageUpstream(t)
	r := hkRun(t, []string{"XDG_RUNTIME_DIR=" + dir}, "supervise", "--heartbeat-timeout", "0s", "--llm-upstream", "openai="+upstream,
		"--allow", "api.example.org:443", "--max-egress-refusals", "5", "--audit-log", audit,
		"--certs-dir", certsDir, "--", python(t), py)
	require.NotEqual(t, 0, r.code, r.stderr)
	c := readCert(t, certsDir)
	require.Equal(t, "egress", c.TriggerCheck)
	require.Regexp(t, `^the egress proxy refused 6 requests, over the limit of 5; the last: unlisted-\d\.example:80 \(is not in this agent's allowlist\)$`, c.TriggerReason)
	require.NotNil(t, c.Egress)
	e := c.Egress
	assert.Equal(t, []string{"api.example.org:443"}, e.Allow)
	assert.GreaterOrEqual(t, e.Refused, int64(6))
	assert.True(t, e.Revoked)
	require.Len(t, e.Destinations, 3)
	var sum int64
	for _, d := range e.Destinations {
		assert.Regexp(t, `^unlisted-\d\.example:80$`, d.Destination)
		assert.Equal(t, "is not in this agent's allowlist", d.RefusedReason)
		assert.Zero(t, d.Passed)
		sum += d.Refused
	}
	assert.Equal(t, e.Refused, sum)
	first := c.ShutdownLog[0]
	require.Equal(t, "capabilities_revoked", first.Step)
	assert.Equal(t, []any{"egress", "llm"}, first.Detail["capabilities"], "the egress proxy and the gateway's handle")
	assert.Equal(t, float64(0), first.Detail["egress_tunnels_cut"])
	assert.Equal(t, float64(0), first.Detail["llm_requests_cut"])
	refused := auditRecords(t, audit, "egress_refused")
	require.Len(t, refused, 3, "one line for the first refusal of each destination")
	assert.Equal(t, "is not in this agent's allowlist", refused[0]["reason"])
}

// egressStreamer reads a tunnel to a stream that never ends, noting when
// each byte arrived, until the tunnel is cut; it ignores the cooperative
// SIGINT so as to read on until then. It writes the instant of its last
// byte (Unix nanoseconds) and the bytes it got to argv[2].
const egressStreamer = `
import os, signal, socket, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
proxy = os.environ["HTTPS_PROXY"].rsplit("/", 1)[1].rsplit(":", 1)
s = socket.create_connection((proxy[0], int(proxy[1])))
s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (sys.argv[1], sys.argv[1])).encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
assert head.startswith(b"HTTP/1.1 200"), head
got, last, how = 0, 0, "eof"
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        got, last = got + len(b), time.time_ns()
except OSError as e:
    how = type(e).__name__
with open(sys.argv[2], "w") as f:
    f.write("%d %d %s" % (last, got, how))
`

// The cut at the kill decision: an agent streaming through a tunnel from
// a server that never stops; --max-egress-bytes decides the kill, the
// revocation closes the tunnel, and the agent's last byte comes within a
// generous bound of the decision (the precise figure is logged).
func TestEgressCutAtKill(t *testing.T) {
	needNetns(t)
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				chunk := []byte(strings.Repeat("s", 16<<10))
				for {
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			}()
		}
	}()
	dir := t.TempDir()
	py := writeTestFile(t, dir, "agent.py", egressStreamer)
	out := filepath.Join(dir, "last")
	certsDir := filepath.Join(dir, "certs")
	r := hkRun(t, []string{"XDG_RUNTIME_DIR=" + dir}, "supervise", "--heartbeat-timeout", "0s",
		"--allow", ln.Addr().String(), "--max-egress-bytes", "64MiB", "--coop-grace", "10s",
		"--certs-dir", certsDir, "--", python(t), py, ln.Addr().String(), out)
	require.NotEqual(t, 0, r.code, r.stderr)
	c := readCert(t, certsDir)
	require.Equal(t, "egress", c.TriggerCheck, c.TriggerReason)
	// Sizes that round alike are given in bytes.
	require.Regexp(t, `^the egress proxy passed (\d+ bytes, over the limit of 67108864 bytes|6\d\.\dMiB, over the limit of 64MiB)$`, c.TriggerReason)
	rev := step(t, c, "capabilities_revoked")
	assert.Equal(t, float64(1), rev.Detail["egress_tunnels_cut"])
	f := strings.Fields(string(mustRead(t, out)))
	require.Len(t, f, 3)
	lastNS, err := strconv.ParseInt(f[0], 10, 64)
	require.NoError(t, err)
	got, err := strconv.ParseInt(f[1], 10, 64)
	require.NoError(t, err)
	last := time.Unix(0, lastNS)
	proxyLast := c.Egress.LastByteAt
	revokedAfter := rev.At.Add(time.Duration(rev.DurationMS * float64(time.Millisecond))).Sub(c.TriggeredAt)
	t.Logf("decision %s; revocation done %s after it; the proxy's last byte %s after the decision; the agent's last read %s after it "+
		"(what its socket held already), ended by %s; the proxy passed %d bytes to it, it read %d",
		c.TriggeredAt.Format(time.RFC3339Nano), revokedAfter, proxyLast.Sub(c.TriggeredAt), last.Sub(c.TriggeredAt), f[2], c.Egress.BytesIn, got)
	require.False(t, proxyLast.IsZero())
	require.Less(t, proxyLast.Sub(c.TriggeredAt), time.Second, "the proxy passed bytes long after the kill decision")
	require.False(t, proxyLast.After(rev.At.Add(time.Duration(rev.DurationMS*float64(time.Millisecond)))), "the proxy passed a byte after the revocation was done")
	require.Less(t, last.Sub(c.TriggeredAt), time.Second, "the agent read on long after the kill decision")
	require.LessOrEqual(t, got, c.Egress.BytesIn)
	require.Equal(t, "capabilities_revoked", c.ShutdownLog[0].Step)
}

// Under the daemon an agent file's network: allowlist works the same: the
// egress check kills on refusals, and the certificate has the figures.
func TestDaemonAllowlist(t *testing.T) {
	needNetns(t)
	m := marker(t)
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello") })
	plain := internet(t, hello, false)
	d := startDaemon(t, "")
	agentPy := filepath.Join(t.TempDir(), "agent.py")
	require.NoError(t, os.WriteFile(agentPy, []byte(`import sys, time, urllib.request, urllib.error
assert urllib.request.urlopen("http://%s/" % sys.argv[1], timeout=10).read() == b"hello"
while True:
    try:
        urllib.request.urlopen("http://unlisted.example/", timeout=5)
    except urllib.error.HTTPError:
        pass
    time.sleep(0.05)
`), 0o644))
	d.writeAgent("egress", fmt.Sprintf("id: egress\ncommand: [%s, %s, %s, %q]\nnetwork: allowlist\nallow: [%q]\n"+
		"checks: {heartbeat_timeout: 0s, egress: {refusals: 3}}\nescalation: {coop_grace: 200ms, term_grace: 2s}\n",
		python(t), agentPy, hostPort(t, plain), m, hostPort(t, plain)))
	var c map[string]any
	require.Eventually(t, func() bool {
		for _, x := range d.certs() {
			if x["agent_id"] == "egress" {
				c = x
				return true
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, "egress", c["trigger_check"])
	require.Equal(t, "the egress proxy refused 4 requests, over the limit of 3; the last: unlisted.example:80 (is not in this agent's allowlist)", c["trigger_reason"])
	e := c["egress"].(map[string]any)
	dests := e["destinations"].([]any)
	require.Len(t, dests, 2)
	top := dests[0].(map[string]any)
	require.Equal(t, hostPort(t, plain), top["destination"], "by bytes first")
	require.Equal(t, float64(1), top["passed"])
	require.Greater(t, top["bytes_in"].(float64), float64(0))
	require.Equal(t, "unlisted.example:80", dests[1].(map[string]any)["destination"])
	require.Equal(t, "capabilities_revoked", c["shutdown_log"].([]any)[0].(map[string]any)["step"])
}
