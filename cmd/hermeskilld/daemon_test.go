// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/testnobody"
)

// daemonUnderTest is a real `hermeskilld daemon` process in temp dirs.
type daemonUnderTest struct {
	t                   *testing.T
	root                string
	agents, state, sock string
	config              string
	lifetime            time.Duration // how long it may run; 0: 90 s
	cmd                 *exec.Cmd
	log                 *os.File
	// limits, when set, are the shell commands (ulimit) the daemon is
	// started after ("ulimit -Sn 256 && ulimit -Hn 512").
	limits string
}

// startDaemon writes a daemon file (extra YAML appended) and starts the
// daemon; it is stopped (SIGTERM, bounded) at cleanup.
func startDaemon(t *testing.T, extra string) *daemonUnderTest {
	t.Helper()
	return startDaemonIn(t, shortTemp(t), extra)
}

// startDaemonIn is startDaemon in a given root directory.
func startDaemonIn(t *testing.T, root, extra string) *daemonUnderTest {
	t.Helper()
	return startDaemonFor(t, root, extra, 0)
}

// startDaemonFor is startDaemonIn for a daemon that may run as long as
// lifetime (0: 90 s); it is killed past it.
func startDaemonFor(t *testing.T, root, extra string, lifetime time.Duration) *daemonUnderTest {
	t.Helper()
	d := &daemonUnderTest{t: t, root: root, agents: filepath.Join(root, "agents"), state: filepath.Join(root, "state"),
		sock: filepath.Join(root, "run", "control.sock"), config: filepath.Join(root, "hk.yaml"), lifetime: lifetime}
	require.NoError(t, os.MkdirAll(d.agents, 0o755))
	cfg := fmt.Sprintf("state_dir: %s\nruntime_dir: %s\nagents_dir: %s\n%s", d.state, filepath.Join(root, "run"), d.agents, extra)
	require.NoError(t, os.WriteFile(d.config, []byte(cfg), 0o644))
	d.start()
	t.Cleanup(func() { d.stop(syscall.SIGTERM) })
	return d
}

func (d *daemonUnderTest) start() {
	t := d.t
	t.Helper()
	log, err := os.OpenFile(filepath.Join(d.root, "daemon.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	d.log = log
	lifetime := d.lifetime
	if lifetime == 0 {
		lifetime = 90 * time.Second
	}
	d.cmd = hkCmdFor(t, lifetime, "daemon", "--config", d.config, "--log-format", "console", "--log-level", "debug")
	if d.limits != "" {
		d.cmd.Path, d.cmd.Args = "/bin/sh", append([]string{"sh", "-c", d.limits + ` && exec "$@"`, "sh"}, d.cmd.Args...)
	}
	d.cmd.Stdout, d.cmd.Stderr = log, log
	require.NoError(t, d.cmd.Start())
	require.Eventually(t, func() bool { _, err := os.Stat(d.sock); return err == nil }, 30*time.Second, 10*time.Millisecond,
		"the control socket never appeared; log:\n%s", d.logText())
}

// stop signals the daemon and waits for it (once).
func (d *daemonUnderTest) stop(sig syscall.Signal) {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	_ = d.cmd.Process.Signal(sig)
	_ = d.cmd.Wait()
	d.log.Close()
	d.cmd = nil
	if d.t.Failed() {
		d.t.Logf("daemon log:\n%s", d.logText())
	}
}

func (d *daemonUnderTest) logText() string {
	b, _ := os.ReadFile(filepath.Join(d.root, "daemon.log"))
	return string(b)
}

// ctl runs an operator command against this daemon.
func (d *daemonUnderTest) ctl(args ...string) result {
	return hkQuiet(d.t, append(args, "--control-socket", d.sock)...)
}

// writeAgent drops an agent file atomically (temp file, rename over it),
// as an editor or a config manager would.
func (d *daemonUnderTest) writeAgent(name, yaml string) string {
	d.t.Helper()
	path := filepath.Join(d.agents, name+".yaml")
	tmp := filepath.Join(d.agents, "."+name+".yaml.tmp")
	require.NoError(d.t, os.WriteFile(tmp, []byte(yaml), 0o644))
	require.NoError(d.t, os.Rename(tmp, path))
	return path
}

// agentsByID is `ps --json`; nil when it failed. It must not fail the
// test itself: it runs inside Eventually/Never conditions, on their
// goroutines.
func (d *daemonUnderTest) agentsByID() map[string]control.AgentInfo {
	r := d.ctl("ps", "--json")
	var list []control.AgentInfo
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil {
		return nil
	}
	out := map[string]control.AgentInfo{}
	for _, a := range list {
		out[a.ID] = a
	}
	return out
}

func (d *daemonUnderTest) waitState(id, state string) control.AgentInfo {
	d.t.Helper()
	var last control.AgentInfo
	require.Eventually(d.t, func() bool {
		last = d.agentsByID()[id]
		return last.State == state
	}, 30*time.Second, 50*time.Millisecond, "agent %s never became %s", id, state)
	return last
}

func (d *daemonUnderTest) certs() []map[string]any {
	d.t.Helper()
	files, _ := filepath.Glob(filepath.Join(d.state, "certs", "*.json"))
	sort.Strings(files)
	var out []map[string]any
	for _, f := range files {
		var c map[string]any
		require.NoError(d.t, json.Unmarshal(mustRead(d.t, f), &c))
		out = append(out, c)
	}
	return out
}

// hkQuiet runs hermeskilld without logging its whole output; it never
// fails the test (it may run in a condition's goroutine).
func hkQuiet(t *testing.T, args ...string) result {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), asMain+"=1")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	_ = cmd.Run()
	return result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

// shortTemp is a temp dir with a short path (sun_path is 108 bytes).
// A daemon other users connect to runs in testnobody.Dir.
func shortTemp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "hkd")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// sleeper is an agent that runs until killed; it ignores SIGINT so the
// ladder reaches SIGTERM, which it dies of.
func sleeper(t *testing.T, id, m, extra string) string {
	return fmt.Sprintf(`id: %s
command: [%s, -c, "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: time.sleep(1)", %q]
escalation: {coop_grace: 200ms, term_grace: 2s}
%s`, id, python(t), m, extra)
}

// A dropped file runs; ps lists it; an edit shows in status; removing the
// file stops the agent with a certificate.
func TestDaemonAgentFileLifecycle(t *testing.T) {
	m := marker(t)
	// Registered first, so it runs after the daemon was stopped.
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	d := startDaemon(t, "")
	path := d.writeAgent("bot", sleeper(t, "bot", m, "checks: {heartbeat_timeout: 0s}\n"))
	info := d.waitState("bot", control.StateRunning)
	require.NotZero(t, info.PID)
	require.Eventually(t, func() bool { return len(survivors(m)) == 1 }, 10*time.Second, 20*time.Millisecond)

	r := d.ctl("ps")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "bot")
	require.Contains(t, r.stdout, "running")

	// Edit: a new max_runtime applies at once (status shows it); a new
	// env only at the next start (status says so).
	d.writeAgent("bot", sleeper(t, "bot", m, "checks: {max_runtime: 1h}\nenv: {MODE: two}\n"))
	var st control.AgentStatus
	require.Eventually(t, func() bool {
		r := d.ctl("status", "bot", "--json")
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &st) == nil && st.Checks["max_runtime"] == "1h"
	}, 20*time.Second, 50*time.Millisecond)
	require.Contains(t, strings.Join(st.Pending, ";"), "env changes at the next start")
	require.Equal(t, info.PID, st.PID, "a live edit does not restart the agent")

	require.NoError(t, os.Remove(path))
	require.Eventually(t, func() bool { return len(survivors(m)) == 0 }, 20*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return len(d.certs()) == 1 }, 10*time.Second, 20*time.Millisecond)
	c := d.certs()[0]
	require.Equal(t, "manual", c["trigger_type"])
	require.Equal(t, "config-removed", c["operator"])
	require.Eventually(t, func() bool { _, ok := d.agentsByID()["bot"]; return !ok }, 10*time.Second, 20*time.Millisecond)
}

// An operator's kill leaves a manual certificate naming them; the agent
// stays down, across a daemon restart, until released.
func TestDaemonOperatorKillQuarantine(t *testing.T) {
	m := marker(t)
	// Registered first, so it runs after the daemon was stopped.
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	d := startDaemon(t, "")
	d.writeAgent("qbot", sleeper(t, "qbot", m, ""))
	d.waitState("qbot", control.StateRunning)

	r := d.ctl("kill", "qbot", "--reason", "looping since 09:12")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "qbot")
	require.Contains(t, r.stdout, "certificate")
	require.Empty(t, survivors(m))
	c := d.certs()[0]
	require.Equal(t, "manual", c["trigger_type"])
	require.Equal(t, "looping since 09:12", c["operator_reason"])
	u, err := user.Current()
	require.NoError(t, err)
	require.Equal(t, "uid:"+u.Uid+"("+u.Username+")", c["operator"], "the operator comes from the peer credentials")
	d.waitState("qbot", control.StateQuarantined)

	// Audited with the caller's uid before it was acted on.
	audit := string(mustRead(t, filepath.Join(d.state, "audit.jsonl")))
	require.Contains(t, audit, `"type":"operator_request"`)
	require.Contains(t, audit, `"uid":`+u.Uid)

	// Down across a daemon restart.
	d.stop(syscall.SIGTERM)
	d.start()
	require.Never(t, func() bool { return len(survivors(m)) > 0 }, 2*time.Second, 100*time.Millisecond,
		"a quarantined agent came back after a daemon restart")
	d.waitState("qbot", control.StateQuarantined)

	r = d.ctl("release", "qbot")
	require.Equal(t, 0, r.code, r.stderr)
	d.waitState("qbot", control.StateRunning)
	require.Eventually(t, func() bool { return len(survivors(m)) == 1 }, 10*time.Second, 20*time.Millisecond)
}

// A crashing agent backs off exponentially and ends failed after the
// crash-loop limit.
func TestDaemonCrashLoop(t *testing.T) {
	d := startDaemon(t, "")
	d.writeAgent("crasher", `id: crasher
command: [/bin/sh, -c, "exit 3"]
restart: {policy: on-failure, backoff: 200ms, max_backoff: 5s, max_restarts: 3, window: 1m}
`)
	info := d.waitState("crasher", control.StateFailed)
	require.Contains(t, info.Note, "crash loop")

	// The starts, from the audit log: 1 + 3 restarts, each gap at least
	// the doubled backoff (200ms, 400ms, 800ms).
	var starts []time.Time
	f, err := os.Open(filepath.Join(d.state, "audit.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line struct {
			Type    string `json:"type"`
			AgentID string `json:"agent_id"`
			Data    struct {
				At time.Time `json:"at"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
		if line.Type == "agent_started" && line.AgentID == "crasher" {
			starts = append(starts, line.Data.At)
		}
	}
	require.Len(t, starts, 4, "one start and max_restarts restarts")
	for i, want := range []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond} {
		gap := starts[i+1].Sub(starts[i])
		require.GreaterOrEqual(t, gap, want, "restart %d came after %s", i+1, gap)
	}
	require.Never(t, func() bool { return d.agentsByID()["crasher"].State != control.StateFailed },
		time.Second, 100*time.Millisecond, "a failed agent stays down")
}

// The e-stop (file, then CLI) kills 20 agents in parallel: the whole
// takes about one ladder, not twenty; a selector kill takes exactly the
// matching agents.
func TestDaemonEstopAndCohorts(t *testing.T) {
	m := marker(t)
	// Registered first, so it runs after the daemon was stopped.
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	d := startDaemon(t, "")
	const n = 20
	for i := 0; i < n; i++ {
		team := "research"
		if i%2 == 1 {
			team = "ops"
		}
		id := fmt.Sprintf("a%02d", i)
		d.writeAgent(id, sleeper(t, id, m, "labels: {team: "+team+"}\n"))
	}
	require.Eventually(t, func() bool { return len(survivors(m)) == n }, 60*time.Second, 50*time.Millisecond)

	// A selector kill takes exactly the ten research agents.
	r := d.ctl("kill", "--selector", "team=research", "--reason", "bad rollout")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, n/2, len(survivors(m)))
	for id, a := range d.agentsByID() {
		n, _ := strconv.Atoi(id[1:])
		if n%2 == 0 {
			require.Equal(t, control.StateQuarantined, a.State, id)
		} else {
			require.Equal(t, control.StateRunning, a.State, id)
		}
	}

	// E-stop through the file: every agent, in about one ladder (each
	// takes 200ms + its SIGTERM; twenty in a row would take 4s+).
	began := time.Now()
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "run", "STOP"), nil, 0o644))
	require.Eventually(t, func() bool { return len(survivors(m)) == 0 }, 30*time.Second, 10*time.Millisecond)
	took := time.Since(began)
	t.Logf("e-stop of %d agents took %s", n/2, took)
	require.Less(t, took, 4*time.Second, "the agents were not stopped in parallel")
	// The processes are gone before the daemon has reaped each run and
	// written its certificate: the states settle a moment later.
	require.Eventually(t, func() bool {
		agents := d.agentsByID()
		for _, a := range agents {
			if a.State != control.StateEstopped && a.State != control.StateQuarantined {
				return false
			}
		}
		return len(agents) == n
	}, 10*time.Second, 20*time.Millisecond, "every agent ends estopped or quarantined")
	require.Eventually(t, func() bool { return len(d.certs()) == n }, 10*time.Second, 20*time.Millisecond)

	// Released from the e-stop only once the file is gone.
	r = d.ctl("release", "--estop")
	require.NotEqual(t, 0, r.code, "release must refuse while the e-stop file exists")
	require.NoError(t, os.Remove(filepath.Join(d.root, "run", "STOP")))
	r = d.ctl("release", "--estop")
	require.Equal(t, 0, r.code, r.stderr)
	require.Eventually(t, func() bool { return len(survivors(m)) == n/2 }, 30*time.Second, 50*time.Millisecond,
		"the e-stopped agents start again; the quarantined stay down")

	// E-stop through the CLI, in parallel too.
	began = time.Now()
	r = d.ctl("estop", "--reason", "incident 4711")
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, survivors(m))
	require.Less(t, time.Since(began), 4*time.Second)
}

// An invalid agent file is reported with file:line (log, ps, status) and
// does not disturb running agents.
func TestDaemonInvalidFile(t *testing.T) {
	m := marker(t)
	// Registered first, so it runs after the daemon was stopped.
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	d := startDaemon(t, "")
	d.writeAgent("good", sleeper(t, "good", m, ""))
	pid := d.waitState("good", control.StateRunning).PID

	path := d.writeAgent("broken", "id: broken\ncommand: [true]\nchekcs: {}\n")
	info := d.waitState("broken", control.StateInvalid)
	require.Contains(t, info.Note, path+":3:")
	require.Contains(t, info.Note, `unknown key "chekcs"`)

	// status shows what ps shows: the file and its file:line error.
	r := d.ctl("status", "broken")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^broken  invalid\n`, r.stdout)
	require.Regexp(t, `(?m)^  source\s+`+regexpQuote(path)+`$`, r.stdout)
	require.Regexp(t, `(?m)^config error\n(  .+\n)*  `+regexpQuote(path+`:3: unknown key "chekcs"`), r.stdout)
	r = d.ctl("status", "broken", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var st control.AgentStatus
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Equal(t, control.StateInvalid, st.State)
	require.Equal(t, path, st.Source)
	require.Equal(t, info.Note, st.ConfigError)
	r = d.ctl("status", "nope")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "no such agent: nope")

	// A bad edit of the running agent: reported, and it keeps running
	// with its last good configuration.
	good := d.writeAgent("good", sleeper(t, "good", m, "checks: {heartbeat_timeout: soon}\n"))
	require.Eventually(t, func() bool {
		a := d.agentsByID()["good"]
		return a.State == control.StateRunning && strings.Contains(a.Note, good+":4:")
	}, 20*time.Second, 50*time.Millisecond)
	require.Equal(t, pid, d.agentsByID()["good"].PID)
	require.Len(t, survivors(m), 1)
	require.Contains(t, d.logText(), good+":4:")
}

// A configured agents_dir that does not exist is refused, by the daemon
// and by check-config alike, naming the daemon file, the line of the key
// and the path; the daemon creates nothing. Once the directory exists
// both accept it.
func TestDaemonAgentsDirMissing(t *testing.T) {
	root := shortTemp(t)
	state, agents := filepath.Join(root, "state"), filepath.Join(root, "agnets.d")
	cfg := writeTestFile(t, root, "hk.yaml",
		fmt.Sprintf("state_dir: %s\nruntime_dir: %s\nagents_dir: %s\n", state, filepath.Join(root, "run"), agents))
	want := cfg + ":3: agents_dir: " + agents + " does not exist (create it, or correct agents_dir)\n"

	r := hk(t, "daemon", "--config", cfg, "--log-format", "console")
	require.Equal(t, exitUsage, r.code)
	require.Equal(t, "hermeskilld: "+want, r.stderr)
	require.NoDirExists(t, agents, "a mistyped agents_dir is not created")
	require.NoDirExists(t, state, "the daemon refuses before it prepares anything")

	r = hk(t, "check-config", cfg)
	require.Equal(t, exitFailure, r.code)
	require.Equal(t, want, r.stderr)
	require.Empty(t, r.stdout)

	// A file where the directory should be.
	require.NoError(t, os.WriteFile(agents, nil, 0o644))
	r = hk(t, "check-config", cfg)
	require.Equal(t, exitFailure, r.code)
	require.Equal(t, cfg+":3: agents_dir: "+agents+": not a directory\n", r.stderr)
	r = hk(t, "daemon", "--config", cfg)
	require.Equal(t, exitUsage, r.code)
	require.Equal(t, "hermeskilld: "+cfg+":3: agents_dir: "+agents+": not a directory\n", r.stderr)

	require.NoError(t, os.Remove(agents))
	require.NoError(t, os.Mkdir(agents, 0o755))
	r = hk(t, "check-config", cfg)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, cfg+": valid daemon file\n", r.stdout)
}

// held.json keeps agents down across restarts: any key the daemon does
// not write (a misspelt "estop" or "quarantined") is damage, and the
// daemon refuses to start rather than start agents meant to stay down.
func TestDaemonHeldUnknownKeys(t *testing.T) {
	for name, held := range map[string]string{
		"top level":  `{"quarantined": {}, "estopp": {"since": "2026-12-02T10:00:00Z", "reason": "incident"}}`,
		"quarantine": `{"quarantined": {"bot": {"since": "2026-12-02T10:00:00Z", "reasn": "looping"}}}`,
		"trailing":   `{"quarantined": {}} {"estop": {"reason": "incident"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			root := shortTemp(t)
			state := filepath.Join(root, "state")
			require.NoError(t, os.MkdirAll(filepath.Join(root, "agents"), 0o755))
			require.NoError(t, os.MkdirAll(state, 0o750))
			path := writeTestFile(t, state, "held.json", held)
			cfg := writeTestFile(t, root, "hk.yaml", fmt.Sprintf("state_dir: %s\nruntime_dir: %s\nagents_dir: %s\n",
				state, filepath.Join(root, "run"), filepath.Join(root, "agents")))

			r := hk(t, "daemon", "--config", cfg, "--log-format", "console")
			require.Equal(t, exitUsage, r.code)
			require.Regexp(t, `^hermeskilld: `+regexpQuote(path)+`: corrupt: .+ \(move it aside to start with no agent held\)\n$`, r.stderr)
			require.NoFileExists(t, filepath.Join(root, "run", "control.sock"), "the daemon never listened")
		})
	}
}

// With the real daemon: another uid in the read group can list but not
// kill (403, exit 4). The daemon runs where uid 65534 can reach its socket.
func TestDaemonOtherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: runs the client as uid 65534")
	}
	g, err := user.LookupGroupId("65534")
	if err != nil {
		t.Skipf("no group 65534: %v", err)
	}
	m := marker(t)
	// Registered first, so it runs after the daemon was stopped.
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	bin := testnobody.Executable(t)
	d := startDaemonIn(t, testnobody.Dir(t), "control: {read_group: "+g.Name+"}\n")
	d.writeAgent("ubot", sleeper(t, "ubot", m, ""))
	d.waitState("ubot", control.StateRunning)
	as := func(args ...string) result {
		cmd := exec.Command(bin, append(args, "--control-socket", d.sock)...)
		cmd.Env = append(os.Environ(), asMain+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: testnobody.Credential()}
		out, err := cmd.Output()
		r := result{code: cmd.ProcessState.ExitCode(), stdout: string(out)}
		if ee, ok := err.(*exec.ExitError); ok {
			r.stderr = string(ee.Stderr)
		}
		return r
	}
	r := as("ps")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "ubot")
	r = as("kill", "ubot", "--reason", "x")
	require.Equal(t, exitForbidden, r.code)
	require.Contains(t, r.stderr, "permission denied")
	require.Len(t, survivors(m), 1, "the agent lives")
}

// SIGTERM to the daemon stops every agent with a certificate; SIGKILL to
// the daemon leaves no agent alive.
func TestDaemonStops(t *testing.T) {
	t.Run("SIGTERM", func(t *testing.T) {
		d := startDaemon(t, "")
		m := marker(t)
		for i := 0; i < 3; i++ {
			id := fmt.Sprintf("s%d", i)
			d.writeAgent(id, sleeper(t, id, m, ""))
		}
		require.Eventually(t, func() bool { return len(survivors(m)) == 3 }, 30*time.Second, 20*time.Millisecond)
		d.stop(syscall.SIGTERM)
		requireNoSurvivors(t, m)
		cs := d.certs()
		require.Len(t, cs, 3)
		for _, c := range cs {
			require.Equal(t, "daemon-shutdown", c["operator"])
		}
	})
	t.Run("SIGKILL", func(t *testing.T) {
		d := startDaemon(t, "")
		m := marker(t)
		for i := 0; i < 3; i++ {
			id := fmt.Sprintf("k%d", i)
			d.writeAgent(id, sleeper(t, id, m, ""))
		}
		require.Eventually(t, func() bool { return len(survivors(m)) == 3 }, 30*time.Second, 20*time.Millisecond)
		d.stop(syscall.SIGKILL)
		require.Eventually(t, func() bool { return len(survivors(m)) == 0 }, 10*time.Second, 20*time.Millisecond,
			"agents outlived their daemon")
	})
}

func TestSystemdUnitVerifies(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze is not installed (.ci/run installs the systemd package)")
	}
	out, _ := exec.Command("systemd-analyze", "verify", "--man=no", "../../systemd/hermeskilld.service").CombinedOutput()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" || strings.Contains(line, "is not executable") {
			continue // the binary is not installed where the unit points
		}
		t.Errorf("systemd-analyze verify: %s", line)
	}
}

// SIGHUP reloads the daemon file (its defaults apply to every agent at
// once) and every agent file.
func TestDaemonSIGHUPReload(t *testing.T) {
	m := marker(t)
	t.Cleanup(func() { requireNoSurvivors(t, m) }) // runs after the daemon stopped
	d := startDaemon(t, "")
	d.writeAgent("hup", sleeper(t, "hup", m, ""))
	pid := d.waitState("hup", control.StateRunning).PID

	cfg := string(mustRead(t, d.config)) + "defaults:\n  checks: {max_runtime: 2h}\n"
	require.NoError(t, os.WriteFile(d.config, []byte(cfg), 0o644))
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGHUP))
	var st control.AgentStatus
	require.Eventually(t, func() bool {
		r := d.ctl("status", "hup", "--json")
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &st) == nil && st.Checks["max_runtime"] == "2h"
	}, 20*time.Second, 50*time.Millisecond, "the new default never reached the agent")
	require.Equal(t, pid, st.PID, "a reload does not restart the agent")
}

// Standing revocations through the CLI against a real daemon: revoke
// kills the agent with a certificate and keeps it down; the rule survives
// a restart of the daemon and blocks the start; lifting it lets it run.
func TestDaemonRevocations(t *testing.T) {
	m := marker(t)
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	root := shortTemp(t)
	d := startDaemonIn(t, root, "")
	d.writeAgent("bot", sleeper(t, "bot", m, "labels: {model: recalled}\n"))
	d.waitState("bot", "running")
	r := d.ctl("revoke", "--selector", "model=recalled", "--reason", "model recalled")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "revocation r1 stored: labels model=recalled")
	info := d.waitState("bot", "revoked")
	require.Contains(t, info.Note, "rule r1: model recalled")
	require.Eventually(t, func() bool { return len(d.certs()) == 1 }, 30*time.Second, 50*time.Millisecond)
	c := d.certs()[0]
	require.Equal(t, "manual", c["trigger_type"])

	d.stop(syscall.SIGTERM)
	d = startDaemonIn(t, root, "")
	d.waitState("bot", "revoked")
	r = d.ctl("revocations")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "r1")
	require.Contains(t, r.stdout, "labels model=recalled")

	r = d.ctl("revocations", "lift", "r1")
	require.Equal(t, 0, r.code, r.stderr)
	d.waitState("bot", "running")
	r = d.ctl("revocations", "--json")
	require.Equal(t, "[]\n", r.stdout)
}
