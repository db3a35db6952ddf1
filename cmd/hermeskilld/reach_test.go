// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/landlock"
	"github.com/hermeskill/hermeskilld/internal/testnobody"
)

// supervisorAttackAgent, as supervise's own user, tries to stop, kill and
// trace supervise and its keeper: SIGSTOP, SIGKILL, PTRACE_SEIZE (which
// would not stop the tracee), opening /proc/PID/mem; and to signal (0)
// and trace each of supervise's threads by its tid. It SIGKILLs a child
// of its own, prints one line, and then ignores SIGINT and SIGTERM.
const supervisorAttackAgent = `
import ctypes, errno, os, signal, subprocess, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
libc = ctypes.CDLL(None, use_errno=True)

def name(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]

def ptrace(pid):
    if libc.ptrace(ctypes.c_long(0x4206), ctypes.c_int(pid), None, None) == 0:  # PTRACE_SEIZE
        return "ok"
    return errno.errorcode[ctypes.get_errno()]

def keeper(pid):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            return b"\0keeper\0--for\0%d\0" % os.getppid() in f.read()
    except OSError:
        return False

sup = os.getppid()
# The keeper, forked before us, may still be starting (its own exec).
for _ in range(1000):
    keepers = [int(p) for p in os.listdir("/proc") if p.isdigit() and keeper(p)]
    if keepers:
        break
    time.sleep(0.01)
targets = [("supervise", sup)] + [("keeper", pid) for pid in keepers]
out = []
for who, pid in targets:
    out.append("%s: stop=%s kill=%s ptrace=%s mem=%s" % (who,
        name(lambda: os.kill(pid, signal.SIGSTOP)), name(lambda: os.kill(pid, signal.SIGKILL)),
        ptrace(pid), name(lambda: open("/proc/%d/mem" % pid, "rb").close())))
# Every thread of supervise by its tid: none shares our domain.
tids = [int(t) for t in os.listdir("/proc/%d/task" % sup)]
kill0 = sorted(set(name(lambda: os.kill(tid, 0)) for tid in tids))
traced = sorted(set(ptrace(tid) for tid in tids))
out.append("its %s threads: kill0=%s ptrace=%s" % ("all" if len(tids) > 1 else "one", ",".join(kill0), ",".join(traced)))
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
os.kill(child.pid, signal.SIGKILL)
out.append("own child: %d" % child.wait())
print("; ".join(out), flush=True)
while True:
    time.sleep(1)
`

// An agent of supervise's own user — root, or another — cannot stop,
// kill or trace supervise or its keeper: its signals are scoped to its own
// Landlock domain, and the ptrace(2) checks behind /proc/PID/mem refuse a
// process outside it too. Its own child it kills as ever, and supervise's
// ladder still reaches it: a SIGTERM to supervise ends in the SIGKILL of
// the agent, which ignores the gentler signals.
func TestAgentCannotTouchItsSupervisor(t *testing.T) {
	if abi := landlock.ABI(); abi < landlock.SignalsABI {
		t.Skipf("the kernel's Landlock ABI is %d (0: none): signal scoping needs %d", abi, landlock.SignalsABI)
	}
	for _, as := range []string{"root", "nobody"} {
		t.Run(as, func(t *testing.T) {
			bin, home := os.Args[0], t.TempDir()
			if as == "nobody" {
				bin, _, home = nobodySupervise(t)
			}
			script := filepath.Join(home, "agent.py")
			require.NoError(t, os.WriteFile(script, []byte(supervisorAttackAgent), 0o644))
			certsDir := filepath.Join(home, "certs")
			cmd := command(t, []string{"XDG_RUNTIME_DIR=" + home}, bin, "supervise", "--id", "reach-"+as,
				"--containment", "pgroup", "--heartbeat-timeout", "0s", "--coop-grace", "100ms", "--term-grace", "100ms",
				"--certs-dir", certsDir, "--", python(t), script)
			cmd.Dir = home
			if as == "nobody" {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: testnobody.Credential()}
			}
			h := startCmd(t, cmd)
			got := h.expect(t, `supervise: .*`)
			refused := "stop=EPERM kill=EPERM ptrace=EPERM mem=EACCES"
			require.Equal(t, "supervise: "+refused+"; keeper: "+refused+"; its all threads: kill0=EPERM ptrace=EPERM; own child: -9", got[0], h.stderr.String())

			require.NoError(t, h.cmd.Process.Signal(syscall.SIGTERM))
			r := h.wait(t)
			require.Equal(t, 128+int(syscall.SIGKILL), r.code, r.stderr)
			c := readCert(t, certsDir)
			require.Equal(t, "sigkill", c.Escalation.Reached)
			require.Equal(t, "signals", c.Confinement)
		})
	}
}

// writableAgent writes where it may and where it may not, and reports
// each attempt: argv[1] is its writable directory, argv[2] a directory
// outside it (holding a file "old" it tries to remove).
const writableAgent = `
import errno, os, socket, subprocess, sys
inside, outside = sys.argv[1], sys.argv[2]

def name(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]

def write(path):
    with open(path, "w") as f:
        f.write("x")

def notify():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.sendto(b"READY=1", os.environ["NOTIFY_SOCKET"])

out = [
    "in: write=" + name(lambda: write(os.path.join(inside, "a"))),
    "rename=" + name(lambda: os.rename(os.path.join(inside, "a"), os.path.join(inside, "b"))),
    "mkdir=" + name(lambda: os.mkdir(os.path.join(inside, "d"))),
    "unlink=" + name(lambda: os.unlink(os.path.join(inside, "b"))),
    "child=" + name(lambda: subprocess.run(["/bin/sh", "-c", "echo y > " + os.path.join(inside, "c")], check=True)),
    "out: write=" + name(lambda: write(os.path.join(outside, "a"))),
    "append=" + name(lambda: open(os.path.join(outside, "old"), "a").close()),
    "mkdir=" + name(lambda: os.mkdir(os.path.join(outside, "d"))),
    "unlink=" + name(lambda: os.unlink(os.path.join(outside, "old"))),
    "move-out=" + name(lambda: os.rename(os.path.join(inside, "c"), os.path.join(outside, "c"))),
    "read=" + name(lambda: open(os.path.join(outside, "old")).read()),
    "devnull=" + name(lambda: write(os.devnull)),
    "notify=" + name(notify),
]
print(" ".join(out), flush=True)
`

// An agent with writable: paths writes, creates, renames and removes
// beneath them — its children too — and nowhere else: EACCES from the
// kernel, whatever the permission bits (here root, who may write
// anywhere). Reading everywhere, /dev/null and the heartbeat socket stay
// open to it.
func TestWritableConfinesWrites(t *testing.T) {
	if abi := landlock.ABI(); abi < landlock.FilesABI {
		t.Skipf("the kernel has no Landlock (ABI %d): writable cannot be enforced", abi)
	}
	dir := t.TempDir()
	inside, outside := filepath.Join(dir, "inside"), filepath.Join(dir, "outside")
	require.NoError(t, os.Mkdir(inside, 0o755))
	require.NoError(t, os.Mkdir(outside, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "old"), []byte("kept"), 0o644))
	script := writeTestFile(t, dir, "agent.py", writableAgent)
	cfg := writeTestFile(t, dir, "agent.yaml", "writable: ["+inside+"]\n")
	r := hkRun(t, []string{"XDG_RUNTIME_DIR=" + dir}, "supervise", "--config", cfg, "--heartbeat-timeout", "0s",
		"--certs-dir", filepath.Join(dir, "certs"), "--", python(t), script, inside, outside)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "in: write=ok rename=ok mkdir=ok unlink=ok child=ok "+
		"out: write=EACCES append=EACCES mkdir=EACCES unlink=EACCES move-out=EACCES read=ok devnull=ok notify=ok\n", r.stdout)
	require.Contains(t, r.stderr, `"confinement": "signals+files"`)
	require.Equal(t, "kept", string(mustRead(t, filepath.Join(outside, "old"))))
	require.NoFileExists(t, filepath.Join(outside, "a"))
}

// A writable path that does not exist stops the start: the agent never
// runs with its files open.
func TestWritableMissingPathRefusesToStart(t *testing.T) {
	if abi := landlock.ABI(); abi < landlock.FilesABI {
		t.Skipf("the kernel has no Landlock (ABI %d): writable cannot be enforced", abi)
	}
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	cfg := writeTestFile(t, dir, "agent.yaml", "writable: ["+missing+"]\n")
	ran := filepath.Join(dir, "ran")
	r := hkRun(t, []string{"XDG_RUNTIME_DIR=" + dir}, "supervise", "--config", cfg, "--heartbeat-timeout", "0s",
		"--certs-dir", filepath.Join(dir, "certs"), "--", "/bin/sh", "-c", "touch "+ran)
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "confine the agent: open "+missing+": no such file or directory")
	require.NoFileExists(t, ran)
}

// gatewayOnlyAgent asks its model once through the gateway, then tries
// to reach around it: argv[1] and argv[2] are the host and port of the
// fake upstream, argv[3] the port of a listener on the host's loopback.
const gatewayOnlyAgent = `
import errno, json, os, socket, sys, urllib.request
up_host, up_port, outside = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def connect(addr):
    try:
        socket.create_connection(addr, timeout=5).close()
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

def notify():
    try:
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"READY=1", os.environ["NOTIFY_SOCKET"])
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]

print("gateway=%s upstream-direct=%s outside=%s off-host=%s notify=%s" % (ask(),
    connect((up_host, up_port)), connect(("127.0.0.1", outside)), connect(("192.0.2.1", 80)), notify()), flush=True)
`

// network: gateway-only puts the agent in a network namespace of its own:
// its model answers through the gateway (a real request to a fake
// upstream), but the upstream itself, a listener on the host's loopback
// and any address off the host are out of its reach; the heartbeat
// socket works.
func TestGatewayOnlyNetwork(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("the tests run as uid %d: a network namespace needs CAP_SYS_ADMIN (run go test as root)", os.Geteuid())
	}
	upstream, _ := usageUpstream(t)
	u, err := url.Parse(upstream)
	require.NoError(t, err)
	outside, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer outside.Close()
	_, outPort, _ := net.SplitHostPort(outside.Addr().String())
	dir := t.TempDir()
	script := writeTestFile(t, dir, "agent.py", gatewayOnlyAgent)
	cfg := writeTestFile(t, dir, "agent.yaml", "network: gateway-only\n")
	r := hkRun(t, []string{"XDG_RUNTIME_DIR=" + dir}, "supervise", "--config", cfg, "--heartbeat-timeout", "0s",
		"--llm-upstream", "openai="+upstream, "--certs-dir", filepath.Join(dir, "certs"), "--",
		python(t), script, u.Hostname(), u.Port(), outPort)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "gateway=200 upstream-direct=ECONNREFUSED outside=ECONNREFUSED off-host=ENETUNREACH notify=ok\n", r.stdout)
	require.Contains(t, r.stderr, `"confinement": "signals+network"`)
	require.Regexp(t, `agent \S+ exited 0 after [\d.]+s: 1 LLM requests`, r.stderr)
}

// Without CAP_SYS_ADMIN there is no namespace to give (and so no egress
// proxy in one): supervise refuses to start the agent rather than run it
// with the host's network, in each mode that needs one.
func TestNamespaceModesNeedPrivilege(t *testing.T) {
	bin, dir, home := nobodySupervise(t)
	for mode, file := range map[string]string{
		"gateway-only": "network: gateway-only\n",
		"allowlist":    "network: allowlist\nallow: [api.example.org:443]\n",
	} {
		t.Run(mode, func(t *testing.T) {
			cfg := writeTestFile(t, dir, mode+".yaml", file)
			ran := filepath.Join(home, "ran-"+mode)
			cmd := command(t, []string{"XDG_RUNTIME_DIR=" + home}, bin, "supervise", "--config", cfg, "--heartbeat-timeout", "0s",
				"--certs-dir", filepath.Join(home, "certs"), "--", "/bin/sh", "-c", "touch "+ran)
			cmd.Dir = home
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: testnobody.Credential()}
			out, err := cmd.CombinedOutput()
			require.Error(t, err)
			require.Equal(t, exitUsage, cmd.ProcessState.ExitCode(), "%s", out)
			require.Contains(t, string(out), "network: "+mode+": a network namespace needs CAP_SYS_ADMIN (run hermeskilld as root); the agent is not started with the host's network")
			require.NoFileExists(t, ran)
		})
	}
}

// The daemon runs an agent confined as its file says, and status says
// how: signals scoped, writes confined, a network namespace of its own.
func TestDaemonStatusShowsConfinement(t *testing.T) {
	if abi := landlock.ABI(); abi < landlock.SignalsABI || os.Geteuid() != 0 {
		t.Skipf("needs Landlock ABI %d (the kernel has %d) and root (uid %d) for a network namespace", landlock.SignalsABI, abi, os.Geteuid())
	}
	m := marker(t)
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	d := startDaemon(t, "")
	d.writeAgent("reach", sleeper(t, "reach", m, "checks: {heartbeat_timeout: 0s}\nwritable: ["+t.TempDir()+"]\nnetwork: gateway-only\n"))
	d.waitState("reach", control.StateRunning)
	r := d.ctl("status", "reach", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var st control.AgentStatus
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Equal(t, "signals+files+network", st.Confinement)
	require.NotNil(t, st.Run)
	require.Equal(t, "signals+files+network", st.Run.Confinement)
}
