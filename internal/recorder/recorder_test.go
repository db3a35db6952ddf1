// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package recorder

import (
	"errors"
	"testing"

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
