// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/hermeskill/hermeskilld/internal/certs"
)

// buildPayload returns the body of the kill event of c (see the package
// comment). raw, the certificate's file, goes in byte for byte (less
// surrounding white space): encoding/json would re-encode a RawMessage.
func buildPayload(c *certs.Certificate, raw []byte) ([]byte, error) {
	if raw == nil {
		var err error
		if raw, err = certs.Marshal(c); err != nil {
			return nil, err
		}
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return nil, fmt.Errorf("%w: raw certificate is not a JSON object", ErrBadCertificate)
	}
	var b bytes.Buffer
	b.WriteByte('{')
	fields := []struct {
		key string
		val any
	}{
		{"trigger_type", c.TriggerType},
		{"trigger_reason", c.TriggerReason},
		{"triggered_at", timeOrNull(c.TriggeredAt)},
		{"terminated_at", timeOrNull(c.TerminatedAt)},
	}
	for _, f := range fields {
		if err := writeField(&b, f.key, f.val); err != nil {
			return nil, err
		}
		b.WriteByte(',')
	}
	b.WriteString(`"death_certificate":`)
	b.Write(raw)
	b.WriteByte(',')
	steps := c.ShutdownLog
	if steps == nil {
		steps = []certs.Step{}
	}
	if err := writeField(&b, "shutdown_log", steps); err != nil {
		return nil, err
	}
	b.WriteString("}\n")
	return b.Bytes(), nil
}

func writeField(b *bytes.Buffer, key string, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(key); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode's "\n"
	b.WriteByte(':')
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	b.Truncate(b.Len() - 1)
	return nil
}

// timeOrNull is t as the certificate writes times: RFC 3339 with
// nanoseconds in UTC, or null when zero (terminated_at in shadow mode).
func timeOrNull(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}

// readItem reads the item file path (named id) and says what it is: a
// kill event (the agent it is about) or a directive receipt (its
// directive).
func readItem(path, id string) (*item, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p struct {
		Schema      string `json:"schema"`
		DirectiveID string `json:"directive_id"`
		Cert        struct {
			AgentID string `json:"agent_id"`
		} `json:"death_certificate"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("not a kill event: %w", err)
	}
	switch {
	case p.Schema == ReceiptSchema && p.DirectiveID != "":
		return &item{id: id, directiveID: p.DirectiveID}, nil
	case p.Cert.AgentID == "":
		return nil, fmt.Errorf("not a kill event: no death_certificate.agent_id")
	}
	return &item{id: id, agentID: p.Cert.AgentID}, nil
}
