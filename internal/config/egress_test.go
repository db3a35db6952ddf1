// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAllowlistAndEgressCheck(t *testing.T) {
	a, err := ParseAgent([]byte("network: allowlist\nallow:\n  - api.github.com:443\n  - \"*.pypi.org:443\"\n"+
		"checks:\n  egress: {refusals: 20, refusals_warn: 5, bytes: 1GiB, per: 1m}\n"), "agent.yaml", nil)
	require.NoError(t, err)
	require.Equal(t, NetworkAllowlist, a.Network)
	require.Equal(t, []string{"api.github.com:443", "*.pypi.org:443"}, a.Allow)
	require.Equal(t, &Egress{Refusals: 20, RefusalsWarn: 5, Bytes: 1 << 30, Per: time.Minute}, a.Checks.Egress)
	require.Contains(t, a.Checks.Describe(), KV{Key: "egress", Value: "refusals warn 5, kill 20; bytes kill 1GiB per 1m"})

	for _, tc := range []struct{ name, yaml, err string }{
		{"bad entry", "network: allowlist\nallow:\n  - api.github.com:443\n  - api.github.com\n",
			`agent.yaml:4: allow: "api.github.com": must be HOST:PORT, such as api.github.com:443 or *.pypi.org:443`},
		{"bad port", "network: allowlist\nallow: [\"x.example:99999\"]\n",
			`agent.yaml:2: allow: "x.example:99999": the port must be a number from 1 to 65535, got "99999"`},
		{"no allow", "network: allowlist\n",
			`agent.yaml:1: allow: required with network: allowlist: the destinations the agent may reach, such as [api.github.com:443, "*.pypi.org:443"]`},
		{"empty allow", "network: allowlist\nallow: []\n",
			`agent.yaml:2: allow: must not be empty: name the destinations the agent may reach (network: gateway-only reaches none)`},
		{"allow a string", "network: allowlist\nallow: api.github.com:443\n",
			`agent.yaml:2: allow: must be a list of HOST:PORT destinations such as [api.github.com:443, "*.pypi.org:443"], got string "api.github.com:443"`},
		{"allow without allowlist", "network: gateway-only\nallow: [api.github.com:443]\n",
			`agent.yaml:2: allow: is only for network: allowlist (network is gateway-only)`},
		{"unknown mode", "network: open\n", `agent.yaml:1: network: must be one of host, gateway-only, allowlist, got "open"`},
		{"egress warn above kill", "checks:\n  egress: {refusals: 5, refusals_warn: 6}\n", `agent.yaml:2: checks.egress: refusals_warn 6 is above refusals 5`},
		{"egress short per", "checks:\n  egress: {bytes: 1MiB, per: 10ms}\n", `agent.yaml:2: checks.egress.per: must be at least 1s, got 10ms`},
		{"egress bytes size", "checks:\n  egress: {bytes: 2Gb}\n", `agent.yaml:2: checks.egress.bytes: bad size "2Gb": unknown unit "Gb" (want ` + sizeForms + `)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseAgent([]byte(tc.yaml), "agent.yaml", nil)
			require.EqualError(t, err, tc.err)
		})
	}
	// From flags, as supervise sets them.
	f := DefaultAgent()
	require.NoError(t, f.Set("checks.egress.refusals", "3"))
	require.NoError(t, f.Set("checks.egress.bytes", "10MiB"))
	require.Equal(t, &Egress{Refusals: 3, Bytes: 10 << 20}, f.Checks.Egress)
}
