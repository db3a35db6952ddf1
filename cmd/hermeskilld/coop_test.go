// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/pkg/client"
)

// asGoAgent makes the test binary a Go agent on pkg/client (goAgent).
const asGoAgent = "HK_AS_GO_AGENT"

// goAgent is the README's Go agent: no signal handling of its own, its
// work under the client's Context. Stopped by hermeskilld, it takes half
// a second to save and exits 3 when the context's cause is the
// *client.StopError; a SIGINT would end it at once with status 130.
// mode "steps" works in short steps, "wait" waits on the context alone.
func goAgent(mode string) int {
	hk, err := client.FromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer hk.Close()
	ctx := hk.Context(context.Background())
	hk.Ready()
	for i := uint64(1); ctx.Err() == nil; i++ {
		hk.Progress(i)
		d := 50 * time.Millisecond
		if mode == "wait" && i == 3 {
			d = time.Minute
		}
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	var stop *client.StopError
	if !errors.As(context.Cause(ctx), &stop) {
		return 4
	}
	time.Sleep(500 * time.Millisecond) // saving the work
	fmt.Println("saved", stop.Check)
	return 3
}

// coopAgent is the README's Python agent: the documented handler saves
// its work (half a second) and exits 3, between steps or blocked.
const coopAgent = `
import socket, sys, time
import hermeskill
hk = hermeskill.Client.from_env()
hk.ready()
mode = sys.argv[1]
a, b = socket.socketpair()
try:
    for i in range(1, 100000):
        hk.checkpoint()
        hk.progress(i)
        if i == 3 and mode == "sleep":
            time.sleep(60)
        elif i == 3 and mode == "read":
            a.recv(1)
        else:
            time.sleep(0.05)
except hermeskill.HermeskillTerminated as e:
    time.sleep(0.5)
    print("saved", e.check, flush=True)
    sys.exit(3)
sys.exit(4)
`

// With the default flags (--coop-signal SIGINT), an agent on a client gets
// the stop through its client, which acknowledges it; hermeskilld then
// withholds the SIGINT, and the documented handler runs to its end (exit
// 3, "saved"), whether the loop is between steps or blocked. Without the
// acknowledgement the SIGINT would cut the half-second save short: a
// KeyboardInterrupt in Python, status 130 in Go.
func TestClientStopWithDefaultSignal(t *testing.T) {
	runs := soakRuns(t, 2)
	py := python(t)
	src := agent(t, t.TempDir(), coopAgent)
	cases := []struct {
		name string
		env  []string
		argv []string
	}{
		{"python/steps", clientEnv(t), []string{py, src, "steps"}},
		{"python/sleep", clientEnv(t), []string{py, src, "sleep"}},
		{"python/read", clientEnv(t), []string{py, src, "read"}},
		// The variable goes to the agent only: supervise is the test binary too.
		{"go/steps", nil, []string{"env", asGoAgent + "=1", os.Args[0], "steps"}},
		{"go/wait", nil, []string{"env", asGoAgent + "=1", os.Args[0], "wait"}},
	}
	// One case at a time: the acknowledgement is awaited a bounded time
	// (ack_wait), and the test is of the protocol, not of a machine
	// loaded by parallel runs.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i := range runs {
				dir := filepath.Join(t.TempDir(), strconv.Itoa(i))
				r := hkRun(t, tc.env, append([]string{"supervise", "--id", "coop", "--max-steps", "2",
					"--coop-grace", "10s", "--term-grace", "1s", "--certs-dir", dir, "--"}, tc.argv...)...)
				require.Equal(t, 3, r.code, "run %d: the documented handler did not run to its end\nstdout: %s\nstderr: %s", i, r.stdout, r.stderr)
				require.Contains(t, r.stdout, "saved steps")
				c := readCert(t, dir)
				d := step(t, c, "directive_sent")
				require.Equal(t, true, d.Detail["acknowledged"], "run %d: %v", i, d)
				require.Equal(t, "SIGINT", d.Detail["withheld"])
				require.NotContains(t, stepNames(c), "coop_signal_sent")
				require.Equal(t, "cooperative", string(c.Escalation.Reached))
			}
		})
	}
}

// A client that cannot arm the agent's stop path does not acknowledge,
// and the cooperative signal comes after ack_wait as it would without a
// client: a Python agent with its own SIGINT handler gets it.
func TestClientWithoutStopPathGetsSignal(t *testing.T) {
	src := agent(t, t.TempDir(), `
import signal, sys, time
import hermeskill
signal.signal(signal.SIGINT, lambda *a: sys.exit(5))
hk = hermeskill.Client.from_env()
hk.ready()
for i in range(1, 100000):
    hk.progress(i)
    time.sleep(0.05)
`)
	dir := t.TempDir()
	r := hkRun(t, clientEnv(t), "supervise", "--id", "own", "--max-steps", "2", "--coop-grace", "10s",
		"--term-grace", "1s", "--certs-dir", dir, "--", python(t), src)
	require.Equal(t, 5, r.code, r.stderr)
	c := readCert(t, dir)
	d, sig := step(t, c, "directive_sent"), step(t, c, "coop_signal_sent")
	require.Equal(t, false, d.Detail["acknowledged"])
	require.GreaterOrEqual(t, sig.At.Sub(d.At), 200*time.Millisecond, "the signal waited ack_wait for an acknowledgement")
}

// step is the certificate's shutdown-log step of that name.
func step(t *testing.T, c *certs.Certificate, name string) certs.Step {
	t.Helper()
	i := slices.Index(stepNames(c), name)
	require.GreaterOrEqual(t, i, 0, "no %s in %v", name, stepNames(c))
	return c.ShutdownLog[i]
}
