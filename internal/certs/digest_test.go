// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDigestGolden(t *testing.T) {
	golden(t, "digest.txt", Digest(fullCert(), "/var/lib/hermeskill/certs/research-bot.json"))
}

func TestDigestSpend(t *testing.T) {
	c := fullCert()
	d := string(Digest(c, ""))
	assert.Contains(t, d, "spend: 42 LLM requests, 130000 tokens, $1.3125 metered; the agent reported 123456 tokens, $1.2345\n")
	assert.Contains(t, d, "certificate: "+c.CertID+"\n", "no path: none printed")

	c.Metered = nil
	assert.Contains(t, string(Digest(c, "")), "spend: 123456 tokens, $1.2345 (reported by the agent)\n")

	c.FinalState.Tokens, c.FinalState.CostUSD = 0, 0
	assert.NotContains(t, string(Digest(c, "")), "spend:", "nothing counted: no spend line")

	c.Metered = &Metered{Requests: 1, Tokens: 10, CostUSD: 0.5, UsageUnknown: 1}
	assert.Contains(t, string(Digest(c, "")), "$0.5000 metered (cost incomplete")
}

// An agent chooses its reason (WATCHDOG=trigger, STATUS, an operator's
// words): however long, the digest fits Kubernetes' 4 KiB, is valid
// UTF-8, and keeps the check and the certificate's id.
func TestDigestBoundedWhateverTheReason(t *testing.T) {
	for _, reason := range []string{
		strings.Repeat("x", 10000),
		strings.Repeat("é", 5000),
		strings.Repeat("\x1b[2J", 3000),
		strings.Repeat("🔥", 3000),
	} {
		c := fullCert()
		c.TriggerCheck, c.TriggerReason = "self_reported", reason
		op, opReason := strings.Repeat("o", 5000), reason
		c.Operator, c.OperatorReason = &op, &opReason
		for _, tt := range []string{TriggerAuto, TriggerManual} {
			c.TriggerType = tt
			d := Digest(c, strings.Repeat("/p", 1000))
			require.LessOrEqual(t, len(d), DigestMax)
			require.True(t, utf8.Valid(d))
			assert.Contains(t, string(d), "certificate: "+c.CertID)
			assert.NotContains(t, string(d), "\x1b", "terminal escapes are made inert")
			if tt == TriggerAuto {
				assert.Contains(t, string(d), "self_reported")
			}
		}
	}
}

func TestCut(t *testing.T) {
	assert.Equal(t, "abc", cut("abc", 3))
	assert.Equal(t, "a…", cut("abcdef", 4))
	assert.Equal(t, "…", cut("éééé", 4), "never half a rune")
	assert.Equal(t, "", cut("abcdef", 2))
}
