// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package egress

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseEntries(t *testing.T) {
	for _, s := range []string{"api.github.com:443", "*.pypi.org:443", "203.0.113.7:443", "[2001:db8::1]:443",
		"10.1.0.0/16:5432", "[fd00::/8]:80", "API.GitHub.com.:443", "_svc.example.com:8080"} {
		assert.NoError(t, ParseEntry(s), s)
	}
	for s, want := range map[string]string{
		"api.github.com":       "must be HOST:PORT",
		"api.github.com:0":     "port must be a number from 1 to 65535",
		"api.github.com:65536": "port must be a number from 1 to 65535",
		"api.github.com:https": "port must be a number",
		"2001:db8::1:443":      "written in brackets",
		"[example.com]:443":    "brackets are for IPv6",
		"a.*.example.com:443":  "a wildcard is only the leading label",
		"*:443":                "a wildcard is only the leading label",
		":443":                 "the host is empty",
		"ex ample.com:443":     "not a character of a host name",
		"10.0.0.0/33:443":      "not an address range",
		"a..b:443":             "must be 1 to 63 bytes",
	} {
		err := ParseEntry(s)
		if assert.Error(t, err, s) {
			assert.Contains(t, err.Error(), want, s)
		}
	}
	_, err := Parse([]string{"ok.example:443", "bad"})
	require.ErrorContains(t, err, `allow[1]: "bad": must be HOST:PORT`)
}

// A wildcard matches every name below its domain, at any depth, and not
// the domain itself; names are matched case-insensitively without a
// trailing dot; the port must match; a name entry never matches an IP
// literal, nor an address entry a name.
func TestMatching(t *testing.T) {
	a, err := Parse([]string{"*.example.com:443", "api.github.com:443", "203.0.113.0/24:8443", "[2001:db8::1]:443"})
	require.NoError(t, err)
	for name, want := range map[string]bool{
		"a.example.com": true, "a.b.example.com": true, "example.com": false, "badexample.com": false,
		"api.github.com": true, "x.api.github.com": false, "github.com": false,
	} {
		assert.Equal(t, want, a.nameAllowed(canonicalName(name), 443), name)
	}
	assert.True(t, a.nameAllowed(canonicalName("A.Example.COM."), 443))
	assert.False(t, a.nameAllowed("a.example.com", 80), "the port must match")
	assert.False(t, a.nameAllowed("203.0.113.5", 8443), "a literal is no name")
	assert.True(t, a.addrListed(netip.MustParseAddr("203.0.113.5"), 8443))
	assert.True(t, a.addrListed(netip.MustParseAddr("::ffff:203.0.113.5"), 8443), "a mapped address is its IPv4 one")
	assert.False(t, a.addrListed(netip.MustParseAddr("203.0.113.5"), 443))
	assert.True(t, a.addrListed(netip.MustParseAddr("2001:db8::1"), 443))
	assert.False(t, a.addrListed(netip.MustParseAddr("2001:db8::2"), 443))
}

func TestSpecialRanges(t *testing.T) {
	for _, s := range []string{"127.0.0.1", "127.8.9.10", "10.2.3.4", "172.16.0.1", "172.31.255.255", "192.168.1.1",
		"169.254.169.254", "100.64.0.1", "0.0.0.0", "::1", "fc00::1", "fd00:ec2::254", "fe80::1", "::ffff:127.0.0.1", "::", "224.0.0.1"} {
		_, bad := specialRange(netip.MustParseAddr(s))
		assert.True(t, bad, s)
	}
	for _, s := range []string{"8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "203.0.113.7"} {
		_, bad := specialRange(netip.MustParseAddr(s))
		assert.False(t, bad, s)
	}
}
