// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/control"
)

// GET /v1/certs/{id} names certificates as the CLI does (certs.Match):
// the cert_id, else a unique part of the file name, among the files that
// are certificates.
func TestCertLookup(t *testing.T) {
	d, _ := newTestDaemon(t)
	at := time.Date(2026, 12, 2, 10, 15, 3, 0, time.UTC)
	write := func(agent, id string) string {
		c := &certs.Certificate{Schema: certs.Schema, CertID: id, AgentID: agent, Mode: "enforce", TriggeredAt: at}
		at = at.Add(time.Second)
		path, err := certs.Write(d.certsDir, c, nil)
		require.NoError(t, err)
		return path
	}
	short := write("bot", "01aa1")
	long := write("bot", "01aa11")
	ops := write("ops-bot", "02bb22")
	// Not certificates: never named, even by a part of their names.
	require.NoError(t, os.WriteFile(filepath.Join(d.certsDir, "planted_03cc33.json"), []byte("{}"), 0o600))
	require.NoError(t, os.Symlink(ops, filepath.Join(d.certsDir, "link_04dd44.json")))

	for _, tt := range []struct{ ref, path string }{
		{"01aa1", short}, // a cert_id, though a part of another's name
		{"01aa11", long},
		{"02bb", ops}, // a unique part
		{"ops-bot", ops},
	} {
		data, err := d.Cert(tt.ref)
		require.NoError(t, err, tt.ref)
		want, err := os.ReadFile(tt.path)
		require.NoError(t, err)
		require.Equal(t, string(want), string(data), tt.ref)
	}
	for _, ref := range []string{"01aa", "_bot_", "03cc33", "04dd44", "nope"} {
		_, err := d.Cert(ref)
		require.ErrorIs(t, err, control.ErrNotFound, ref)
	}
	for _, ref := range []string{"", "../x", ".hidden"} {
		_, err := d.Cert(ref)
		require.ErrorIs(t, err, control.ErrBadInput, ref)
	}
}
