// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/outbox"
	"github.com/hermeskill/hermeskilld/internal/outbox/outboxtest"
)

// newEstopPlane is a control plane on loopback for the daemon (see
// outboxtest): it holds the host's GET /directives until a directive is
// posted, serves a directive until its receipt arrives, records receipts
// and counts kill events.
func newEstopPlane(t *testing.T) *outboxtest.Plane[outbox.Directive] {
	return outboxtest.New(t, func(d outbox.Directive) string { return d.ID })
}

// An e-stop directive from the control plane reaches a daemon of five
// agents through the held long poll and is acknowledged with a receipt
// signed by the certificates' key naming the five certificates, each tree
// empty; the certificates were delivered before it. The same directive
// sent again is acknowledged again, and nothing is killed twice.
func TestDaemonEstopDirectiveReceipt(t *testing.T) {
	t.Parallel()
	m := marker(t)
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	plane := newEstopPlane(t)
	root := shortTemp(t)
	key := filepath.Join(root, "signing.key")
	pubPath, err := certs.GenerateKey(key)
	require.NoError(t, err)
	pub, err := certs.LoadPublicKey(pubPath)
	require.NoError(t, err)
	d := startDaemonIn(t, root, fmt.Sprintf("signing_key: %s\ncontrol_plane: {url: %q, poll_interval: 1s, timeout: 5s}\n", key, plane.URL()))
	const n = 5
	for i := range n {
		id := fmt.Sprintf("e%d", i)
		d.writeAgent(id, sleeper(t, id, m, "checks: {heartbeat_timeout: 0s}\n"))
	}
	require.Eventually(t, func() bool { return len(survivors(m)) == n }, 30*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return plane.HeldNow() == 1 }, 30*time.Second, 5*time.Millisecond, "the daemon's long poll is never held")

	posted := time.Now()
	plane.Post(outbox.Directive{ID: "estop-1", Action: "estop", Reason: "incident 4711", Operator: "alice@cp"})
	raw := plane.AwaitReceipt(t, "estop-1")
	took := time.Since(posted)
	t.Logf("e-stop of %d agents: receipt %s after the directive was posted", n, took)
	assert.Less(t, took, 5*time.Second)
	assert.Empty(t, survivors(m), "acknowledged before the trees were empty")

	require.NoError(t, certs.Verify(raw, pub), "the receipt is signed with the certificates' key")
	var r outbox.Receipt
	require.NoError(t, json.Unmarshal(raw, &r))
	assert.Equal(t, "estop-1", r.DirectiveID)
	assert.Equal(t, "estop", r.Action)
	assert.Empty(t, r.Failed)
	require.Len(t, r.Runs, n)
	var fromReceipt, onDisk []string
	for _, run := range r.Runs {
		assert.True(t, run.TreeEmpty, run.AgentID)
		assert.True(t, run.Revoked, run.AgentID)
		fromReceipt = append(fromReceipt, run.CertID)
		assert.Equal(t, 1, plane.EventsFor(run.CertID), "the certificate %s was not delivered before its receipt", run.CertID)
	}
	for _, c := range d.certs() {
		assert.Equal(t, "manual", c["trigger_type"])
		assert.Equal(t, "control-plane:alice@cp", c["operator"])
		onDisk = append(onDisk, c["cert_id"].(string))
	}
	assert.ElementsMatch(t, onDisk, fromReceipt)
	for id, a := range d.agentsByID() {
		assert.Equal(t, control.StateEstopped, a.State, id)
	}

	// Sent again (the control plane lost the receipt): acknowledged again
	// with the same bytes; no kill, no certificate.
	require.Eventually(t, func() bool { return plane.HeldNow() == 1 }, 10*time.Second, 5*time.Millisecond)
	plane.Post(outbox.Directive{ID: "estop-1", Action: "estop", Reason: "incident 4711", Operator: "alice@cp"})
	assert.Equal(t, raw, plane.AwaitReceipt(t, "estop-1"))
	assert.Len(t, d.certs(), n)
	assert.Equal(t, 1, strings.Count(d.logText(), "E-STOP: stopping every agent"), "the e-stop ran twice")
}

// fail_closed_after: once the control plane is gone (its server closed),
// the daemon stops every agent within fail_closed_after and some slack,
// with certificates that say why, and keeps them down.
func TestDaemonFailsClosedWithoutControlPlane(t *testing.T) {
	t.Parallel()
	m := marker(t)
	t.Cleanup(func() { requireNoSurvivors(t, m) })
	plane := newEstopPlane(t)
	const after = 2 * time.Second
	d := startDaemon(t, fmt.Sprintf("control_plane: {url: %q, poll_interval: 500ms, timeout: 2s, fail_closed_after: %s}\n", plane.URL(), after))
	for _, id := range []string{"f0", "f1"} {
		d.writeAgent(id, sleeper(t, id, m, "checks: {heartbeat_timeout: 0s}\n"))
	}
	require.Eventually(t, func() bool { return len(survivors(m)) == 2 }, 30*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return plane.HeldNow() == 1 }, 30*time.Second, 5*time.Millisecond)

	gone := time.Now()
	plane.Close()
	require.Eventually(t, func() bool { return len(survivors(m)) == 0 }, after+15*time.Second, 20*time.Millisecond)
	took := time.Since(gone)
	t.Logf("fail_closed_after %s: agents dead %s after the control plane went away", after, took)
	assert.GreaterOrEqual(t, took, after-time.Second/2, "stopped before fail_closed_after (less the last contact's age)")
	assert.Less(t, took, after+5*time.Second)
	require.Eventually(t, func() bool { return len(d.certs()) == 2 }, 10*time.Second, 20*time.Millisecond)
	for _, c := range d.certs() {
		assert.Equal(t, "control_plane_unreachable", c["trigger_check"])
		assert.Equal(t, "auto", c["trigger_type"])
		assert.Contains(t, c["trigger_reason"], "control plane unreachable for")
		assert.Contains(t, c["trigger_reason"], "(fail_closed_after 2s)")
	}
	for id, a := range d.agentsByID() {
		assert.Equal(t, control.StateEstopped, a.State, id)
	}
}
