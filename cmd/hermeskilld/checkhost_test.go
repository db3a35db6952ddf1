// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/testnobody"
)

// What the host lacks, in the daemon file: check-config and the daemon's
// start refuse it alike, with the file and line of the key; the daemon
// makes nothing.
func TestDaemonFileHostProblems(t *testing.T) {
	for name, tc := range map[string]struct{ extra, want string }{
		"read group":      {"control:\n  read_group: hk-no-such-group\n", `:5: control.read_group: no group "hk-no-such-group" on this host (create it, or correct the name)`},
		"operators group": {"control: {operators_group: hk-no-such-group}\n", `:4: control.operators_group: no group "hk-no-such-group" on this host (create it, or correct the name)`},
		"defaults user":   {"defaults:\n  user: hk-no-such-user\n", `:5: defaults.user: no user "hk-no-such-user" on this host`},
	} {
		t.Run(name, func(t *testing.T) {
			root := shortTemp(t)
			state, agents := filepath.Join(root, "state"), filepath.Join(root, "agents")
			require.NoError(t, os.Mkdir(agents, 0o755))
			cfg := writeTestFile(t, root, "hk.yaml",
				fmt.Sprintf("state_dir: %s\nruntime_dir: %s\nagents_dir: %s\n%s", state, filepath.Join(root, "run"), agents, tc.extra))

			r := hk(t, "check-config", cfg)
			require.Equal(t, exitFailure, r.code)
			require.Equal(t, cfg+tc.want+"\n", r.stderr)

			r = hk(t, "daemon", "--config", cfg, "--log-format", "console")
			require.Equal(t, exitUsage, r.code)
			require.Equal(t, "hermeskilld: "+cfg+tc.want+"\n", r.stderr)
			require.NoDirExists(t, state, "the daemon refuses before it prepares anything")
		})
	}
}

// nobodyUser is uid 65534's name; the agents of these tests run as it.
func nobodyUser(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("the tests run as uid %d, not root: starting an agent as uid 65534 needs CAP_SETUID (run go test as root)", os.Geteuid())
	}
	u, err := user.LookupId(strconv.Itoa(testnobody.UID))
	if err != nil {
		t.Skipf("no user with uid 65534 (%v): the agents must run as a user other than root", err)
	}
	return u.Username
}

// lockedCommand is an executable in a directory only root may search
// (mode 0700), itself in a directory uid 65534 can reach.
func lockedCommand(t *testing.T) (cmd, private string) {
	t.Helper()
	private = filepath.Join(testnobody.Dir(t), "private")
	require.NoError(t, os.Mkdir(private, 0o700))
	require.NoError(t, os.Chmod(private, 0o700))
	cmd = filepath.Join(private, "agent")
	require.NoError(t, os.WriteFile(cmd, []byte("#!/bin/sh\nexit 0\n"), 0o755))
	require.NoError(t, os.Chmod(cmd, 0o755))
	return cmd, private
}

// An agent file whose user may not execute its command: check-config
// refuses it, naming the resolved path and the user at the command's
// line; the daemon does not start it (ps: invalid, with the same error),
// and keeps running the others. A SIGHUP with a daemon file that names a
// group the host lacks is reported and the running configuration kept.
func TestAgentCommandTheUserCannotExecute(t *testing.T) {
	nobody := nobodyUser(t)
	cmd, private := lockedCommand(t)
	src := "id: locked\nuser: " + nobody + "\ncommand: [" + cmd + "]\n"
	want := `:3: command: ` + cmd + `: user "` + nobody + `" (uid 65534) cannot execute it: it may not search ` + private + ` (mode 0700, owner 0:0)`

	file := writeTestFile(t, shortTemp(t), "locked.yaml", src)
	r := hk(t, "check-config", file)
	require.Equal(t, exitFailure, r.code)
	require.Equal(t, file+want+"\n", r.stderr)

	// A command found in PATH is named with the file it resolves to.
	t.Setenv("PATH", private+":"+os.Getenv("PATH"))
	bare := writeTestFile(t, shortTemp(t), "bare.yaml", "id: bare\nuser: "+nobody+"\ncommand: [agent]\n")
	r = hk(t, "check-config", bare)
	require.Equal(t, exitFailure, r.code)
	require.Equal(t, bare+`:3: command: `+cmd+` (agent in PATH): user "`+nobody+`" (uid 65534) cannot execute it: it may not search `+private+" (mode 0700, owner 0:0)\n", r.stderr)

	// Once the directory is searchable, the same file is valid.
	require.NoError(t, os.Chmod(private, 0o755))
	r = hk(t, "check-config", file)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, file+": valid agent file\n", r.stdout)
	require.NoError(t, os.Chmod(private, 0o700))

	m := marker(t)
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	d := startDaemon(t, "")
	d.writeAgent("good", sleeper(t, "good", m, ""))
	pid := d.waitState("good", control.StateRunning).PID
	path := d.writeAgent("locked", src)
	info := d.waitState("locked", control.StateInvalid)
	require.Equal(t, path+want, info.Note)
	require.Contains(t, d.logText(), path+":3: command: "+cmd+": user", "the log has it too")

	// A reload whose daemon file the host cannot honour: reported, and
	// nothing of it applied (not its defaults either).
	cfg := string(mustRead(t, d.config))
	require.NoError(t, os.WriteFile(d.config, []byte(cfg+"control: {read_group: hk-no-such-group}\ndefaults:\n  checks: {max_runtime: 2h}\n"), 0o644))
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool {
		return strings.Contains(d.logText(), d.config+`:4: control.read_group: no group`)
	}, 20*time.Second, 50*time.Millisecond, "the reload's error was never logged")
	require.Contains(t, d.logText(), "daemon file invalid; keeping the running configuration")
	r = d.ctl("status", "good", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var st control.AgentStatus
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Equal(t, control.StateRunning, st.State)
	require.Equal(t, pid, st.PID)
	require.NotContains(t, st.Checks, "max_runtime", "the refused file's defaults were not applied")
}

// supervise --config FILE with user: as root, the agent runs as that
// user, and its heartbeats reach hermeskilld; its command is checked
// first.
func TestSuperviseUser(t *testing.T) {
	nobody := nobodyUser(t)
	dir := testnobody.Dir(t)
	src := `import os, socket, time
print("ids", os.getuid(), os.getgid(), flush=True)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(b"READY=1", os.environ["NOTIFY_SOCKET"])
for i in range(8):
    s.sendto(b"WATCHDOG=1", os.environ["NOTIFY_SOCKET"])
    time.sleep(0.25)
`
	script := agent(t, dir, src)
	require.NoError(t, os.Chmod(script, 0o644))
	cfg := writeTestFile(t, dir, "agent.yaml", "user: "+nobody+"\nchecks: {heartbeat_timeout: 1s}\n")
	certsDir := filepath.Join(shortTemp(t), "certs")
	// The socket's directory goes under $XDG_RUNTIME_DIR/hermeskill: one
	// uid 65534 can reach, whatever the host's /run/hermeskill is.
	t.Setenv("XDG_RUNTIME_DIR", dir)
	// What a SIGKILLed run as another user left: its directory and socket.
	stale := filepath.Join(dir, "hermeskill", "supervise-as-user", "old.999999999")
	require.NoError(t, os.MkdirAll(filepath.Dir(stale), 0o755))
	require.NoError(t, os.Mkdir(stale, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(stale, "notify.sock"), nil, 0o600))
	require.NoError(t, os.Chown(stale, testnobody.UID, testnobody.GID))

	r := hk(t, "supervise", "--config", cfg, "--certs-dir", certsDir, "--", python(t), script)
	require.Equal(t, 0, r.code, "beating for 2s with a 1s heartbeat timeout: no kill")
	require.NoDirExists(t, stale, "a SIGKILLed run's socket directory is never removed")
	left, _ := os.ReadDir(filepath.Dir(stale))
	require.Empty(t, left, "this run's socket directory was left")
	require.Contains(t, r.stdout, fmt.Sprintf("ids %d %d\n", testnobody.UID, testnobody.GID))
	noCert(t, certsDir)

	cmd, private := lockedCommand(t)
	r = hk(t, "supervise", "--config", cfg, "--certs-dir", certsDir, "--", cmd)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, cfg+": command: "+cmd+`: user "`+nobody+`" (uid 65534) cannot execute it: it may not search `+private+" (mode 0700, owner 0:0)\n")

	// A runtime directory the agent's user cannot reach: refused, not
	// started with a socket it could never reach.
	locked := filepath.Join(dir, "private-run")
	require.NoError(t, os.Mkdir(locked, 0o700))
	t.Setenv("XDG_RUNTIME_DIR", locked)
	r = hk(t, "supervise", "--config", cfg, "--certs-dir", certsDir, "--", python(t), script)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "uid 65534 cannot reach "+filepath.Join(locked, "hermeskill", "supervise-as-user")+": it may not search "+locked+" (mode 0700, owner 0:0)")
	require.NotContains(t, r.stdout, "ids", "the agent never ran")
	t.Setenv("XDG_RUNTIME_DIR", dir)

	bad := writeTestFile(t, dir, "bad.yaml", "checks: {}\nuser: hk-no-such-user\n")
	r = hk(t, "supervise", "--config", bad, "--certs-dir", certsDir, "--", "/bin/true")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, bad+`:2: user: no user "hk-no-such-user" on this host`+"\n")
}

// nobodySupervise prepares hermeskilld run as uid 65534: a copy of the
// test binary it may execute, a directory it can reach, and in it home,
// its own (0700), for its socket and certificates.
func nobodySupervise(t *testing.T) (bin, dir, home string) {
	t.Helper()
	nobodyUser(t)
	bin, dir = testnobody.Executable(t), testnobody.Dir(t)
	home = filepath.Join(dir, "home")
	require.NoError(t, os.Mkdir(home, 0o700))
	require.NoError(t, os.Chown(home, testnobody.UID, testnobody.GID))
	return bin, dir, home
}

// supervise not run as root refuses a user: other than its own, with the
// line of the key, rather than run the agent as the caller.
func TestSuperviseUserNeedsRoot(t *testing.T) {
	bin, dir, home := nobodySupervise(t)
	cfg := writeTestFile(t, dir, "agent.yaml", "checks: {}\nuser: root\n")
	run := func(cfg string) (int, string) {
		cmd := exec.Command(bin, "supervise", "--config", cfg, "--certs-dir", filepath.Join(home, "certs"), "--", "/bin/true")
		cmd.Env = append(os.Environ(), asMain+"=1", "XDG_RUNTIME_DIR="+home)
		cmd.Dir = home
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: testnobody.Credential()}
		out, err := cmd.CombinedOutput()
		if err != nil {
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "%s", out)
		}
		return cmd.ProcessState.ExitCode(), string(out)
	}
	code, out := run(cfg)
	require.Equal(t, exitUsage, code, out)
	require.Contains(t, out, cfg+`:2: user: running the agent as user "root" (uid 0) needs hermeskilld to run as root (it runs as uid 65534)`)

	// Its own user is no change.
	own := writeTestFile(t, dir, "own.yaml", "user: "+strconv.Itoa(testnobody.UID)+"\n")
	code, out = run(own)
	require.Equal(t, 0, code, out)
}

// An agent file with the sections only supervise takes is valid, and
// check-config says that the daemon would refuse it.
func TestCheckConfigNamesSuperviseOnlySections(t *testing.T) {
	dir := shortTemp(t)
	both := writeTestFile(t, dir, "both.yaml", "id: both\ncommand: [/bin/true]\n"+
		"gateway: {upstreams: [openai]}\ncontrol_plane: {url: \"https://cp.example/api\"}\n")
	r := hk(t, "check-config", both)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, both+": valid agent file for supervise --config (gateway and control_plane: the daemon refuses an agent file that sets either; its own file's sections serve every agent)\n", r.stdout)

	cp := writeTestFile(t, dir, "cp.yaml", "id: cp\ncommand: [/bin/true]\ncontrol_plane: {url: \"https://cp.example/api\"}\n")
	r = hk(t, "check-config", cp)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, cp+": valid agent file for supervise --config (control_plane: the daemon refuses an agent file that sets it; its own file's section serves every agent)\n", r.stdout)

	plain := writeTestFile(t, dir, "plain.yaml", "id: plain\ncommand: [/bin/true]\n")
	r = hk(t, "check-config", plain)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, plain+": valid agent file\n", r.stdout)
}
