// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// control_plane in an agent file is supervise's: the daemon file's keys,
// defaults and rules.
func TestAgentControlPlaneSupervise(t *testing.T) {
	a, err := ParseAgent([]byte("control_plane: {url: \"https://cp.example/api\", token_file: /etc/hk/cp.token}\n"), "a.yaml", nil)
	require.NoError(t, err)
	require.Equal(t, &ControlPlane{URL: "https://cp.example/api", TokenFile: "/etc/hk/cp.token",
		PollInterval: 10 * time.Second, Timeout: 10 * time.Second, MaxOutbox: 10000}, a.ControlPlane)
	a.Normalize()
	require.NoError(t, a.Validate(false))

	a, err = ParseAgent([]byte("checks: {heartbeat_timeout: 1s}\n"), "a.yaml", nil)
	require.NoError(t, err)
	require.Nil(t, a.ControlPlane, "none unless the file sets one")

	for _, tc := range []struct{ name, file, want string }{
		{"no url", "control_plane:\n  token_file: /x\n", `a.yaml:1: control_plane.url: required`},
		{"http elsewhere", "control_plane: {url: \"http://cp.example/api\"}\n", `a.yaml:1: control_plane.url: "http://cp.example/api": use https (the bearer token would travel in clear text); http is allowed only to localhost`},
		{"token relative", "control_plane: {url: \"https://cp\", token_file: cp.token}\n", `a.yaml:1: control_plane.token_file: "cp.token" must be an absolute path`},
		{"timeout 0", "control_plane:\n  url: https://cp\n  timeout: 0\n", `a.yaml:3: control_plane.timeout: must be above 0`},
		{"max_outbox 0", "control_plane:\n  url: https://cp\n  max_outbox: 0\n", `a.yaml:3: control_plane.max_outbox: must be at least 1`},
		{"fail_closed_after negative", "control_plane:\n  url: https://cp\n  fail_closed_after: -1s\n", `a.yaml:3: control_plane.fail_closed_after: bad duration "-1s": negative`},
		{"fail_closed_after without polling", "control_plane:\n  url: https://cp\n  poll_interval: 0s\n  fail_closed_after: 1m\n", `a.yaml:4: control_plane.fail_closed_after: needs poll_interval above 0: without polling the host never learns whether it reaches its control plane`},
		{"fail_closed_after under two polls", "control_plane:\n  url: https://cp\n  fail_closed_after: 15s\n", `a.yaml:3: control_plane.fail_closed_after: must be at least twice poll_interval (10s): a control plane answering every poll could otherwise trip it`},
		{"unknown key", "control_plane:\n  url: https://cp\n  pol_interval: 1s\n", `a.yaml:3: control_plane: unknown key "pol_interval" (known: url, token_file, poll_interval, timeout, max_outbox, fail_closed_after); did you mean "poll_interval"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseAgent([]byte(tc.file), "a.yaml", nil)
			require.EqualError(t, err, tc.want)
			require.ErrorIs(t, err, ErrInvalid)
		})
	}
}

// Under the daemon (which always passes its defaults) an agent file's
// control_plane is refused at its line; the defaults section cannot set
// one either.
func TestAgentControlPlaneRefusedUnderDaemon(t *testing.T) {
	d, err := ParseDaemon([]byte("{}\n"), "hk.yaml")
	require.NoError(t, err)
	_, err = ParseAgent([]byte("id: bot\ncommand: [x]\ncontrol_plane: {url: \"https://cp.example/api\"}\n"), "bot.yaml", &d.Defaults)
	require.EqualError(t, err, `bot.yaml:3: "control_plane" is for supervise only: under the daemon an agent file cannot set its own; the daemon file's control_plane serves every agent`)
	require.ErrorIs(t, err, ErrUnknownKey)

	_, err = ParseDaemon([]byte("defaults:\n  control_plane: {url: \"https://cp.example/api\"}\n"), "hk.yaml")
	require.ErrorContains(t, err, `hk.yaml:2: defaults: "control_plane" is a key of the daemon file itself, not of defaults: move it to the top level`)
}

// A flag sets one key of control_plane; the others take their defaults,
// as in a file, and Validate applies the same rules.
func TestAgentControlPlaneSet(t *testing.T) {
	a := DefaultAgent()
	require.NoError(t, a.Set("control_plane.token_file", "/run/secrets/cp.token"))
	a.Normalize()
	require.EqualError(t, a.Validate(false), `control_plane.url: required`)
	require.NoError(t, a.Set("control_plane.url", "http://127.0.0.1:8080/api"))
	require.NoError(t, a.Validate(false))
	require.Equal(t, &ControlPlane{URL: "http://127.0.0.1:8080/api", TokenFile: "/run/secrets/cp.token",
		PollInterval: 10 * time.Second, Timeout: 10 * time.Second, MaxOutbox: 10000}, a.ControlPlane)
	require.ErrorContains(t, DefaultAgent().Set("control_plane.url", "http://cp.example"), "use https")

	b := a.Clone()
	b.ControlPlane.URL = "https://other"
	require.Equal(t, "http://127.0.0.1:8080/api", a.ControlPlane.URL, "a clone shares nothing")
	require.Equal(t, []string{"control_plane"}, a.StartDiff(b))
}
