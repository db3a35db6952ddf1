// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every field of Agent is either applied live (WithLive), named by
// StartDiff, or identity: a field added without a decision fails here.
func TestEveryAgentFieldIsLiveOrAtStart(t *testing.T) {
	live := map[string]bool{"Checks": true, "Escalation": true, "Mode": true, "Labels": true, "Restart": true, "AfterKill": true, "OnBudget": true, "PauseTimeout": true}
	atStart := map[string]bool{"Command": true, "User": true, "Env": true, "Cwd": true, "Writable": true, "Network": true, "Allow": true, "Gateway": true, "ControlPlane": true}
	identity := map[string]bool{"ID": true, "Source": true}
	typ := reflect.TypeOf(Agent{})
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		n := 0
		for _, set := range []map[string]bool{live, atStart, identity} {
			if set[name] {
				n++
			}
		}
		require.Equal(t, 1, n, "Agent.%s must be exactly one of live, at start, identity", name)
	}

	old := DefaultAgent()
	old.ID, old.Command, old.User, old.Cwd, old.Env = "bot", []string{"a"}, "bots", "/srv", map[string]string{"A": "1"}
	next := DefaultAgent()
	next.ID, next.Command, next.User, next.Cwd, next.Env = "bot", []string{"b"}, "other", "/srv/", map[string]string{"A": "2"}
	next.Checks.HeartbeatTimeout, next.Mode, next.Labels = time.Second, ModeShadow, map[string]string{"team": "x"}
	got := old.WithLive(next)
	require.Equal(t, []string{"a"}, got.Command, "how it starts stays")
	require.Equal(t, time.Second, got.Checks.HeartbeatTimeout)
	require.Equal(t, ModeShadow, got.Mode)
	require.Equal(t, map[string]string{"team": "x"}, got.Labels)
	require.Equal(t, []string{"command", "user", "env"}, old.StartDiff(next), "cwd /srv and /srv/ are the same")
}
