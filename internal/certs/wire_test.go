// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/escalate"
)

// sparseCert has every field a certificate may leave empty left empty, and
// its times in a zone other than UTC: the cases where the written JSON
// differs from what encoding/json would make of the struct by itself.
func sparseCert() *Certificate {
	cet := time.FixedZone("CET", 3600)
	return &Certificate{
		Schema:        Schema,
		CertID:        "0193d5d8-7c4b-7a3e-9f21-0c5b1e2d3f41",
		AgentID:       "shadow-bot",
		Mode:          ModeShadow,
		StartedAt:     time.Date(2026, 12, 2, 10, 0, 0, 5, cet),
		TriggeredAt:   time.Date(2026, 12, 2, 11, 30, 0, 0, cet),
		TriggerType:   TriggerAuto,
		TriggerCheck:  "memory",
		TriggerReason: "rss > 1GiB & <rising>",
		Exit:          Exit{Code: ptr(0)},
		SymptomsLog:   []Symptom{{Check: "memory", Severity: SeverityTerminal}},
		ShutdownLog:   []Step{{Step: escalate.StepMainExited}},
		Metered:       &Metered{Requests: 1, UsageUnknown: 1},
		InternalError: &InternalError{Component: "ladder", Panic: "boom", Stack: "goroutine 1 [running]:\n"},
	}
}

// TestWireGolden pins the bytes of a certificate, as its file (Marshal) and
// as json.Marshal writes it (compact, HTML escaped), to files written before
// the wire form was last restructured. The full certificate's file is
// TestMarshalGolden's.
func TestWireGolden(t *testing.T) {
	for name, c := range map[string]*Certificate{"full": fullCert(), "sparse": sparseCert()} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, testSigner(t).Sign(c))
			if name != "full" {
				file, err := Marshal(c)
				require.NoError(t, err)
				golden(t, name+".golden.json", file)
			}
			compact, err := json.Marshal(c)
			require.NoError(t, err)
			golden(t, name+".compact.golden.json", compact)
		})
	}
}

// TestWireGoldenRoundTrip reads the golden files back: each still verifies
// with the key that signed it, and parsing then marshalling gives the same
// bytes.
func TestWireGoldenRoundTrip(t *testing.T) {
	pub := testSigner(t).Public()
	for _, name := range []string{"full.golden.json", "sparse.golden.json"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", name))
			require.NoError(t, err)
			require.NoError(t, Verify(data, pub), "a certificate signed before still verifies")
			c, err := Parse(data)
			require.NoError(t, err)
			again, err := Marshal(c)
			require.NoError(t, err)
			assert.Equal(t, string(data), string(again))
			sig := *c.Signature
			require.NoError(t, testSigner(t).Sign(c))
			assert.Equal(t, sig, *c.Signature, "re-signing the parsed certificate gives the same signature")
		})
	}
}
