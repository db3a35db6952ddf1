// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package control_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/testnobody"
)

// Stop, start and restart reach the backend with the caller as operator,
// audited before they are acted on; their errors keep their kinds.
func TestLifecycleEndpoints(t *testing.T) {
	b := fake()
	_, c := serve(t, b, control.ServerOptions{})
	ctx := context.Background()
	me := control.CallerName(testUID())

	res, err := c.Stop(ctx, control.StopRequest{ID: "alpha", Reason: "maintenance", Wait: true, Operator: "forged"})
	require.NoError(t, err)
	assert.Equal(t, control.ActionResult{ID: "alpha", Stopped: true, Reached: "sigterm", Certificate: "/certs/alpha.json",
		State: control.StateExited, Note: "stopped by " + me}, res, "the operator is the caller, never the body's")
	_, err = c.Stop(ctx, control.StopRequest{ID: "alpha"})
	require.ErrorIs(t, err, control.ErrConflict)
	_, err = c.Stop(ctx, control.StopRequest{ID: "nope"})
	require.ErrorIs(t, err, control.ErrNotFound)

	res, err = c.Start(ctx, control.StartRequest{ID: "alpha"})
	require.NoError(t, err)
	assert.Equal(t, control.StateRunning, res.State)
	assert.NotZero(t, res.PID)
	assert.False(t, res.StartedAt.IsZero())
	_, err = c.Start(ctx, control.StartRequest{ID: "alpha"})
	require.ErrorIs(t, err, control.ErrConflict, "already running")
	_, err = c.Start(ctx, control.StartRequest{ID: "gamma"})
	require.ErrorIs(t, err, control.ErrConflict, "quarantined: release, not start")

	pid := res.PID
	res, err = c.Restart(ctx, control.RestartRequest{ID: "alpha", Reason: "new model"})
	require.NoError(t, err)
	assert.True(t, res.Stopped)
	assert.NotEqual(t, pid, res.PID)

	for _, bad := range []func() error{
		func() error { _, err := c.Stop(ctx, control.StopRequest{}); return err },
		func() error { _, err := c.Start(ctx, control.StartRequest{}); return err },
		func() error { _, err := c.Restart(ctx, control.RestartRequest{}); return err },
		func() error {
			_, err := c.Stop(ctx, control.StopRequest{ID: "alpha", Reason: strings.Repeat("x", 5000)})
			return err
		},
	} {
		require.ErrorIs(t, bad(), control.ErrBadInput)
	}

	assert.Equal(t, []string{
		"audit POST /v1/stop", "stop", "audit POST /v1/stop", "stop", "audit POST /v1/stop", "stop",
		"audit POST /v1/start", "start", "audit POST /v1/start", "start", "audit POST /v1/start", "start",
		"audit POST /v1/restart", "restart",
	}, b.Calls(), "every request is audited before it is acted on; invalid ones are neither")
	audits := b.Audits()
	sr, ok := audits[0].Body.(control.StopRequest)
	require.True(t, ok, "%T", audits[0].Body)
	assert.Equal(t, me, sr.Operator)
	assert.Equal(t, "maintenance", sr.Reason)
}

func testUID() int { return os.Getuid() }

// The log endpoint: a tail by lines, everything by default, bytes as they
// are; a follower gets what is written later until it leaves.
func TestLogsEndpoint(t *testing.T) {
	b := fake()
	_, c := serve(t, b, control.ServerOptions{})
	ctx := context.Background()
	b.AppendLog("alpha", []byte("one\ntwo\x1b[2J\nthree\n"))

	var out bytes.Buffer
	require.NoError(t, c.Logs(ctx, "alpha", control.LogsRequest{Tail: -1}, &out))
	assert.Equal(t, "one\ntwo\x1b[2J\nthree\n", out.String(), "the API serves the bytes unchanged")
	out.Reset()
	require.NoError(t, c.Logs(ctx, "alpha", control.LogsRequest{Tail: 2}, &out))
	assert.Equal(t, "two\x1b[2J\nthree\n", out.String())
	out.Reset()
	require.NoError(t, c.Logs(ctx, "alpha", control.LogsRequest{Tail: 0}, &out))
	assert.Empty(t, out.String())
	out.Reset()
	require.NoError(t, c.Logs(ctx, "beta", control.LogsRequest{Tail: -1}, &out), "no output yet: an empty log")
	assert.Empty(t, out.String())
	require.ErrorIs(t, c.Logs(ctx, "nope", control.LogsRequest{Tail: -1}, &out), control.ErrNotFound)

	// Follow: the tail, then what comes, until the client leaves.
	fctx, cancel := context.WithCancel(ctx)
	fw := &lockedWriter{}
	done := make(chan error, 1)
	go func() { done <- c.Logs(fctx, "alpha", control.LogsRequest{Tail: 1, Follow: true}, fw) }()
	require.Eventually(t, func() bool { return fw.String() == "three\n" }, 10*time.Second, 5*time.Millisecond)
	b.AppendLog("alpha", []byte("four\n"))
	require.Eventually(t, func() bool { return fw.String() == "three\nfour\n" }, 10*time.Second, 5*time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	// A writer that fails ends the copy with its error.
	wantErr := errors.New("stdout closed")
	err := c.Logs(ctx, "alpha", control.LogsRequest{Tail: -1}, failingWriter{wantErr})
	require.ErrorIs(t, err, wantErr)
}

// The raw API: bad query values are 400; the body is text.
func TestLogsRawHTTP(t *testing.T) {
	b := fake()
	b.AppendLog("alpha", []byte("a\nb\n"))
	_, c := serve(t, b, control.ServerOptions{})
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", c.Path())
	}}}
	defer hc.CloseIdleConnections()
	get := func(path string) (int, string, string) {
		resp, err := hc.Get("http://x" + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
	}
	code, ctype, body := get("/v1/agents/alpha/logs?tail=1")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "text/plain; charset=utf-8", ctype)
	assert.Equal(t, "b\n", body)
	code, _, body = get("/v1/agents/alpha/logs?tail=all")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "a\nb\n", body)
	for _, q := range []string{"tail=-1", "tail=x", "follow=maybe"} {
		code, _, body = get("/v1/agents/alpha/logs?" + q)
		assert.Equal(t, http.StatusBadRequest, code, q)
		var eb struct{ Error string }
		require.NoError(t, json.Unmarshal([]byte(body), &eb), q)
		assert.Contains(t, eb.Error, "bad request", q)
	}
	resp, err := hc.Post("http://x/v1/release", "application/json", strings.NewReader(`{"id":"gamma"}`))
	require.NoError(t, err)
	body2, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.JSONEq(t, `{"id":"gamma","state":"running"}`, string(body2), "release answers with the agent's state")
}

// A read-group member may read logs, not stop agents: as uid 65534 (a
// real other user, seen through SO_PEERCRED) when the test runs as root,
// else as this user, whom the membership function puts in the read group.
func TestLogsAndStopAuthorization(t *testing.T) {
	b := fake()
	b.AppendLog("alpha", []byte("hello\n"))
	if os.Getuid() == 0 {
		bin := testnobody.Executable(t)
		group := nobodyGroup(t)
		c := serveNobody(t, b, control.ServerOptions{ReadGroup: group, OperatorsGroup: "hk-ops"})
		r := asUser(t, bin, "logs", c.Path())
		assert.Equal(t, "ok", r.Kind, r.Msg)
		assert.Equal(t, len("hello\n"), r.N)
		r = asUser(t, bin, "stop", c.Path())
		assert.Equal(t, "forbidden", r.Kind)
		assert.Contains(t, r.Msg, "stopping agents requires root or membership of group hk-ops")
	} else {
		readers := func(_, _ int, group string) (bool, error) { return group == "hk-read", nil }
		_, c := serve(t, b, control.ServerOptions{ReadGroup: "hk-read", OperatorsGroup: "hk-ops", Member: readers})
		var out bytes.Buffer
		require.NoError(t, c.Logs(context.Background(), "alpha", control.LogsRequest{Tail: -1}, &out))
		assert.Equal(t, "hello\n", out.String())
		_, err := c.Stop(context.Background(), control.StopRequest{ID: "alpha"})
		require.ErrorIs(t, err, control.ErrForbidden)
		assert.Contains(t, err.Error(), "stopping agents requires root or membership of group hk-ops")
	}
	assert.Empty(t, b.Calls(), "a refused stop is neither audited nor acted on")
}

type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }
