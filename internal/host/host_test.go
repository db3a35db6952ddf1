// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestOpenFailsCleanly fails each service Open makes after the audit log
// (which has a goroutine of its own by then): Open returns the service's
// *Error and a nil host, closes what it opened, and panics on none.
func TestOpenFailsCleanly(t *testing.T) {
	dir := t.TempDir()
	loose := filepath.Join(dir, "loose.token")
	require.NoError(t, os.WriteFile(loose, []byte("s3cret\n"), 0o600))
	require.NoError(t, os.Chmod(loose, 0o644))
	badKey := filepath.Join(dir, "bad.key")
	require.NoError(t, os.WriteFile(badKey, []byte("not a key\n"), 0o600))

	for _, tc := range []struct {
		name string
		edit func(*Options)
		want Service
	}{
		{"signing key", func(o *Options) { o.SigningKey = badKey }, Signer},
		{"audit log", func(o *Options) { o.AuditLog = filepath.Join(badKey, "audit.jsonl") }, Audit},
		{"control plane token", func(o *Options) {
			o.ControlPlane = &config.ControlPlane{URL: "http://127.0.0.1:9/api", TokenFile: loose}
		}, ControlPlane},
	} {
		for _, kind := range []Kind{One, Many} {
			t.Run(tc.name, func(t *testing.T) {
				o := Options{Kind: kind, Log: zap.NewNop(), NoProcesses: true, StateDir: t.TempDir(), CertsDir: t.TempDir(),
					AuditLog: filepath.Join(t.TempDir(), "audit.jsonl")}
				tc.edit(&o)
				h, err := Open(o)
				require.Nil(t, h)
				var he *Error
				require.True(t, errors.As(err, &he), "%v", err)
				require.Equal(t, tc.want, he.Service)
			})
		}
	}
}

// TestOpenCloseStart opens a host of each kind with an audit log and a
// control plane, starts and closes it twice over: every goroutine it
// started is gone (goleak).
func TestOpenCloseStart(t *testing.T) {
	for _, kind := range []Kind{One, Many} {
		o := Options{Kind: kind, Log: zap.NewNop(), NoProcesses: true, StateDir: t.TempDir(), CertsDir: t.TempDir(),
			AuditLog: filepath.Join(t.TempDir(), "audit.jsonl"), Metrics: MetricsOptions(0),
			ControlPlane: &config.ControlPlane{URL: "http://127.0.0.1:9/api"}}
		h, err := Open(o)
		require.NoError(t, err)
		require.NoError(t, h.Start(nil))
		require.NoError(t, h.Close())
		require.NoError(t, h.Close())
	}
}

// TestWord words each kind of error: a named service's with its setting,
// another service's as its own error, any other error unchanged.
func TestWord(t *testing.T) {
	base := errors.New("boom")
	settings := map[Service]string{Signer: "--signing-key"}
	require.EqualError(t, Word(&Error{Signer, base}, settings), "--signing-key: boom")
	require.ErrorIs(t, Word(&Error{Signer, base}, settings), base)
	require.Equal(t, base, Word(&Error{Keeper, base}, settings))
	require.Equal(t, base, Word(base, settings))
	require.Nil(t, Word(nil, settings))
}
