// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/control/controltest"
	"github.com/hermeskill/hermeskilld/internal/testnobody"
)

// syncBuffer is an output a command writes while the test reads it.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{changed: make(chan struct{}, 1)} }

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until the output contains want.
func (s *syncBuffer) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for !strings.Contains(s.String(), want) {
		select {
		case <-s.changed:
		case <-deadline.C:
			t.Fatalf("output never contained %q; got:\n%s", want, s.String())
		}
	}
}

// asCtl makes the test binary run hermeskilld with the operator commands
// (ctlExec: they are added even before root.go wires them), for the tests
// that run it as another user. An init, so that it needs no change to
// TestMain.
const asCtl = "HK_CTL_AS_HERMESKILLD"

func init() {
	if os.Getenv(asCtl) == "1" {
		os.Exit(ctlExec(context.Background(), os.Stdout, os.Stderr, os.Args[1:]...))
	}
}

// ctlCommands are the operator commands, added to the root in tests until
// root.go adds them (and not twice after).
var ctlCommands = []func() *cobra.Command{newPS, newStatus, newKill, newEstop, newRelease, newEvents, newCerts}

// ctlExec runs hermeskilld in-process and returns the exit status run()
// would give; what run() prints on stderr is written to errw.
func ctlExec(ctx context.Context, out, errw io.Writer, args ...string) int {
	root := newRoot(out, errw)
	for _, sub := range ctlCommands {
		c := sub()
		if found, _, err := root.Find([]string{c.Name()}); err != nil || found == root {
			root.AddCommand(c)
		}
	}
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ee.err != nil {
			io.WriteString(errw, "hermeskilld: "+ee.err.Error()+"\n")
		}
		return ee.code
	default:
		io.WriteString(errw, "hermeskilld: "+err.Error()+"\n")
		return exitUsage
	}
}

// ctlRun runs one operator command to its end.
func ctlRun(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	began := time.Now()
	code := ctlExec(context.Background(), &out, &errb, args...)
	r := result{code: code, stdout: out.String(), stderr: errb.String(), took: time.Since(began)}
	t.Logf("hermeskilld %s -> %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	return r
}

// socketDir is a short temporary directory (sun_path is 108 bytes).
// Sockets other users connect to go in testnobody.Dir.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "hkctl")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// serveFake serves b on a new control socket (opts.Path, or one in a new
// socketDir) until the test ends and returns the socket's path.
func serveFake(t *testing.T, b control.Backend, opts control.ServerOptions) string {
	t.Helper()
	if opts.Path == "" {
		opts.Path = filepath.Join(socketDir(t), "control.sock")
	}
	opts.Log = zaptest.NewLogger(t)
	s := control.NewServer(b, opts)
	require.NoError(t, s.Listen())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return opts.Path
}

// fleet is a fake daemon's agents, relative to now.
func fleet(now time.Time) *controltest.Backend {
	twenty := 20
	return controltest.New(control.DaemonInfo{Version: "test", PID: 1},
		control.AgentStatus{
			AgentInfo: control.AgentInfo{ID: "research-bot", State: control.StateRunning, PID: 4242,
				Labels: map[string]string{"team": "research", "model": "qwen"}, StartedAt: now.Add(-2*time.Hour - 5*time.Minute),
				LastHeartbeatAt: now.Add(-3 * time.Second), Progress: 17, CostUSD: 0.4249, Tokens: 1200, Warnings: 1,
				Status: "indexing 3/10\x1b[31m"},
			Source: "/etc/hermeskill/agents.d/research-bot.yaml", Command: []string{"python3", "/opt/bots/agent.py"},
			Mode: "enforce", Containment: "cgroup",
			Checks:     map[string]string{"heartbeat_timeout": "30s", "memory": "warn 1GiB, kill 2GiB for 10s"},
			Escalation: map[string]string{"coop_signal": "SIGINT", "coop_grace": "10s", "term_grace": "5s"},
			Pending:    []string{"command changes at the next start"},
			Symptoms: []control.Symptom{{At: now.Add(-time.Minute), Check: "memory", Severity: "warning",
				Observed: "1.2GiB", Threshold: "1GiB", Message: "tree RSS 1.2GiB over 1GiB"}},
			Run: &control.RunStatus{State: "running", PID: 4242, Socket: "/run/hermeskill/agents/research-bot.sock",
				StreamSocket: "/run/hermeskill/agents/research-bot/stream.sock",
				Agent: control.AgentReport{Ready: true, ReadyAt: now.Add(-2 * time.Hour), Heartbeats: 250, LastTool: "web_search",
					Errors: 2, ErrorStreak: 1, LastError: "timeout", HeartbeatTimeout: "30s"},
				Tree: control.TreeSample{RSSBytes: 1288490188, CPUPercent: 12.5, Tasks: 3, FDs: &twenty},
				SamplerError: &control.SamplerError{Error: "list /proc: open: too many open files", At: now.Add(-500 * time.Millisecond),
					Failures: 7, BlindSince: now.Add(-7 * time.Second)},
				Messages: control.MessageCounts{Accepted: 260, Forged: 2, Dropped: 2,
					StreamAccepted: 3, StreamRefused: 1, StreamDropped: 1}},
			LastCert: "/var/lib/hermeskill/certs/old.json",
		},
		control.AgentStatus{AgentInfo: control.AgentInfo{ID: "ops-bot", State: control.StateRunning, PID: 5151,
			Labels: map[string]string{"team": "ops"}, StartedAt: now.Add(-10 * time.Minute)}},
		control.AgentStatus{AgentInfo: control.AgentInfo{ID: "loopy", State: control.StateQuarantined,
			Note: "killed by uid:0(root): looping"},
			Quarantine: &control.Quarantine{Since: now.Add(-time.Hour), Reason: "looping", Operator: "uid:0(root)"}},
	)
}

func TestCtlPS(t *testing.T) {
	now := time.Now()
	sock := serveFake(t, fleet(now), control.ServerOptions{})
	r := ctlRun(t, "ps", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 4)
	assert.Regexp(t, `^ID\s+STATE\s+PID\s+UPTIME\s+HEARTBEAT\s+PROGRESS\s+COST\s+WARN\s+NOTE$`, lines[0])
	assert.Regexp(t, `^loopy\s+quarantined\s+-\s+-\s+-\s+0\s+\$0\.00\s+0\s+killed by uid:0\(root\): looping$`, lines[1])
	assert.Regexp(t, `^ops-bot\s+running\s+5151\s+10m0\ds\s+-\s+0\s+\$0\.00\s+0$`, lines[2])
	assert.Regexp(t, `^research-bot\s+running\s+4242\s+2h0[45]m\s+3\.\ds ago\s+17\s+\$0\.42\s+1\s+"indexing 3/10\\x1b\[31m"$`, lines[3],
		"the agent's STATUS is the note, its escape sequence made inert")
	assert.NotContains(t, r.stdout, "\x1b")
	// Columns are aligned: every header starts where its values do.
	col := strings.Index(lines[0], "STATE")
	for _, l := range lines[1:] {
		assert.Equal(t, byte(' '), l[col-1])
		assert.NotEqual(t, byte(' '), l[col], l)
	}

	r = ctlRun(t, "ps", "--json", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	var list []control.AgentInfo
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Len(t, list, 3)
	assert.Equal(t, "indexing 3/10\x1b[31m", list[2].Status, "--json is the data as it is")
}

func TestCtlStatus(t *testing.T) {
	now := time.Now()
	sock := serveFake(t, fleet(now), control.ServerOptions{})
	r := ctlRun(t, "status", "research-bot", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	for _, want := range []string{
		`(?m)^research-bot  running$`,
		`(?m)^  pid\s+4242$`,
		`(?m)^  heartbeat\s+3\.\ds ago$`,
		`(?m)^  cost\s+\$0\.42$`,
		`(?m)^  labels\s+model=qwen, team=research$`,
		`(?m)^  agent status\s+"indexing 3/10\\x1b\[31m"$`,
		`(?m)^  command\s+python3 /opt/bots/agent.py$`,
		`(?m)^  last certificate\s+/var/lib/hermeskill/certs/old.json$`,
		`(?m)^checks\n  heartbeat_timeout\s+30s\n  memory\s+warn 1GiB, kill 2GiB for 10s$`,
		`(?m)^escalation\n  coop_grace\s+10s\n  coop_signal\s+SIGINT\n  term_grace\s+5s$`,
		`(?m)^pending\n  command changes at the next start$`,
		`(?m)^recent symptoms\n  TIME\s+SEVERITY\s+CHECK\s+OBSERVED\s+THRESHOLD\s+MESSAGE\n  \S+\s+warning\s+memory\s+1\.2GiB\s+1GiB\s+tree RSS 1\.2GiB over 1GiB$`,
		`(?m)^run\n`,
		`(?m)^  heartbeats\s+250\n  messages\s+260 accepted, 2 dropped \(forged 2, rate-limited 0\)$`,
		`(?m)^  stream socket\s+/run/hermeskill/agents/research-bot/stream\.sock$`,
		`(?m)^  stream connections\s+3 accepted, 1 refused, 0 over the limit, 1 dropped$`,
		`(?m)^  last tool\s+web_search$`,
		`(?m)^  errors\s+2 \(streak 1\), last: timeout$`,
		`(?m)^  tree\s+rss 1\.2GiB, cpu 12%, tasks 3, fds 20$`,
		`(?m)^  sampler error\s+list /proc: open: too many open files \(7 failures, last 0\.\ds ago; blind for 7\.\ds\)$`,
	} {
		assert.Regexp(t, want, r.stdout)
	}
	assert.NotContains(t, r.stdout, "\x1b")

	r = ctlRun(t, "status", "loopy", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	assert.Regexp(t, `(?m)^quarantine\n  since\s+\S+\n  reason\s+looping\n  operator\s+uid:0\(root\)\n  release\s+hermeskilld release loopy$`, r.stdout)

	r = ctlRun(t, "status", "--json", "research-bot", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	var st control.AgentStatus
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	assert.Equal(t, 250, int(st.Run.Agent.Heartbeats))
	assert.Contains(t, r.stdout, `"sampler_error": {`)
	require.NotNil(t, st.Run.SamplerError)
	assert.EqualValues(t, 7, st.Run.SamplerError.Failures)
	assert.False(t, st.Run.SamplerError.BlindSince.IsZero())

	r = ctlRun(t, "status", "nope", "--control-socket", sock)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "hermeskilld: no such agent: nope")

	r = ctlRun(t, "status", "--control-socket", sock)
	assert.Equal(t, exitUsage, r.code)
}

func TestCtlKill(t *testing.T) {
	now := time.Now()
	b := fleet(now)
	sock := serveFake(t, b, control.ServerOptions{})

	r := ctlRun(t, "kill", "research-bot", "--control-socket", sock)
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "--reason TEXT is required")
	r = ctlRun(t, "kill", "--reason", "x", "--control-socket", sock)
	assert.Equal(t, exitUsage, r.code)
	r = ctlRun(t, "kill", "research-bot", "--selector", "team=ops", "--reason", "x", "--control-socket", sock)
	assert.Equal(t, exitUsage, r.code)
	r = ctlRun(t, "kill", "--started-before", "yesterday", "--reason", "x", "--control-socket", sock)
	assert.Equal(t, exitUsage, r.code)
	r = ctlRun(t, "kill", "a", "b", "--reason", "x", "--control-socket", sock)
	assert.Equal(t, exitUsage, r.code)
	assert.Empty(t, b.Calls(), "bad invocations never reach the daemon")

	r = ctlRun(t, "kill", "research-bot", "--reason", "looping on web_search", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	assert.Equal(t, "agent research-bot killed; escalation reached sigterm; certificate: /certs/research-bot.json\n", r.stdout)
	st := b.Agent("research-bot")
	assert.Equal(t, control.StateQuarantined, st.State)
	assert.Equal(t, "looping on web_search", st.Quarantine.Reason)
	assert.Equal(t, control.CallerName(os.Getuid()), st.Quarantine.Operator)

	r = ctlRun(t, "kill", "research-bot", "--reason", "again", "--control-socket", sock)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "research-bot is quarantined")
	r = ctlRun(t, "kill", "nope", "--reason", "x", "--control-socket", sock)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "no such agent: nope")

	r = ctlRun(t, "kill", "--selector", "team=research", "--reason", "x", "--control-socket", sock)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "no running agent matched")

	r = ctlRun(t, "kill", "--started-before", "5m", "--reason", "stale", "--no-wait", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	assert.Equal(t, "agent ops-bot: kill started\n", r.stdout)
	assert.Equal(t, control.StateQuarantined, b.Agent("ops-bot").State)
}

func TestCtlKillPartialFailure(t *testing.T) {
	b := fleet(time.Now())
	var got control.KillRequest
	b.KillHook = func(_ context.Context, req control.KillRequest) ([]control.KillResult, error) {
		got = req
		return []control.KillResult{
			{ID: "a", Reached: "sigkill", Certificate: "/c/a.json"},
			{ID: "b", Error: "not running; quarantined"},
			{ID: "c", Reached: "cooperative"},
		}, nil
	}
	sock := serveFake(t, b, control.ServerOptions{})
	r := ctlRun(t, "kill", "--selector", "team=research,model=qwen", "--started-before", "2026-12-02T10:00:00Z",
		"--reason", "rollout", "--control-socket", sock)
	assert.Equal(t, exitFailure, r.code)
	assert.Equal(t, "agent a killed; escalation reached sigkill; certificate: /c/a.json\n"+
		"agent c killed; escalation reached cooperative; certificate: not written (see the daemon's log)\n", r.stdout)
	assert.Equal(t, "hermeskilld: agent b: not running; quarantined\n", r.stderr)
	assert.Equal(t, "model=qwen,team=research", got.Selector.String())
	assert.True(t, got.StartedBefore.Equal(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)))
	assert.True(t, got.Wait)
}

func TestCtlEstopRelease(t *testing.T) {
	b := fleet(time.Now())
	sock := serveFake(t, b, control.ServerOptions{})

	r := ctlRun(t, "estop", "--control-socket", sock)
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "--reason TEXT is required")

	r = ctlRun(t, "estop", "--reason", "incident 4711", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	assert.Equal(t, "agent ops-bot killed; escalation reached sigterm; certificate: /certs/ops-bot.json\n"+
		"agent research-bot killed; escalation reached sigterm; certificate: /certs/research-bot.json\n"+
		"e-stop engaged: every agent stays down until `hermeskilld release --estop`\n", r.stdout)
	assert.Equal(t, control.StateEstopped, b.Agent("ops-bot").State)

	r = ctlRun(t, "release", "--control-socket", sock)
	assert.Equal(t, exitUsage, r.code)
	r = ctlRun(t, "release", "loopy", "--estop", "--control-socket", sock)
	assert.Equal(t, exitUsage, r.code)

	r = ctlRun(t, "release", "--estop", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	assert.Equal(t, "e-stop released; agents start again\n", r.stdout)
	assert.Equal(t, control.StateRunning, b.Agent("ops-bot").State)

	r = ctlRun(t, "release", "loopy", "--control-socket", sock)
	require.Equal(t, 0, r.code)
	assert.Equal(t, "agent loopy released\n", r.stdout)
	r = ctlRun(t, "release", "loopy", "--control-socket", sock)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "not quarantined")

	assert.Equal(t, []string{"audit POST /v1/estop", "estop", "audit POST /v1/release", "release",
		"audit POST /v1/release", "release", "audit POST /v1/release", "release"}, b.Calls())
}

func TestCtlEvents(t *testing.T) {
	b := fleet(time.Now())
	sock := serveFake(t, b, control.ServerOptions{})
	at := time.Date(2026, 12, 2, 10, 15, 3, 123e6, time.UTC)
	events := []control.Event{
		{Time: at, Type: "agent_started", AgentID: "research-bot", Message: "started, pid 4242"},
		{Time: at.Add(time.Second), Type: "symptom", AgentID: "ops-bot", Message: "memory: 1.2GiB\x1b[2J"},
		{Time: at.Add(2 * time.Second), Type: "operator_request", Message: "POST /v1/kill by uid:0(root)", Data: map[string]any{"n": 1.0}},
	}

	follow := func(t *testing.T, args ...string) (out *syncBuffer, stop func() (int, string)) {
		out, errb := newSyncBuffer(), newSyncBuffer()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int, 1)
		go func() {
			done <- ctlExec(ctx, out, errb, append([]string{"events", "--control-socket", sock}, args...)...)
		}()
		<-b.Subscribed()
		for _, e := range events {
			b.Publish(e)
		}
		return out, func() (int, string) {
			cancel()
			code := <-done
			<-b.Unsubscribed()
			return code, errb.String()
		}
	}

	t.Run("lines", func(t *testing.T) {
		out, stop := follow(t)
		out.waitFor(t, "POST /v1/kill")
		code, stderr := stop()
		assert.Equal(t, 0, code, "Ctrl-C is the normal end")
		assert.Empty(t, stderr)
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		require.Len(t, lines, 3)
		stamp := regexp.QuoteMeta(stampText(at))
		assert.Regexp(t, `^`+stamp+` agent_started research-bot started, pid 4242$`, lines[0])
		assert.Regexp(t, `^\S+ symptom ops-bot memory: 1\.2GiB\\x1b\[2J$`, lines[1])
		assert.Regexp(t, `^\S+ operator_request - POST /v1/kill by uid:0\(root\)$`, lines[2])
	})

	t.Run("json", func(t *testing.T) {
		out, stop := follow(t, "--json")
		out.waitFor(t, "operator_request")
		code, _ := stop()
		assert.Equal(t, 0, code)
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		require.Len(t, lines, 3)
		for i, l := range lines {
			var e control.Event
			require.NoError(t, json.Unmarshal([]byte(l), &e))
			assert.True(t, e.Time.Equal(events[i].Time))
			e.Time = events[i].Time
			assert.Equal(t, events[i], e)
		}
	})

	t.Run("agent filter", func(t *testing.T) {
		out, stop := follow(t, "--agent", "ops-bot")
		b.Publish(control.Event{Time: at, Type: "marker", AgentID: "ops-bot", Message: "last"})
		out.waitFor(t, "marker")
		code, _ := stop()
		assert.Equal(t, 0, code)
		assert.NotContains(t, out.String(), "research-bot")
		assert.Len(t, strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"), 2)
	})

	t.Run("daemon ends the stream", func(t *testing.T) {
		out, errb := newSyncBuffer(), newSyncBuffer()
		done := make(chan int, 1)
		go func() { done <- ctlExec(context.Background(), out, errb, "events", "--control-socket", sock) }()
		<-b.Subscribed()
		b.EndStreams()
		assert.Equal(t, exitFailure, <-done)
		assert.Contains(t, errb.String(), "the daemon closed it")
		<-b.Unsubscribed()
	})
}

func TestCtlDaemonAbsent(t *testing.T) {
	sock := filepath.Join(socketDir(t), "control.sock")
	want := "hermeskilld: the daemon is not running (no socket at " + sock +
		"); start it with `systemctl start hermeskilld` or pass --control-socket\n"
	for _, args := range [][]string{
		{"ps"}, {"status", "x"}, {"kill", "x", "--reason", "r"}, {"estop", "--reason", "r"},
		{"release", "x"}, {"events"},
	} {
		r := ctlRun(t, append(args, "--control-socket", sock)...)
		assert.Equal(t, exitDaemonAbsent, r.code, args)
		assert.Equal(t, want, r.stderr, args)
	}

	// The environment names the socket when the flag does not.
	t.Setenv(control.EnvSocket, sock)
	r := ctlRun(t, "ps")
	assert.Equal(t, exitDaemonAbsent, r.code)
	assert.Equal(t, want, r.stderr)

	// A stale socket: nothing listens.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	require.NoError(t, err)
	ln.SetUnlinkOnClose(false)
	require.NoError(t, ln.Close())
	r = ctlRun(t, "ps")
	assert.Equal(t, exitDaemonAbsent, r.code)
	assert.Contains(t, r.stderr, "(nothing listens on "+sock+")")
}

func TestCtlEnvSocket(t *testing.T) {
	sock := serveFake(t, fleet(time.Now()), control.ServerOptions{})
	t.Setenv(control.EnvSocket, sock)
	r := ctlRun(t, "ps")
	require.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "research-bot")
}

// TestCtlForbidden runs hermeskilld as uid 65534 (a copy of the test
// binary it may execute) against the in-process server, on sockets in a
// directory that user can reach.
func TestCtlForbidden(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: runs hermeskilld as uid 65534")
	}
	g, err := user.LookupGroupId("65534")
	if err != nil {
		t.Skipf("no group 65534: %v", err)
	}
	bin := testnobody.Executable(t)
	asNobody := func(args ...string) result {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), asCtl+"=1", "GORACE=atexit_sleep_ms=0")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: testnobody.Credential()}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil {
			require.ErrorAs(t, err, &ee)
		}
		r := result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
		t.Logf("as 65534: hermeskilld %s -> %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		return r
	}

	dir := testnobody.Dir(t)
	b := fleet(time.Now())
	sock := serveFake(t, b, control.ServerOptions{Path: filepath.Join(dir, "read.sock"), ReadGroup: g.Name, OperatorsGroup: "hk-ops"})
	r := asNobody("ps", "--control-socket", sock)
	assert.Equal(t, 0, r.code, "65534's primary group is the read group")
	assert.Contains(t, r.stdout, "research-bot")
	r = asNobody("kill", "research-bot", "--reason", "x", "--control-socket", sock)
	assert.Equal(t, exitForbidden, r.code)
	assert.Contains(t, r.stderr, "hermeskilld: permission denied: killing agents requires root or membership of group hk-ops")
	assert.Empty(t, b.Calls())

	sock = serveFake(t, b, control.ServerOptions{Path: filepath.Join(dir, "root.sock")})
	r = asNobody("ps", "--control-socket", sock)
	assert.Equal(t, exitForbidden, r.code, "no group is configured: only root may")
	assert.Contains(t, r.stderr, "hermeskilld: permission denied: listing agents requires root")
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:                         "0.0s",
		400 * time.Millisecond:               "0.4s",
		12 * time.Second:                     "12s",
		5*time.Minute + 3*time.Second:        "5m03s",
		2*time.Hour + 5*time.Minute:          "2h05m",
		76 * time.Hour:                       "3d04h",
		9*time.Second + 990*time.Millisecond: "10.0s",
	} {
		assert.Equal(t, want, shortDuration(d), d)
	}
}

// The sampler's state says which checks are blind: all of the kernel
// checks, or the fds check alone (the descriptors not counted).
func TestSamplerErrorText(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e := control.SamplerError{Error: "fd 42: open: permission denied", At: now.Add(-time.Second), Failures: 9}
	assert.Equal(t, "fd 42: open: permission denied (9 failures, last 1.0s ago; seeing again)", samplerErrorText(e, now))
	e.FDsBlindSince = now.Add(-12 * time.Second)
	assert.Equal(t, "fd 42: open: permission denied (9 failures, last 1.0s ago; fds check blind for 12s)", samplerErrorText(e, now))
	e.BlindSince = now.Add(-3 * time.Second)
	assert.Equal(t, "fd 42: open: permission denied (9 failures, last 1.0s ago; blind for 3.0s)", samplerErrorText(e, now))
}

func TestParseTimeOrAgo(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	got, err := parseTimeOrAgo("1h30m", now)
	require.NoError(t, err)
	assert.Equal(t, now.Add(-90*time.Minute), got)
	got, err = parseTimeOrAgo("2026-12-01T08:00:00+01:00", now)
	require.NoError(t, err)
	assert.True(t, got.Equal(time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)))
	for _, bad := range []string{"0", "-1h", "yesterday", "2026-12-01"} {
		_, err := parseTimeOrAgo(bad, now)
		assert.Error(t, err, bad)
	}
}

// TestCtlViewsMetered: for an agent whose spend the gateway meters, ps
// and status show the metered figures (the checks'), status labels them
// beside the agent's own report and counts the LLM requests in flight.
func TestCtlViewsMetered(t *testing.T) {
	now := time.Now()
	sock := serveFake(t, controltest.New(control.DaemonInfo{Version: "test", PID: 1},
		control.AgentStatus{AgentInfo: control.AgentInfo{ID: "wire-bot", State: control.StateRunning, PID: 6161,
			StartedAt: now.Add(-time.Minute), Tokens: 5500, CostUSD: 1.92,
			Metered: &control.MeteredUsage{Requests: 5, InFlight: 1, Tokens: 5500, CostUSD: 1.92, CostKnown: true}}}),
		control.ServerOptions{})

	r := ctlRun(t, "ps", "--format", "wide", "--control-socket", sock)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^wire-bot\s+running\s+6161\s+\S+\s+-\s+0\s+5500\s+\$1\.92\s+0\s+0\s+-$`, r.stdout)

	r = ctlRun(t, "status", "wire-bot", "--control-socket", sock)
	require.Equal(t, 0, r.code, r.stderr)
	for _, want := range []string{
		`(?m)^  tokens\s+5500 metered \(agent reported 0\)$`,
		`(?m)^  cost\s+\$1\.92 metered \(agent reported \$0\.00\)$`,
		`(?m)^  LLM requests\s+5 \(1 in flight\)$`,
	} {
		assert.Regexp(t, want, r.stdout)
	}

	r = ctlRun(t, "status", "--json", "wire-bot", "--control-socket", sock)
	require.Equal(t, 0, r.code, r.stderr)
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &raw))
	assert.Equal(t, 5500.0, raw["tokens"])
	assert.Equal(t, 1.92, raw["cost_usd"])
	assert.Equal(t, 0.0, raw["reported_tokens"])
	assert.Equal(t, 0.0, raw["reported_cost_usd"])
	assert.Equal(t, map[string]any{"requests": 5.0, "in_flight": 1.0, "refused": 0.0, "errors": 0.0, "tokens": 5500.0,
		"cost_usd": 1.92, "cost_known": true}, raw["metered"])
}
