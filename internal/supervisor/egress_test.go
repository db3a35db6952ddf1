// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The agent's proxy variables are the proxy's, whatever it had; its own
// loopback goes direct.
func TestProxyEnv(t *testing.T) {
	env := proxyEnv([]string{"PATH=/bin", "https_proxy=http://corp:3128", "NO_PROXY=*", "HTTP_PROXY=x", "HOME=/root"}, "http://127.0.0.1:4242")
	require.Equal(t, []string{"PATH=/bin", "HOME=/root",
		"HTTPS_PROXY=http://127.0.0.1:4242", "HTTP_PROXY=http://127.0.0.1:4242", "ALL_PROXY=http://127.0.0.1:4242",
		"https_proxy=http://127.0.0.1:4242", "http_proxy=http://127.0.0.1:4242", "all_proxy=http://127.0.0.1:4242",
		"NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1"}, env)
}
