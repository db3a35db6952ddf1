// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hermeskill/hermeskilld/internal/config"
)

func TestDirectiveKillReasonAndOperator(t *testing.T) {
	d := Directive{ID: "d7", Action: ActionKill}
	assert.Equal(t, "control plane directive d7", d.KillReason())
	assert.Equal(t, "control-plane", d.KillOperator())
	d.Reason, d.Operator = "runaway spend", "alice@cp"
	assert.Equal(t, "runaway spend", d.KillReason())
	assert.Equal(t, "control-plane:alice@cp", d.KillOperator())
}

type killed struct{ agent, reason, operator string }

// A Link assembled from the daemon file's control_plane delivers
// certificates and hands each kill directive over once, with the reason
// and operator its certificate records, on a context that outlives Run's.
func TestLinkFromConfig(t *testing.T) {
	cp := newControlPlane(t, nil)
	cp.directives["a"] = []Directive{{ID: "d0", Action: ActionRevoke, Reason: "model recalled"},
		{ID: "d1", Action: ActionKill, Reason: "runaway spend", Operator: "alice@cp"}}
	cfg := &config.ControlPlane{URL: cp.url(), PollInterval: 5 * time.Millisecond, Timeout: 2 * time.Second, MaxOutbox: 10}
	state := t.TempDir()
	var stats []Stats
	l, err := FromConfig(cfg, state, zaptest.NewLogger(t), func(s Stats) { stats = append(stats, s) })
	require.NoError(t, err)
	require.NotEmpty(t, stats, "OnStats is the caller's")
	assert.DirExists(t, Dir(state))

	ctx, cancel := context.WithCancel(t.Context())
	kills := make(chan killed, 4)
	revokes := make(chan killed, 4)
	detached := make(chan error, 4)
	done := make(chan error, 1)
	h := &testHost{agents: []string{"a", "b"}, act: func(kctx context.Context, d Directive) Acted {
		k := killed{d.Agents[0], d.KillReason(), d.KillOperator()}
		if d.Action == ActionRevoke {
			revokes <- k
			return Acted{}
		}
		kills <- k
		cancel() // the daemon shuts down while the kill runs
		detached <- kctx.Err()
		return Acted{Failed: []Failure{{AgentID: "a", Error: "agent already gone"}}}
	}}
	go func() { done <- l.Run(ctx, h) }()
	select {
	case k := <-kills:
		assert.Equal(t, killed{"a", "runaway spend", "control-plane:alice@cp"}, k)
	case <-time.After(10 * time.Second):
		t.Fatal("no kill")
	}
	require.NoError(t, <-detached, "the kill's context was cancelled with Run's")
	select {
	case r := <-revokes:
		assert.Equal(t, killed{"a", "model recalled", "control-plane"}, r, "a revoke directive is a standing revocation")
	case <-time.After(10 * time.Second):
		t.Fatal("no revocation")
	}
	require.NoError(t, <-done)
	require.NoError(t, l.Close())
	assert.Empty(t, kills, "a directive is acted on once")
}

// poll_interval 0: certificates only, nobody asks for directives.
func TestLinkWithoutPolling(t *testing.T) {
	cp := newControlPlane(t, nil)
	cp.directives["a"] = []Directive{{ID: "d1", Action: ActionKill}}
	l, err := FromConfig(&config.ControlPlane{URL: cp.url()}, t.TempDir(), zaptest.NewLogger(t), nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	require.NoError(t, l.Run(ctx, &testHost{agents: []string{"a"}, act: func(context.Context, Directive) Acted {
		t.Error("directive acted on")
		return Acted{}
	}}))
	require.NoError(t, l.Close())
	cp.mu.Lock()
	defer cp.mu.Unlock()
	assert.Zero(t, cp.polls["a"])
}

func TestLinkFromConfigError(t *testing.T) {
	_, err := FromConfig(&config.ControlPlane{URL: "ftp://cp.example"}, t.TempDir(), zaptest.NewLogger(t), nil)
	require.ErrorContains(t, err, "control_plane: open outbox")
}

// A token file others can read is refused at start, and says why.
func TestLinkFromConfigRefusesExposedToken(t *testing.T) {
	token := filepath.Join(t.TempDir(), "cp.token")
	require.NoError(t, os.WriteFile(token, []byte("s3cret\n"), 0o644))
	_, err := FromConfig(&config.ControlPlane{URL: "https://cp.example", TokenFile: token}, t.TempDir(), zaptest.NewLogger(t), nil)
	require.ErrorIs(t, err, ErrTokenExposed)
	assert.NotContains(t, err.Error(), "s3cret")

	require.NoError(t, os.Chmod(token, 0o600))
	l, err := FromConfig(&config.ControlPlane{URL: "https://cp.example", TokenFile: token}, t.TempDir(), zaptest.NewLogger(t), nil)
	require.NoError(t, err)
	require.NoError(t, l.Close())
}
