// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package control_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/control/controltest"
	"github.com/hermeskill/hermeskilld/internal/testnobody"
)

// helperEnv names the client operation the re-executed test binary runs
// (as another user) against the socket given as its argument.
const helperEnv = "HK_CONTROL_HELPER"

func TestMain(m *testing.M) {
	if op := os.Getenv(helperEnv); op != "" {
		os.Exit(helper(op, os.Args[1]))
	}
	goleak.VerifyTestMain(m)
}

// helperResult is what the helper prints: the outcome of one client call.
type helperResult struct {
	Kind string `json:"kind"` // ok, forbidden, notfound, badinput, nodaemon, other
	Msg  string `json:"msg"`
	N    int    `json:"n"` // agents listed, agents killed
}

func helper(op, socket string) int {
	c := control.NewClient(socket)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var r helperResult
	var err error
	switch op {
	case "list":
		var l []control.AgentInfo
		l, err = c.List(ctx)
		r.N = len(l)
	case "kill":
		var res []control.KillResult
		res, err = c.Kill(ctx, control.KillRequest{ID: "alpha", Reason: "test", Wait: true})
		r.N = len(res)
	case "logs":
		var b strings.Builder
		err = c.Logs(ctx, "alpha", control.LogsRequest{Tail: -1}, &b)
		r.N = len(b.String())
	case "stop":
		_, err = c.Stop(ctx, control.StopRequest{ID: "alpha", Wait: true})
	case "flood":
		return flood(socket)
	default:
		err = fmt.Errorf("unknown helper op %q", op)
	}
	r.Kind = kindOf(err)
	if err != nil {
		r.Msg = err.Error()
	}
	json.NewEncoder(os.Stdout).Encode(r) //nolint:errcheck // read by the test
	return 0
}

// flood opens floodConns silent connections to socket, prints how many
// were held (N) and how many refused with the server's 503 (Msg), and
// holds them until its stdin closes.
func flood(socket string) int {
	var r helperResult
	var held []net.Conn
	for range floodConns {
		c, err := net.Dial("unix", socket)
		if err != nil {
			r.Kind, r.Msg = "other", err.Error()
			break
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		b := make([]byte, 64)
		n, err := c.Read(b)
		switch {
		case n > 0 && strings.HasPrefix(string(b[:n]), "HTTP/1.1 503"):
			r.Msg += "503 "
			c.Close()
		case errors.Is(err, os.ErrDeadlineExceeded):
			held = append(held, c)
		default:
			r.Msg += fmt.Sprintf("%q/%v ", b[:n], err)
			c.Close()
		}
	}
	r.N = len(held)
	json.NewEncoder(os.Stdout).Encode(r) //nolint:errcheck // read by the test
	io.Copy(io.Discard, os.Stdin)        //nolint:errcheck // until the test lets go
	return 0
}

const floodConns = 6

func kindOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, control.ErrForbidden):
		return "forbidden"
	case errors.Is(err, control.ErrNotFound):
		return "notfound"
	case errors.Is(err, control.ErrBadInput):
		return "badinput"
	case errors.Is(err, control.ErrNoDaemon):
		return "nodaemon"
	default:
		return "other"
	}
}

// shortDir is a temporary directory with a short path (sun_path is 108
// bytes). Sockets other users connect to go in testnobody.Dir.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "hkc")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// serve runs a server of b on a new socket until the test ends, and
// returns it with a client.
func serve(t *testing.T, b control.Backend, opts control.ServerOptions) (*control.Server, *control.Client) {
	t.Helper()
	if opts.Path == "" {
		opts.Path = filepath.Join(shortDir(t), "control.sock")
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
	c := control.NewClient(opts.Path)
	t.Cleanup(c.Close)
	return s, c
}

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// fake is a backend with two running agents and one quarantined.
func fake() *controltest.Backend {
	return controltest.New(control.DaemonInfo{Version: "test", PID: 42, StartedAt: t0, Containment: "cgroup"},
		control.AgentStatus{AgentInfo: control.AgentInfo{ID: "alpha", State: control.StateRunning, PID: 100,
			Labels: map[string]string{"team": "research"}, StartedAt: t0}, Mode: "enforce", Command: []string{"python3", "a.py"}},
		control.AgentStatus{AgentInfo: control.AgentInfo{ID: "beta", State: control.StateRunning, PID: 200,
			Labels: map[string]string{"team": "ops"}, StartedAt: t0.Add(time.Hour)}, Mode: "shadow"},
		control.AgentStatus{AgentInfo: control.AgentInfo{ID: "gamma", State: control.StateQuarantined,
			Note: "killed by uid:0(root)"}, Quarantine: &control.Quarantine{Reason: "looping"}},
	)
}

// asUser runs the helper op as uid/gid 65534 against socket, from bin, a
// copy of the test binary that user may execute (testnobody.Executable).
func asUser(t *testing.T, bin, op, socket string) helperResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, socket)
	// GORACE: a race-enabled binary otherwise sleeps 1s at exit.
	cmd.Env = append(os.Environ(), helperEnv+"="+op, "GORACE=atexit_sleep_ms=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: testnobody.Credential()}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	require.NoError(t, err, "helper %s as 65534", op)
	var r helperResult
	require.NoError(t, json.Unmarshal(out, &r), "helper output %q", out)
	t.Logf("as 65534: %s -> %+v", op, r)
	return r
}
