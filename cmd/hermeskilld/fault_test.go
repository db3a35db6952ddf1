// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/fault"
)

// panicEnv makes the test binary, run as hermeskilld, panic at the
// fault.Inject points it names: "component:agent,…".
const panicEnv = "HK_TEST_PANIC"

func injectPanics(spec string) {
	if spec == "" {
		return
	}
	want := map[string]bool{}
	for _, p := range strings.Split(spec, ",") {
		want[p] = true
	}
	fault.SetTestHook(func(component, agent string) {
		if want[component+":"+agent] {
			panic("injected panic in " + component)
		}
	})
}

// A panic in the daemon's code serving one agent — its slot, its run's
// loop — kills that agent only, for internal_error with the stack in its
// certificate: the daemon keeps serving, the other agents keep running,
// and hermeskill_internal_errors_total counts each.
func TestDaemonPanicEndsOneRun(t *testing.T) {
	t.Setenv(panicEnv, fault.Slot+":slotvictim,"+fault.RunLoop+":loopvictim")
	m := marker(t)
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	port := freePort(t)
	d := startDaemon(t, fmt.Sprintf("metrics: {listen: \"127.0.0.1:%d\"}\n", port))
	py := python(t)
	src := writeTestFile(t, d.root, "watched.py", watchedAgent)
	agent := func(id string) string {
		return fmt.Sprintf("id: %s\ncommand: [%s, %s, %q]\nchecks: {heartbeat_timeout: 2s}\n"+
			"escalation: {coop_grace: 200ms, term_grace: 500ms}\nrestart: {policy: always, backoff: 100ms}\n", id, py, src, m)
	}
	d.writeAgent("bystander", agent("bystander"))
	d.waitState("bystander", control.StateRunning)
	d.writeAgent("slotvictim", agent("slotvictim"))
	d.writeAgent("loopvictim", agent("loopvictim"))

	byAgent := map[string]map[string]any{}
	require.Eventually(t, func() bool {
		for _, c := range d.certs() {
			byAgent[c["agent_id"].(string)] = c
		}
		return byAgent["slotvictim"] != nil && byAgent["loopvictim"] != nil
	}, 30*time.Second, 100*time.Millisecond, "no certificates for the victims")
	for id, component := range map[string]string{"slotvictim": fault.Slot, "loopvictim": fault.RunLoop} {
		c := byAgent[id]
		require.Equal(t, "internal_error", c["trigger_check"], id)
		ie, ok := c["internal_error"].(map[string]any)
		require.True(t, ok, "%s: the certificate carries the panic", id)
		require.Equal(t, component, ie["component"])
		require.Contains(t, ie["stack"], "goroutine", id)
		require.NotEqual(t, "none", c["escalation"].(map[string]any)["reached"], "%s was killed", id)
	}
	require.Nil(t, byAgent["bystander"], "the bystander was killed")

	// The slot's agent is left down until released; the daemon answers.
	st := d.waitState("slotvictim", control.StateFailed)
	require.Contains(t, st.Note, "internal error")
	all := d.agentsByID()
	require.Equal(t, control.StateRunning, all["bystander"].State)
	require.Zero(t, all["bystander"].Restarts)

	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(body), `hermeskill_internal_errors_total{component="slot"} 1`)
	require.Regexp(t, `hermeskill_internal_errors_total\{component="run_loop"\} [1-9]`, string(body))
	require.Contains(t, string(body), `hermeskill_internal_errors_total{component="ladder"} 0`)
}
