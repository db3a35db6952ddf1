// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package recorder

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

type outbox struct{ ids []string }

func (o *outbox) Enqueue(c *certs.Certificate, raw []byte) error {
	o.ids = append(o.ids, c.CertID)
	return nil
}

func TestCertificatesReachTheOutboxEvenWhenNotWritten(t *testing.T) {
	o := &outbox{}
	var streamed []string
	r := &Recorder{Outbox: o, Stream: func(ev supervisor.Event) { streamed = append(streamed, ev.Type) }}
	c := &certs.Certificate{Schema: certs.Schema, CertID: "c1", AgentID: "a"}
	r.Event(supervisor.Event{Type: supervisor.EventCertificate, Cert: c, CertPath: "/x"})
	c2 := &certs.Certificate{Schema: certs.Schema, CertID: "c2", AgentID: "a"}
	r.Event(supervisor.Event{Type: supervisor.EventCertFailed, Cert: c2, Err: errors.New("disk full")})
	r.Event(supervisor.Event{Type: supervisor.EventSymptom, Symptom: &symptoms.Symptom{Check: symptoms.Cost}})
	require.Equal(t, []string{"c1", "c2"}, o.ids)
	require.Len(t, streamed, 3)
}

func TestAuditEvent(t *testing.T) {
	ev := AuditEvent(supervisor.Event{Type: supervisor.EventCertificate, AgentID: "a", PID: 7,
		Cert: &certs.Certificate{CertID: "c1", TriggerCheck: "cost"}, CertPath: "/p"})
	require.Equal(t, "certificate_written", ev.Type)
	require.True(t, ev.Sync, "certificate-level events are fsynced")
	data := ev.Data.(map[string]any)
	require.Equal(t, "c1", data["cert_id"])
	require.Equal(t, "/p", data["path"])
	require.Equal(t, 7, data["pid"])
	require.False(t, AuditEvent(supervisor.Event{Type: supervisor.EventSymptom}).Sync)
	require.Equal(t, "symptom", AuditEvent(supervisor.Event{Type: supervisor.EventSymptom}).Type)
}

// TestAuditEventExitedUsage: a run's end carries its totals.
func TestAuditEventExitedUsage(t *testing.T) {
	u := &supervisor.Usage{Tokens: 5500, CostUSD: 0.6, Metered: &supervisor.MeteredUsage{Requests: 5, Tokens: 5500, CostUSD: 0.6, CostKnown: true}}
	ev := AuditEvent(supervisor.Event{Type: supervisor.EventExited, AgentID: "a", Usage: u, Runtime: 1500 * time.Millisecond})
	data := ev.Data.(map[string]any)
	require.Same(t, u, data["usage"])
	require.Equal(t, 1.5, data["runtime_s"])
	raw, err := json.Marshal(data["usage"])
	require.NoError(t, err)
	require.JSONEq(t, `{"tokens": 5500, "cost_usd": 0.6, "reported_tokens": 0, "reported_cost_usd": 0,
		"metered": {"requests": 5, "in_flight": 0, "refused": 0, "errors": 0, "tokens": 5500, "cost_usd": 0.6, "cost_known": true}}`, string(raw))
}
