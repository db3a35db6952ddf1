// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package control_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/labels"
)

func TestReadEndpoints(t *testing.T) {
	b := fake()
	b.AddCert(control.CertSummary{CertID: "c1", AgentID: "gamma", Path: "/certs/c1.json", TriggerCheck: "tool_loop"}, []byte(`{"cert_id":"c1"}`+"\n"))
	b.AddCert(control.CertSummary{CertID: "c/2", AgentID: "alpha", Path: "/certs/c2.json"}, []byte(`{"cert_id":"c/2"}`))
	_, c := serve(t, b, control.ServerOptions{})
	ctx := context.Background()

	info, err := c.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, "test", info.Version)
	assert.Equal(t, 42, info.PID)
	assert.True(t, info.StartedAt.Equal(t0))
	assert.Equal(t, map[string]int{"running": 2, "quarantined": 1}, info.Agents)

	list, err := c.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 3)
	assert.Equal(t, []string{"alpha", "beta", "gamma"}, []string{list[0].ID, list[1].ID, list[2].ID})
	assert.Equal(t, map[string]string{"team": "research"}, list[0].Labels)

	st, err := c.Status(ctx, "gamma")
	require.NoError(t, err)
	assert.Equal(t, control.StateQuarantined, st.State)
	require.NotNil(t, st.Quarantine)
	assert.Equal(t, "looping", st.Quarantine.Reason)

	_, err = c.Status(ctx, "nope")
	require.ErrorIs(t, err, control.ErrNotFound)
	assert.Contains(t, err.Error(), "nope")

	all, err := c.Certs(ctx, "")
	require.NoError(t, err)
	assert.Len(t, all, 2)
	mine, err := c.Certs(ctx, "gamma")
	require.NoError(t, err)
	require.Len(t, mine, 1)
	assert.Equal(t, "tool_loop", mine[0].TriggerCheck)
	none, err := c.Certs(ctx, "nobody")
	require.NoError(t, err)
	assert.NotNil(t, none, "an empty list is [] on the wire")
	assert.Empty(t, none)

	raw, err := c.Cert(ctx, "c1")
	require.NoError(t, err)
	assert.Equal(t, `{"cert_id":"c1"}`+"\n", string(raw), "the file's bytes, unchanged")
	raw, err = c.Cert(ctx, "c/2")
	require.NoError(t, err, "an id with a slash is escaped in the path")
	assert.Equal(t, `{"cert_id":"c/2"}`, string(raw))
	_, err = c.Cert(ctx, "c3")
	require.ErrorIs(t, err, control.ErrNotFound)

	assert.Empty(t, b.Audits(), "reading is not audited")
}

func TestKillEstopRelease(t *testing.T) {
	b := fake()
	_, c := serve(t, b, control.ServerOptions{})
	ctx := context.Background()

	res, err := c.Kill(ctx, control.KillRequest{ID: "alpha", Reason: "runaway", Wait: true, Operator: "forged"})
	require.NoError(t, err)
	assert.Equal(t, []control.KillResult{{ID: "alpha", Reached: "sigterm", Certificate: "/certs/alpha.json"}}, res)
	st := b.Agent("alpha")
	assert.Equal(t, control.StateQuarantined, st.State)
	assert.Equal(t, control.CallerName(os.Getuid()), st.Quarantine.Operator, "the operator is the caller, whatever the client sent")

	_, err = c.Kill(ctx, control.KillRequest{ID: "alpha", Reason: "again"})
	require.ErrorIs(t, err, control.ErrConflict)
	_, err = c.Kill(ctx, control.KillRequest{ID: "nope", Reason: "x"})
	require.ErrorIs(t, err, control.ErrNotFound)

	res, err = c.Kill(ctx, control.KillRequest{Selector: labels.MustParse("team=ops"), Reason: "ops down"})
	require.NoError(t, err)
	assert.Equal(t, []control.KillResult{{ID: "beta"}}, res, "without Wait, no stage or certificate")
	res, err = c.Kill(ctx, control.KillRequest{Selector: labels.MustParse("team=ops"), Reason: "none left"})
	require.NoError(t, err)
	assert.NotNil(t, res)
	assert.Empty(t, res)

	rel, err := c.Release(ctx, control.ReleaseRequest{ID: "alpha"})
	require.NoError(t, err)
	assert.Equal(t, control.ReleaseResult{ID: "alpha", State: control.StateRunning}, rel, "the state right after the release")
	assert.Equal(t, control.StateRunning, b.Agent("alpha").State)
	_, err = c.Release(ctx, control.ReleaseRequest{ID: "alpha"})
	require.ErrorIs(t, err, control.ErrConflict)
	_, err = c.Release(ctx, control.ReleaseRequest{ID: "nope"})
	require.ErrorIs(t, err, control.ErrNotFound)

	res, err = c.Estop(ctx, control.EstopRequest{Reason: "incident 42", Wait: true})
	require.NoError(t, err)
	assert.Equal(t, []control.KillResult{{ID: "alpha", Reached: "sigterm", Certificate: "/certs/alpha.json"}}, res)
	info, err := c.Info(ctx)
	require.NoError(t, err)
	assert.True(t, info.Estopped)
	rel, err = c.Release(ctx, control.ReleaseRequest{Estop: true})
	require.NoError(t, err)
	assert.Equal(t, control.ReleaseResult{Estop: true}, rel)
	assert.Equal(t, control.StateRunning, b.Agent("alpha").State)
}

func TestBadRequests(t *testing.T) {
	b := fake()
	_, c := serve(t, b, control.ServerOptions{})
	ctx := context.Background()
	for name, req := range map[string]control.KillRequest{
		"no reason":    {ID: "alpha"},
		"blank reason": {ID: "alpha", Reason: " \t\n"},
		"long reason":  {ID: "alpha", Reason: strings.Repeat("x", 5000)},
		"no selection": {Reason: "x"},
		"id and selector": {ID: "alpha", Reason: "x",
			Selector: labels.MustParse("team=research")},
		"id and started_before": {ID: "alpha", Reason: "x", StartedBefore: t0},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := c.Kill(ctx, req)
			require.ErrorIs(t, err, control.ErrBadInput)
			t.Log(err)
		})
	}
	_, err := c.Estop(ctx, control.EstopRequest{})
	require.ErrorIs(t, err, control.ErrBadInput)
	assert.Contains(t, err.Error(), "reason is required")
	_, err = c.Release(ctx, control.ReleaseRequest{})
	require.ErrorIs(t, err, control.ErrBadInput)
	_, err = c.Release(ctx, control.ReleaseRequest{ID: "gamma", Estop: true})
	require.ErrorIs(t, err, control.ErrBadInput)

	assert.Empty(t, b.Calls(), "nothing invalid is audited or acted on")
	assert.Equal(t, control.StateRunning, b.Agent("alpha").State)
}

// TestRawHTTP checks what only a hand-written request can send.
func TestRawHTTP(t *testing.T) {
	b := fake()
	_, c := serve(t, b, control.ServerOptions{})
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", c.Path())
	}}}
	defer hc.CloseIdleConnections()
	do := func(method, path, body string) (int, string) {
		req, err := http.NewRequest(method, "http://x"+path, strings.NewReader(body))
		require.NoError(t, err)
		resp, err := hc.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(data)
	}
	code, body := do("POST", "/v1/kill", `{"id":"alpha","reason":"x","bogus":1}`)
	assert.Equal(t, 400, code)
	assert.Contains(t, body, `"error":`)
	assert.Contains(t, body, "bogus")
	code, _ = do("POST", "/v1/kill", `{"id":"alpha","reason":"x"} {"id":"beta"}`)
	assert.Equal(t, 400, code, "one object only")
	code, _ = do("POST", "/v1/kill", `{"id":"alpha","reason":"`+strings.Repeat("x", 2<<20)+`"}`)
	assert.Equal(t, 413, code)
	// Selectors on the wire: strict, never "match all".
	for _, sel := range []string{`{"":"v"}`, `"team=a,,b=c"`, `"!"`, `"=v"`, `"team=a,team=b"`, `"te am=x"`, `7`, `["team=a"]`} {
		code, body = do("POST", "/v1/kill", `{"reason":"x","selector":`+sel+`}`)
		assert.Equal(t, 400, code, "selector %s: %s", sel, body)
		code, body = do("POST", "/v1/revoke", `{"reason":"x","selector":`+sel+`}`)
		assert.Equal(t, 400, code, "revoke selector %s: %s", sel, body)
	}
	for _, sel := range []string{``, `team=a,,b`, `!`, `te%20am`} {
		code, body = do("GET", "/v1/agents?selector="+sel, "")
		assert.Equal(t, 400, code, "ps selector %q: %s", sel, body)
	}
	code, body = do("POST", "/v1/kill", `{"reason":"x","selector":""}`)
	assert.Equal(t, 400, code, "an empty selector selects nothing: %s", body)
	code, body = do("GET", "/v1/nothing", "")
	assert.Equal(t, 404, code)
	assert.JSONEq(t, `{"error":"no endpoint GET /v1/nothing"}`, body)
	code, body = do("GET", "/v1/kill", "")
	assert.Equal(t, 404, code)
	assert.JSONEq(t, `{"error":"no endpoint GET /v1/kill"}`, body)
	assert.Empty(t, b.Calls())
}

func TestAuditBeforeAct(t *testing.T) {
	b := fake()
	_, c := serve(t, b, control.ServerOptions{})
	ctx := context.Background()
	_, err := c.Kill(ctx, control.KillRequest{ID: "alpha", Reason: "r1"})
	require.NoError(t, err)
	_, err = c.Estop(ctx, control.EstopRequest{Reason: "r2"})
	require.NoError(t, err)
	_, err = c.Release(ctx, control.ReleaseRequest{Estop: true})
	require.NoError(t, err)

	assert.Equal(t, []string{
		"audit POST /v1/kill", "kill",
		"audit POST /v1/estop", "estop",
		"audit POST /v1/release", "release",
	}, b.Calls())
	audits := b.Audits()
	require.Len(t, audits, 3)
	for _, a := range audits {
		assert.Equal(t, os.Getuid(), a.Caller.UID)
		assert.Equal(t, os.Getgid(), a.Caller.GID)
		assert.Equal(t, os.Getpid(), a.Caller.PID, "SO_PEERCRED names this process")
		assert.Equal(t, control.CallerName(os.Getuid()), a.Caller.Name)
	}
	kr, ok := audits[0].Body.(control.KillRequest)
	require.True(t, ok, "%T", audits[0].Body)
	assert.Equal(t, "r1", kr.Reason)
	assert.Equal(t, control.CallerName(os.Getuid()), kr.Operator)
	if os.Getuid() == 0 {
		assert.Equal(t, "uid:0(root)", kr.Operator)
	}
}

func TestEventsStream(t *testing.T) {
	b := fake()
	_, c := serve(t, b, control.ServerOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan control.Event)
	done := make(chan error, 1)
	go func() { done <- c.Events(ctx, func(e control.Event) { got <- e }) }()
	<-b.Subscribed()

	sent := []control.Event{
		{Time: t0, Type: "agent_started", AgentID: "alpha", Message: "started pid 100"},
		{Time: t0.Add(time.Second), Type: "symptom", AgentID: "alpha", Message: "memory warning", Data: map[string]any{"check": "memory"}},
	}
	for _, e := range sent {
		b.Publish(e)
		r := <-got
		assert.True(t, r.Time.Equal(e.Time))
		r.Time = e.Time
		assert.Equal(t, e, r)
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	<-b.Unsubscribed() // the server noticed the client left and cancelled its subscription
}

func TestEventsHeartbeatAndEnd(t *testing.T) {
	b := fake()
	_, c := serve(t, b, control.ServerOptions{EventsHeartbeat: time.Millisecond})
	var n int
	done := make(chan error, 1)
	go func() { done <- c.Events(context.Background(), func(control.Event) { n++ }) }()
	<-b.Subscribed()
	b.Publish(control.Event{Type: "x", Message: "m"})
	b.EndStreams() // heartbeats flow meanwhile; the client skips them
	err := <-done
	require.ErrorIs(t, err, io.EOF, "the daemon ended the stream")
	assert.Equal(t, 1, n)
	<-b.Unsubscribed()
}

// TestKillWaitContext: a waiting kill's context ends when its client goes
// away, and when the server closes.
func TestKillWaitContext(t *testing.T) {
	b := fake()
	started := make(chan struct{}, 1)
	ended := make(chan error, 1)
	b.KillHook = func(ctx context.Context, req control.KillRequest) ([]control.KillResult, error) {
		started <- struct{}{}
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, ctx.Err()
	}
	s, c := serve(t, b, control.ServerOptions{})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Kill(ctx, control.KillRequest{ID: "alpha", Reason: "slow", Wait: true})
		done <- err
	}()
	<-started
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.ErrorIs(t, <-ended, context.Canceled)

	go func() {
		_, err := c.Kill(context.Background(), control.KillRequest{ID: "alpha", Reason: "slow", Wait: true})
		done <- err
	}()
	<-started
	require.NoError(t, s.Close())
	require.ErrorIs(t, <-ended, context.Canceled)
	require.Error(t, <-done)
}

func TestCloseEndsEventStreams(t *testing.T) {
	b := fake()
	s, c := serve(t, b, control.ServerOptions{})
	done := make(chan error, 1)
	go func() { done <- c.Events(context.Background(), func(control.Event) {}) }()
	<-b.Subscribed()
	began := time.Now()
	require.NoError(t, s.Close())
	assert.Less(t, time.Since(began), 4*time.Second, "streams end at once, not after the shutdown grace")
	require.Error(t, <-done)
	<-b.Unsubscribed()
	_, err := os.Stat(c.Path())
	require.ErrorIs(t, err, os.ErrNotExist, "Close removes the socket")
	require.NoError(t, s.Close(), "Close twice")
}

func TestClientNoDaemon(t *testing.T) {
	dir := shortDir(t)
	path := filepath.Join(dir, "control.sock")
	c := control.NewClient(path)
	defer c.Close()
	_, err := c.List(context.Background())
	require.ErrorIs(t, err, control.ErrNoDaemon)
	var nd *control.NoDaemonError
	require.ErrorAs(t, err, &nd)
	assert.Equal(t, path, nd.Path)
	assert.False(t, nd.Refused)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "--control-socket")
	assert.Contains(t, err.Error(), control.EnvSocket)

	staleSocket(t, path)
	err = c.Events(context.Background(), func(control.Event) {})
	require.ErrorIs(t, err, control.ErrNoDaemon)
	require.ErrorAs(t, err, &nd)
	assert.True(t, nd.Refused)
}

func TestSocketPath(t *testing.T) {
	t.Setenv(control.EnvSocket, "")
	assert.Equal(t, control.DefaultSocketPath, control.SocketPath(""))
	t.Setenv(control.EnvSocket, "/env.sock")
	assert.Equal(t, "/env.sock", control.SocketPath(""))
	assert.Equal(t, "/flag.sock", control.SocketPath("/flag.sock"))
}

// staleSocket leaves a socket file at path that nobody listens on.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	require.NoError(t, err)
	ln.SetUnlinkOnClose(false)
	require.NoError(t, ln.Close())
}

func TestStaleSocketReplaced(t *testing.T) {
	path := filepath.Join(shortDir(t), "control.sock")
	staleSocket(t, path)
	_, c := serve(t, fake(), control.ServerOptions{Path: path})
	_, err := c.Info(context.Background())
	require.NoError(t, err)
}

func TestLiveSocketRefused(t *testing.T) {
	path := filepath.Join(shortDir(t), "control.sock")
	// A live listener that is not a hermeskilld (no lock): found by connect.
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	s := control.NewServer(fake(), control.ServerOptions{Path: path})
	err = s.Listen()
	require.ErrorIs(t, err, control.ErrSocketInUse)
	t.Log(err)
	require.NoError(t, s.Close())
	_, err = os.Stat(path)
	require.NoError(t, err, "the live socket is left alone")
	require.NoError(t, ln.Close())

	// A running server: found by its lock, and its socket survives.
	_, c := serve(t, fake(), control.ServerOptions{Path: path})
	s2 := control.NewServer(fake(), control.ServerOptions{Path: path})
	err = s2.Serve(context.Background())
	require.ErrorIs(t, err, control.ErrSocketInUse)
	t.Log(err)
	require.NoError(t, s2.Close())
	_, err = c.Info(context.Background())
	require.NoError(t, err, "the first server still serves")
}

func TestSocketPathChecks(t *testing.T) {
	dir := shortDir(t)
	long := filepath.Join(dir, strings.Repeat("x", 108))
	err := control.NewServer(fake(), control.ServerOptions{Path: long}).Listen()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "at most 107")

	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("keep me"), 0o600))
	err = control.NewServer(fake(), control.ServerOptions{Path: file}).Listen()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a socket")
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "keep me", string(data))

	require.Error(t, control.NewServer(fake(), control.ServerOptions{}).Listen())
}

func TestServeAfterClose(t *testing.T) {
	s := control.NewServer(fake(), control.ServerOptions{Path: filepath.Join(shortDir(t), "c.sock")})
	require.NoError(t, s.Close())
	require.NoError(t, s.Serve(context.Background()))
	err := s.Listen()
	require.Error(t, err)
}

func TestServeStopsWithContext(t *testing.T) {
	path := filepath.Join(shortDir(t), "c.sock")
	s := control.NewServer(fake(), control.ServerOptions{Path: path})
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, s.Listen())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	c := control.NewClient(path)
	defer c.Close()
	_, err := c.Info(context.Background())
	require.NoError(t, err)
	cancel()
	require.NoError(t, <-done)
	_, err = c.Info(context.Background())
	require.ErrorIs(t, err, control.ErrNoDaemon)
}

// nobodyMember is a MemberFunc under which nobody is in any group.
func nobodyMember(int, int, string) (bool, error) { return false, nil }
