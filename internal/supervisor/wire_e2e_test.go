// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/gateway"
)

// wireAgent is an agent with no hermeskill code and no sd_notify: urllib
// and the variables an OpenAI SDK reads. It calls its model N times, 0.2s
// apart, then does what its mode says.
const wireAgent = `
import json, os, sys, threading, time, urllib.error, urllib.request
mode, n = sys.argv[1], int(sys.argv[2])
base = os.environ["OPENAI_BASE_URL"].rstrip("/")

def call(stream=False, upstream=""):
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
    if stream:
        body["stream"] = True
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}
    if upstream:
        headers["X-Test-Upstream"] = upstream
    req = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=600) as r:
        for _ in r:  # line by line: a stream as it comes
            pass

for _ in range(n):
    call()
    time.sleep(0.2)
if mode == "spin":
    while True:
        pass
elif mode == "hang":
    threading.Event().wait()
elif mode == "await":
    import asyncio

    async def main():
        await asyncio.get_running_loop().create_future()  # a promise that never settles

    asyncio.run(main())
elif mode == "deadlock":
    lock = threading.Lock()
    lock.acquire()
    lock.acquire()
elif mode == "slow":
    call(upstream="slow")
    call(stream=True, upstream="slow")
elif mode in ("no-headers", "silent-stream"):
    try:
        call(stream=mode == "silent-stream", upstream=mode)
    except (urllib.error.URLError, OSError, ValueError) as e:
        print("the gateway ended the request:", e, flush=True)
    threading.Event().wait()
print("done", flush=True)
`

// wireSlow is how long the "slow" upstream takes over each answer.
const wireSlow = 3 * time.Second

// wireUpstream is a fake OpenAI upstream for the wire tests. By the
// agent's X-Test-Upstream header: "slow" answers after wireSlow (a
// stream, event by event over wireSlow); "no-headers" never answers;
// "silent-stream" sends one event and falls silent. Else it answers at
// once.
func wireUpstream(w http.ResponseWriter, r *http.Request) {
	// The body read whole: only then does net/http watch the connection,
	// and cancel r's context when the gateway gives up on it.
	var req struct{ Stream bool }
	_ = json.NewDecoder(r.Body).Decode(&req)
	_, _ = io.Copy(io.Discard, r.Body)
	chunk := `{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"content":"ok"}}]}`
	stream := func(events ...string) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range events {
			fmt.Fprintf(w, "data: %s\n\n", ev)
			w.(http.Flusher).Flush()
		}
	}
	wait := func(d time.Duration) bool {
		select {
		case <-time.After(d):
			return true
		case <-r.Context().Done():
			return false
		}
	}
	how := r.Header.Get("X-Test-Upstream")
	switch {
	case how == "no-headers":
		wait(time.Hour)
		return
	case how == "silent-stream":
		stream(chunk)
		wait(time.Hour)
		return
	case how == "slow" && req.Stream:
		for i := time.Duration(0); i < wireSlow; i += 100 * time.Millisecond {
			stream(chunk)
			if !wait(100 * time.Millisecond) {
				return
			}
		}
		stream(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],`+
			`"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, "[DONE]")
		return
	case how == "slow":
		if !wait(wireSlow) {
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-test",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`)
}

// wireGateway is a gateway in front of wireUpstream. bound, when set, is
// both its bounds on a request in flight: the wait for the upstream's
// headers and the silence of a response body (0: the defaults, minutes).
func wireGateway(t *testing.T, bound time.Duration) *gateway.Gateway {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(wireUpstream))
	gw, err := gateway.New(gateway.Config{Listen: "127.0.0.1:0",
		Upstreams:             []gateway.Upstream{{Name: "openai", URL: up.URL + "/v1", Style: gateway.OpenAI}},
		UpstreamHeaderTimeout: bound, StreamIdleTimeout: bound})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-served
		up.Close()
	})
	return gw
}

// wireRun runs the wire agent in mode behind gw under checks: no client,
// no sd_notify, only its traffic.
func wireRun(t *testing.T, gw *gateway.Gateway, checks config.Checks, mode string, calls int) (Outcome, time.Duration) {
	t.Helper()
	python := testPython(t)
	script := filepath.Join(t.TempDir(), "agent.py")
	require.NoError(t, os.WriteFile(script, []byte(wireAgent), 0o644))
	a := agentWith(checks)
	a.ID = "wire-" + mode
	a.Command = []string{python, script, mode, fmt.Sprint(calls)}
	a.Escalation.CoopGrace, a.Escalation.TermGrace = 300*time.Millisecond, 300*time.Millisecond
	began := time.Now()
	// Not Exclusive: the runs of one test share the runtime, as a
	// daemon's do.
	out := startRealWith(t, a, func(o *Options) { o.Gateway, o.Exclusive = gw, false }).Wait()
	return out, time.Since(began)
}

// testPython is the interpreter of the Python agents: the system's, not
// a shim (pyenv's takes seconds to start), where there is one.
func testPython(t *testing.T) string {
	t.Helper()
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		python, err = exec.LookPath("python3")
		require.NoError(t, err, "python3 runs the Python agents")
	}
	return python
}

// heartbeatOnly are the timeouts of an agent file with a 1s heartbeat
// timeout (startup_timeout: the 10s floor) and no other check but a
// runtime bound that no test should reach.
var heartbeatOnly = config.Checks{HeartbeatTimeout: time.Second, StartupTimeout: config.StartupFloor, MaxRuntime: time.Minute}

// wireChecksReal adds a 1s progress timeout.
var wireChecksReal = func() config.Checks {
	c := heartbeatOnly
	c.ProgressTimeout = time.Second
	return c
}()

// A healthy agent with no client that calls its model every 0.2s lives
// through many heartbeat and progress timeouts, READY at its first
// request, and exits 0 by itself; so does one whose answers take three
// timeouts each, plain or streamed: a request in flight holds the
// heartbeat and the progress clock.
func TestRunWireHealthyAgentLives(t *testing.T) {
	gw := wireGateway(t, 0)
	for _, tc := range []struct {
		mode  string
		calls int
	}{{"healthy", 30}, {"slow", 2}} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			out, took := wireRun(t, gw, wireChecksReal, tc.mode, tc.calls)
			require.False(t, out.Killed, "killed by %+v", out.Trigger)
			require.Equal(t, 0, out.Exit.Code)
			require.Greater(t, took, 5*time.Second, "it lived past several timeouts")
		})
	}
}

// An agent whose loop stops calling its model — a spin, a hung wait, an
// await on a future that never settles, a deadlock — dies of
// heartbeat_timeout, the timeout after its last
// answer, with no flag but the timeouts.
func TestRunWireWedgedAgentDies(t *testing.T) {
	gw := wireGateway(t, 0)
	for _, mode := range []string{"spin", "hang", "await", "deadlock"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			out, took := wireRun(t, gw, wireChecksReal, mode, 4)
			c := readCert(t, out)
			require.Equal(t, "heartbeat_timeout", c.TriggerCheck, c.TriggerReason)
			require.Contains(t, c.TriggerReason, "no heartbeat or LLM traffic for")
			requireHeldFor(t, c, time.Second)
			require.Less(t, took, 15*time.Second, "4 calls in about a second, a 1s timeout, the ladder")
		})
	}
}

// A request in flight holds the heartbeat only as long as the gateway lets
// it fly: an upstream that never answers is cut at the gateway's header
// timeout, a stream that falls silent at its stream idle timeout (2s
// here). An agent wedged on either dies of heartbeat_timeout the timeout
// after the cut.
func TestRunWireFlightIsBounded(t *testing.T) {
	gw := wireGateway(t, 2*time.Second)
	for _, mode := range []string{"no-headers", "silent-stream"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			out, _ := wireRun(t, gw, heartbeatOnly, mode, 1)
			c := readCert(t, out)
			require.Equal(t, "heartbeat_timeout", c.TriggerCheck, c.TriggerReason)
			requireHeldFor(t, c, time.Second)
			require.NotNil(t, c.Metered)
			flight := c.FinalState.LastHeartbeatAt.Sub(c.Metered.LastRequestAt)
			require.GreaterOrEqual(t, flight, 2*time.Second, "held while in flight")
			require.Less(t, flight, 4*time.Second, "the gateway's bound ended the flight")
		})
	}
}

// requireHeldFor checks that the run was killed timeout after its last
// heartbeat, give or take the loop's latency.
func requireHeldFor(t *testing.T, c *certs.Certificate, timeout time.Duration) {
	t.Helper()
	require.False(t, c.FinalState.LastHeartbeatAt.IsZero())
	silent := c.TriggeredAt.Sub(c.FinalState.LastHeartbeatAt)
	require.GreaterOrEqual(t, silent, timeout)
	require.Less(t, silent, timeout+time.Second, "triggered %s after the last heartbeat", silent)
}
