package procsup

import (
	"strconv"
	"strings"
	"time"
)

// Variables hermeskilld sets for the agent (DESIGN §2).
const (
	EnvSocket   = "HERMESKILL_SOCKET"
	EnvAgentID  = "HERMESKILL_AGENT_ID"
	EnvNotify   = "NOTIFY_SOCKET"
	EnvWatchdog = "WATCHDOG_USEC"
)

// inherited variables that describe *our* relation to our own supervisor
// (systemd): passed on they would make the agent talk to systemd as if it
// were us, or claim our listening sockets.
var dropped = map[string]bool{
	EnvSocket: true, EnvAgentID: true, EnvNotify: true, EnvWatchdog: true,
	"WATCHDOG_PID": true, "LISTEN_PID": true, "LISTEN_FDS": true, "LISTEN_FDNAMES": true,
	"HERMESKILL_CONTROL_SOCKET": true,
}

// AgentEnv builds the agent's environment: base (usually ours) without the
// variables above, then extra (the agent file's env), then hermeskilld's
// own variables, which nothing can override.
func AgentEnv(base []string, extra map[string]string, id, socket string, watchdog time.Duration) []string {
	env := make([]string, 0, len(base)+len(extra)+4)
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
		if !ok || dropped[k] {
			continue
		}
		add(k, v)
	}
	for k, v := range extra {
		if !dropped[k] {
			add(k, v)
		}
	}
	add(EnvSocket, socket)
	add(EnvNotify, socket)
	add(EnvAgentID, id)
	if watchdog > 0 {
		add(EnvWatchdog, strconv.FormatInt(watchdog.Microseconds(), 10))
	}
	return env
}
