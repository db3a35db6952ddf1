// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/escalate"
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// startRealWith is startReal with options of the test's.
func startRealWith(t *testing.T, a *config.Agent, opt func(*Options)) *Run {
	t.Helper()
	dir, err := os.MkdirTemp("", "hksup") // short: sun_path is 108 bytes
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	o := Options{Agent: a, Runtime: rt, Exclusive: true, SocketDir: filepath.Join(dir, "sock"),
		CertsDir: filepath.Join(dir, "certs"), Log: zaptest.NewLogger(t)}
	if opt != nil {
		opt(&o)
	}
	r, err := Start(o)
	require.NoError(t, err)
	return r
}

// readCert reads the certificate of a run that was killed.
func readCert(t *testing.T, out Outcome) *certs.Certificate {
	t.Helper()
	require.True(t, out.Killed)
	require.NoError(t, out.CertErr)
	c, _, err := certs.Read(out.CertPath)
	require.NoError(t, err)
	return c
}

// Upstream answers of the fake provider: a chat completion of 110 tokens,
// after upstreamDelay (a model takes hundreds of milliseconds; this one a
// few).
const (
	upstreamDelay  = 15 * time.Millisecond
	tokensPerReply = 110
)

// newGateway is a gateway serving in the test process in front of a fake
// OpenAI upstream.
func newGateway(t *testing.T) *gateway.Gateway {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(upstreamDelay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-test",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"more"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":%d}}`, tokensPerReply)
	}))
	gw, err := gateway.New(gateway.Config{Listen: "127.0.0.1:0",
		Upstreams: []gateway.Upstream{{Name: "openai", URL: up.URL + "/v1", Style: gateway.OpenAI}}})
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

// The kill decision revokes the agent's LLM handle before the autopsy is
// taken: an agent that keeps 8 requests going at once, with a tree of 40
// processes to read, gets no request answered that arrived after
// triggered_at, run after run. The shutdown log still starts with
// capabilities_revoked, before any signal.
func TestRunRevokesAtDecision(t *testing.T) {
	gw := newGateway(t)
	const runs = 20
	var lags []time.Duration
	late := map[int][]string{}
	for i := range runs {
		a := agentWith(config.Checks{Tokens: &config.Limit{Kill: 20 * tokensPerReply}, MaxRuntime: time.Minute})
		a.ID = "spender-" + strconv.Itoa(i)
		a.Command = []string{os.Args[0], "-test.run=^$"}
		a.Env = map[string]string{agentEnv: "llm", llmWorkersEnv: "8", llmChildrenEnv: "40"}
		a.Escalation.CoopGrace, a.Escalation.TermGrace = 2*time.Second, 2*time.Second
		var mu sync.Mutex
		var recs []gateway.Record
		r := startRealWith(t, a, func(o *Options) {
			o.Gateway = gw
			o.OnEvent = func(e Event) {
				if e.Type == EventLLMRequest {
					mu.Lock()
					recs = append(recs, *e.LLM)
					mu.Unlock()
				}
			}
		})
		out := r.Wait()
		c := readCert(t, out)
		require.Equal(t, symptoms.Tokens, out.Trigger.Check)
		require.NotNil(t, c.Metered)
		require.False(t, c.Metered.RevokedAt.IsZero())
		lags = append(lags, c.Metered.RevokedAt.Sub(c.TriggeredAt))

		require.NotEmpty(t, c.ShutdownLog)
		first := c.ShutdownLog[0]
		require.Equal(t, escalate.StepRevoked, first.Step, "the ladder's first step")
		require.False(t, first.At.Before(c.TriggeredAt), "revoked at %s, triggered at %s", first.At, c.TriggeredAt)
		require.False(t, c.Metered.RevokedAt.Before(first.At))
		for _, s := range c.ShutdownLog[1:] {
			switch s.Step {
			case escalate.StepDumpSignal, escalate.StepDirective, escalate.StepCoopSignal, escalate.StepSIGTERM, escalate.StepSIGKILL:
				require.False(t, s.At.Before(c.Metered.RevokedAt), "%s at %s, before the revocation at %s", s.Step, s.At, c.Metered.RevokedAt)
			}
		}

		mu.Lock()
		for _, rec := range recs {
			answered := rec.Status == http.StatusOK && !rec.Refused && !rec.Cut && rec.Err == ""
			if answered && rec.At.After(out.Trigger.At) {
				late[i] = append(late[i], fmt.Sprintf("arrived %s after triggered_at, answered in %s",
					rec.At.Sub(out.Trigger.At), rec.Duration))
			}
		}
		mu.Unlock()
	}
	slices.Sort(lags)
	t.Logf("decision -> revoked_at over %d runs: min %s, median %s, max %s", runs, lags[0], lags[runs/2], lags[runs-1])
	t.Logf("runs with requests answered after triggered_at: %d of %d", len(late), runs)
	require.Empty(t, late, "requests answered although they arrived after the kill was decided")
}

// The STOP directive carries the kill's event id, and the certificate
// then written has that id: a Go agent on pkg/client reads it from its
// StopError, for a check's kill and an operator's.
func TestRunKillEventIDGoClient(t *testing.T) {
	for _, tc := range []struct {
		name, mode, check string
		checks            config.Checks
		manual            bool
	}{
		{"tool_loop", "go-client-loop", "tool_loop", config.Checks{ToolLoop: &config.ToolLoop{Repeats: 3}}, false},
		{"manual", "go-client", "manual", config.Checks{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := agentWith(tc.checks)
			a.Command = []string{os.Args[0], "-test.run=^$"}
			a.Env = map[string]string{agentEnv: tc.mode}
			a.Escalation.CoopSignal = 0 // the directive alone: the agent exits by itself
			a.Escalation.CoopGrace, a.Escalation.TermGrace = 10*time.Second, time.Second
			r := startRealWith(t, a, nil)
			if tc.manual {
				require.Eventually(t, func() bool { return r.Status().Agent.Ready }, 10*time.Second, time.Millisecond)
				r.Kill("ops", "test")
			}
			out := r.Wait()
			c := readCert(t, out)
			require.Equal(t, tc.check, c.TriggerCheck)
			require.Equal(t, certs.ReachedCooperative, c.Escalation.Reached, "the agent answered the STOP")
			require.NotNil(t, c.LastOutput)
			m := regexp.MustCompile(`stopped check=(\S+) kill_event_id=(\S*)`).FindStringSubmatch(c.LastOutput.Stdout)
			require.NotNil(t, m, "the agent's output: %q", c.LastOutput.Stdout)
			require.Equal(t, tc.check, m[1])
			require.Equal(t, c.CertID, m[2], "the STOP's KILL_EVENT_ID is the certificate's id")
			require.Equal(t, out.Cert.CertID, c.CertID)
			require.Contains(t, filepath.Base(out.CertPath), c.CertID)
		})
	}
}

// The same for the Python client: HermeskillTerminated.kill_event_id is
// the id of the certificate written.
func TestRunKillEventIDPythonClient(t *testing.T) {
	python, err := exec.LookPath("python3")
	require.NoError(t, err, "python3 runs the Python client's agent")
	clientDir, err := filepath.Abs(filepath.Join("..", "..", "clients", "python"))
	require.NoError(t, err)
	a := agentWith(config.Checks{ToolLoop: &config.ToolLoop{Repeats: 3}})
	a.Command = []string{python, "-c", `
import sys, time
import hermeskill

hk = hermeskill.Client.from_env()
hk.ready()
hk.start_heartbeat()
try:
    while True:
        hk.tool_call("web_search", {"q": "the same"})
        hk.checkpoint()
        time.sleep(0.01)
except hermeskill.HermeskillTerminated as stop:
    print("stopped check=%s kill_event_id=%s" % (stop.check, stop.kill_event_id), flush=True)
`}
	a.Env = map[string]string{"PYTHONPATH": clientDir}
	a.Escalation.CoopSignal = 0
	a.Escalation.CoopGrace, a.Escalation.TermGrace = 10*time.Second, time.Second
	out := startRealWith(t, a, nil).Wait()
	c := readCert(t, out)
	require.Equal(t, "tool_loop", c.TriggerCheck)
	require.Equal(t, certs.ReachedCooperative, c.Escalation.Reached)
	require.NotNil(t, c.LastOutput)
	m := regexp.MustCompile(`stopped check=(\S+) kill_event_id=(\S*)`).FindStringSubmatch(c.LastOutput.Stdout)
	require.NotNil(t, m, "the agent's output: %q %q", c.LastOutput.Stdout, c.LastOutput.Stderr)
	require.Equal(t, "tool_loop", m[1])
	require.Equal(t, c.CertID, m[2])
}
