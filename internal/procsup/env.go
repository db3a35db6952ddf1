// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup

import (
	"strconv"
	"strings"
	"time"
)

// Variables hermeskilld sets for the agent: its heartbeat socket (under
// its own name and as systemd's NOTIFY_SOCKET), the stream socket beside
// it, its id, and its heartbeat timeout as systemd's watchdog interval.
const (
	EnvSocket   = "HERMESKILL_SOCKET"
	EnvStream   = "HERMESKILL_STREAM_SOCKET"
	EnvAgentID  = "HERMESKILL_AGENT_ID"
	EnvNotify   = "NOTIFY_SOCKET"
	EnvWatchdog = "WATCHDOG_USEC"
)

// OwnSupervisorVar reports whether the environment variable key describes
// this process's relation to its own supervisor (systemd, sd_notify(3) and
// sd_listen_fds(3)): passed on to a child, it would make the child talk to
// that supervisor as if it were us, or claim our listening sockets.
func OwnSupervisorVar(key string) bool {
	switch key {
	case EnvNotify, EnvWatchdog, "WATCHDOG_PID", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES":
		return true
	}
	return false
}

// dropped reports whether an inherited variable stays out of the agent's
// environment: our own supervisor's, and hermeskilld's, which are the
// agent's own supervisor's to set.
func dropped(key string) bool {
	switch key {
	case EnvSocket, EnvStream, EnvAgentID, "HERMESKILL_CONTROL_SOCKET":
		return true
	}
	return OwnSupervisorVar(key)
}

// AgentEnv builds the agent's environment: base (usually ours) without the
// variables above, then extra (the agent file's env), then hermeskilld's
// own variables, which nothing can override: socket, the datagram socket's
// path, and stream, the stream socket's ("" leaves it unset, and unset
// it stays whatever base or extra say).
func AgentEnv(base []string, extra map[string]string, id, socket, stream string, watchdog time.Duration) []string {
	env := make([]string, 0, len(base)+len(extra)+5)
	seen := make(map[string]int, len(base))
	add := func(k, v string) {
		kv := k + "=" + v
		if i, ok := seen[k]; ok {
			env[i] = kv
			return
		}
		seen[k] = len(env)
		env = append(env, kv)
	}
	for _, kv := range base {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || dropped(k) {
			continue
		}
		add(k, v)
	}
	for k, v := range extra {
		if !dropped(k) {
			add(k, v)
		}
	}
	add(EnvSocket, socket)
	add(EnvNotify, socket)
	if stream != "" {
		add(EnvStream, stream)
	}
	add(EnvAgentID, id)
	if watchdog > 0 {
		add(EnvWatchdog, strconv.FormatInt(watchdog.Microseconds(), 10))
	}
	return env
}
