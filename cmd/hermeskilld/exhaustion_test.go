// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/control"
)

// floodAgent floods its LLM gateway with idle connections from four
// processes (each with a descriptor table of its own, so together they
// can ask for far more than supervise's limit), one of them an escapee in
// a session of its own, and then wedges: it beats no more. Each process
// prints how many connections it holds and how many were refused.
const floodAgent = `
import os, socket, subprocess, sys, time, urllib.parse
m = sys.argv[1]
FLOOD = r'''
import os, signal, socket, sys, time, urllib.parse
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
u = urllib.parse.urlparse(os.environ["OPENAI_BASE_URL"])
conns = []
for i in range(400):
    try:
        conns.append(socket.create_connection((u.hostname, u.port), timeout=2))
    except OSError:
        break
time.sleep(1.5)  # the gateway answers a refusal within 250 ms, then closes
held = 0
for s in conns:
    s.setblocking(False)
    try:
        s.recv(1)  # an answer or the close: refused
    except BlockingIOError:
        held += 1
    except OSError:
        pass
print("flood %s held %d refused %d" % (sys.argv[2], held, len(conns) - held), flush=True)
while True:
    time.sleep(1)
'''
for i in range(3):
    subprocess.Popen([sys.executable, "-c", FLOOD, m, str(i)], start_new_session=(i == 0))
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); a = os.environ["NOTIFY_SOCKET"]
s.sendto(b"READY=1", a)
s.sendto(b"WATCHDOG=1", a)
exec(FLOOD.replace("sys.argv[2]", "'main'"))
`

// exhaustEnv reads a count for the attack from the environment, or def.
func exhaustEnv(t *testing.T, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, name)
		return n
	}
	return def
}

// An agent cannot take supervise's descriptors through its gateway: under
// a low descriptor limit, four of its processes flood the gateway with
// idle connections and it wedges; the gateway holds only its bound and
// refuses the rest, and the heartbeat kill, the certificate and the
// survivors' check all have what they need. Nothing of the agent is left,
// in either containment mode.
func TestDescriptorFloodThroughGateway(t *testing.T) {
	t.Parallel()
	for _, mode := range containmentModes(t) {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			// HK_EXHAUST_RUNS runs (`make soak`: 20) under a descriptor
			// limit of HK_EXHAUST_NOFILE: by default 128, where the
			// gateway's bounds are 32 in total and 8 per user and each
			// flooding process could hold ~120.
			runs, nofile := exhaustEnv(t, "HK_EXHAUST_RUNS", 1), exhaustEnv(t, "HK_EXHAUST_NOFILE", 128)
			total := min(max(nofile/4, 8), 4096)
			perUser := max(total/4, 2)
			left, written := 0, 0
			for i := range runs {
				dir := t.TempDir()
				m := marker(t) + "-" + strconv.Itoa(i)
				h := startArgv(t, nil, "sh", "-c", `ulimit -n `+strconv.Itoa(nofile)+` && exec "$@"`, "sh", os.Args[0],
					"supervise", "--id", "flood-"+mode, "--containment", mode,
					"--startup-timeout", "60s", "--heartbeat-timeout", "4s", "--coop-grace", "200ms", "--term-grace", "300ms",
					"--llm-upstream", "openai=http://127.0.0.1:9/v1",
					"--certs-dir", dir, "--", python(t), agent(t, dir, floodAgent), m)
				r := h.wait(t)
				survivors := survivors(m)
				for _, pid := range survivors {
					if pid > 0 {
						killAtEnd(t, pid)
					}
				}
				left += len(survivors)
				c := readCert(t, dir)
				written++
				assert.Equal(t, "heartbeat_timeout", c.TriggerCheck, "stderr: %s", r.stderr)
				assert.Equal(t, certs.ReachedSigkill, c.Escalation.Reached)
				assert.Empty(t, c.Survivors)
				assert.Empty(t, c.SurvivorsUnknown)
				assert.Contains(t, r.stderr, "connection refused, too many open", "the gateway refused nothing")
				assert.NotContains(t, r.stderr, "too many open files")
				held, refused := floodCounts(t, r.stdout)
				assert.LessOrEqual(t, held, perUser, "the agent held more connections than its bound")
				assert.Positive(t, refused)
				t.Logf("run %d: the flood held %d connections (bound %d per user, %d in total), %d refused", i, held, perUser, total, refused)
			}
			t.Logf("FIGURE descriptor flood, %s, limit %d: %d runs, %d agent processes alive after supervise exited, %d of %d certificates written",
				mode, nofile, runs, left, written, runs)
			require.Zero(t, left, "agent processes outlived supervise")
		})
	}
}

var floodLine = regexp.MustCompile(`flood \S+ held (\d+) refused (\d+)`)

// floodCounts sums what the flooding processes printed.
func floodCounts(t *testing.T, stdout string) (held, refused int) {
	lines := floodLine.FindAllStringSubmatch(stdout, -1)
	require.Len(t, lines, 4, "every flooding process reported: %s", stdout)
	for _, l := range lines {
		h, _ := strconv.Atoi(l[1])
		r, _ := strconv.Atoi(l[2])
		held, refused = held+h, refused+r
	}
	return held, refused
}

// A daemon under a low descriptor limit (hard 512, soft 256, which Go
// raises to 511 for the daemon alone) given more agents than its budget
// holds: those beyond it are refused with the figure, the others run with
// the soft limit they were started under, and the control socket answers
// ps and kill. Nothing ran out of descriptors.
func TestDaemonDescriptorBudget(t *testing.T) {
	t.Parallel()
	const agents = 30
	root := shortTemp(t)
	d := &daemonUnderTest{t: t, root: root, agents: filepath.Join(root, "agents"), state: filepath.Join(root, "state"),
		sock: filepath.Join(root, "run", "control.sock"), config: filepath.Join(root, "hk.yaml"), limits: "ulimit -Sn 256 && ulimit -Hn 512"}
	require.NoError(t, os.MkdirAll(d.agents, 0o755))
	for i := range agents {
		require.NoError(t, os.WriteFile(filepath.Join(d.agents, fmt.Sprintf("b%02d.yaml", i)), []byte(fmt.Sprintf(
			"id: b%02d\ncommand: [sleep, \"600\"]\nescalation: {coop_grace: 100ms, term_grace: 1s}\nchecks: {memory: {kill: 1GiB}, procs: {kill: 100}}\n", i)), 0o644))
	}
	cfg := fmt.Sprintf("state_dir: %s\nruntime_dir: %s\nagents_dir: %s\n", d.state, filepath.Join(root, "run"), d.agents)
	require.NoError(t, os.WriteFile(d.config, []byte(cfg), 0o644))
	d.start()
	t.Cleanup(func() { d.stop(syscall.SIGTERM) })

	var byID map[string]control.AgentInfo
	running, refused := 0, 0
	refusal := regexp.MustCompile(`descriptor budget: [\d,]+ of 511 in use; an agent needs (\d+); raise LimitNOFILE=`)
	require.Eventually(t, func() bool {
		byID = d.agentsByID()
		running, refused = 0, 0
		for _, a := range byID {
			switch {
			case a.State == "running" && a.PID > 0:
				running++
			case a.State == control.StateInvalid && refusal.MatchString(a.Note):
				refused++
			}
		}
		return running+refused == agents
	}, 60*time.Second, 100*time.Millisecond, "ps: %v", byID)
	require.Positive(t, running)
	require.Positive(t, refused, "every agent fit: the budget refused none")
	t.Logf("FIGURE descriptor budget at a limit of 511: %d agents running, %d refused", running, refused)

	// The agents got the soft limit the daemon was started under.
	for _, a := range byID {
		if a.PID > 0 {
			limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", a.PID))
			require.NoError(t, err)
			assert.Regexp(t, `Max open files\s+256\s+512`, string(limits), "agent %s", a.ID)
			break
		}
	}
	// The control socket answers a kill; nothing ran out of descriptors.
	for id, a := range byID {
		if a.State == "running" {
			r := d.ctl("kill", id, "--reason", "budget test")
			require.Zero(t, r.code, "kill: %s %s", r.stdout, r.stderr)
			break
		}
	}
	assert.NotContains(t, d.logText(), "too many open files")
}
