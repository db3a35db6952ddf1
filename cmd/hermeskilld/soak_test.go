// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// soakKinds are the agents of the churn: well-behaved ones that exit and
// are restarted, wedged ones killed for missed heartbeats, hostile ones
// (a child that ignores SIGTERM, an escapee in a session of its own, a
// heartbeat flood, then a wedge), and one that crashes in a loop.
var soakKinds = map[string]string{
	"steady": `
import os, random, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); a = os.environ["NOTIFY_SOCKET"]
s.sendto(b"READY=1", a)
end = time.time() + random.uniform(0.5, 3)
step = 0
while time.time() < end:
    step += 1
    s.sendto(b"WATCHDOG=1\nPROGRESS=%d" % step, a)
    time.sleep(0.1)
`,
	"wedged": `
import os, socket
socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"READY=1", os.environ["NOTIFY_SOCKET"])
while True:
    pass
`,
	"hostile": `
import os, signal, socket, subprocess, sys, time
m = sys.argv[1]
SLEEP = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: time.sleep(1)"
subprocess.Popen([sys.executable, "-c", SLEEP, m, "child"])
subprocess.Popen([sys.executable, "-c", SLEEP, m, "escapee"], start_new_session=True)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); a = os.environ["NOTIFY_SOCKET"]
s.setblocking(False)
end = time.time() + 1
while time.time() < end:
    try:
        s.sendto(b"WATCHDOG=1", a)
    except OSError:
        pass
while True:
    time.sleep(1)
`,
	"crasher": `
import sys
sys.exit(1)
`,
}

// soakFile is an agent file of the churn.
func soakFile(id, kind, py, src, m string) string {
	common := fmt.Sprintf("id: %s\ncommand: [%s, %s, %q]\nescalation: {coop_grace: 100ms, term_grace: 300ms}\n", id, py, src, m)
	switch kind {
	case "steady":
		return common + "checks: {heartbeat_timeout: 2s}\nrestart: {policy: always, backoff: 100ms, max_backoff: 1s}\n"
	case "crasher":
		return common + "restart: {policy: on-failure, backoff: 100ms, max_backoff: 400ms, max_restarts: 3, window: 10s}\n"
	default:
		return common + "checks: {heartbeat_timeout: 500ms}\nafter_kill: restart\nrestart: {policy: always, backoff: 200ms, max_backoff: 1s}\n"
	}
}

// daemonGauges is what the soak watches of the daemon: from its own
// Prometheus endpoint (goroutines, descriptors, memory) and its ps.
type daemonGauges struct {
	at              time.Duration
	goroutines, fds int
	rssMiB          float64
	agents, running int
}

func scrapeGauges(url string) (goroutines, fds int, rssMiB float64, err error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "go_goroutines":
			goroutines = int(v)
		case "process_open_fds":
			fds = int(v)
		case "process_resident_memory_bytes":
			rssMiB = v / (1 << 20)
		}
	}
	return goroutines, fds, rssMiB, sc.Err()
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	if v := os.Getenv(name); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, name)
		return d
	}
	return def
}

// The daemon under churn: agents of every kind added, edited, removed,
// killed by operators and released, continuously, for HK_SOAK_DURATION
// (`make soak`: 10 minutes, 50 agents; `make test`: a short run). Once
// every agent is removed, the daemon is back to its idle goroutines and
// descriptors, its memory reached a plateau during the churn, and no
// agent process is left.
func TestSoakDaemonChurn(t *testing.T) {
	dur := envDuration(t, "HK_SOAK_DURATION", 12*time.Second)
	n := soakRuns(t, 8)
	if v := os.Getenv("HK_SOAK_AGENTS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	m := marker(t)
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	port := freePort(t)
	d := startDaemonFor(t, shortTemp(t), fmt.Sprintf("metrics: {listen: \"127.0.0.1:%d\"}\nheartbeat_rate: 200\n", port),
		dur+5*time.Minute)
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	py := python(t)
	srcs := map[string]string{}
	for kind, src := range soakKinds {
		srcs[kind] = writeTestFile(t, d.root, kind+".py", src)
	}
	kinds := []string{"steady", "steady", "wedged", "hostile", "crasher"}

	idle := func() (int, int) {
		var g, f int
		require.Eventually(t, func() bool { return len(d.agentsByID()) == 0 }, 60*time.Second, 100*time.Millisecond,
			"agents were not all removed")
		// What ended agents' runs leave (loggers, pipes) settles briefly.
		require.Eventually(t, func() bool {
			g2, f2, _, err := scrapeGauges(url)
			settled := err == nil && g2 == g && f2 == f
			g, f = g2, f2
			return settled
		}, 30*time.Second, 500*time.Millisecond)
		return g, f
	}
	g0, f0 := idle()

	began := time.Now()
	// The curve is sampled on a goroutine of its own: a ps under load
	// must not slow the churn down.
	var curve []daemonGauges
	var scrapeErr error
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(max(dur/40, 250*time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
			g, f, rss, err := scrapeGauges(url)
			if err != nil {
				scrapeErr = err // the daemon is gone: the churn ends
				return
			}
			all := d.agentsByID()
			running := 0
			for _, a := range all {
				if a.State == "running" {
					running++
				}
			}
			curve = append(curve, daemonGauges{at: time.Since(began), goroutines: g, fds: f, rssMiB: rss, agents: len(all), running: running})
		}
	}()
	act := time.NewTicker(100 * time.Millisecond)
	defer act.Stop()
	files := map[string]bool{}
	for time.Since(began) < dur {
		select {
		case <-sampled:
			require.NoError(t, scrapeErr, "the daemon stopped answering under churn; log:\n%s", d.logText())
		case <-act.C:
		}
		id := fmt.Sprintf("s%02d", rand.IntN(n))
		switch r := rand.IntN(10); {
		case r < 6 || !files[id]: // add or replace, maybe with another kind
			kind := kinds[rand.IntN(len(kinds))]
			d.writeAgent(id, soakFile(id, kind, py, srcs[kind], m))
			files[id] = true
		case r < 8:
			require.NoError(t, os.Remove(filepath.Join(d.agents, id+".yaml")))
			delete(files, id)
		default:
			go func() { // operators do not wait for each other
				d.ctl("kill", id, "--reason", "soak")
				d.ctl("release", id)
			}()
		}
	}
	close(stopSampling)
	<-sampled
	for id := range files {
		require.NoError(t, os.Remove(filepath.Join(d.agents, id+".yaml")))
	}
	g1, f1 := idle()

	t.Logf("daemon under churn (%d agent ids, %s):", n, dur)
	t.Logf("%8s %10s %5s %8s %7s %8s", "t", "goroutines", "fds", "rss_mib", "agents", "running")
	for _, c := range curve {
		t.Logf("%8s %10d %5d %8.1f %7d %8d", c.at.Round(time.Second), c.goroutines, c.fds, c.rssMiB, c.agents, c.running)
	}
	t.Logf("idle before: %d goroutines, %d fds; idle after: %d goroutines, %d fds", g0, f0, g1, f1)
	require.LessOrEqual(t, g1, g0+5, "goroutines leaked under churn")
	require.LessOrEqual(t, f1, f0+3, "file descriptors leaked under churn")
	// Memory: the last quarter of the churn stays within the plateau the
	// second quarter reached (no growth with time).
	q := len(curve) / 4
	require.Greater(t, q, 1, "too few samples")
	var plateau, late float64
	for _, c := range curve[q : 2*q] {
		plateau = max(plateau, c.rssMiB)
	}
	for _, c := range curve[3*q:] {
		late = max(late, c.rssMiB)
	}
	require.LessOrEqual(t, late, 1.5*plateau+16, "RSS kept growing under churn: %.1f MiB late vs %.1f MiB plateau", late, plateau)
}
