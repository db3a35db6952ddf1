// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// agentFlags are supervise's flags that set one key of an agent file:
// given on the command line, a flag wins over --config key by key
// (--max-rss sets memory.kill and keeps the file's memory.warn). The
// value is parsed by the config package, as the same key in a file is.
var agentFlags = []struct{ name, key, typ, usage string }{
	{"heartbeat-timeout", "checks.heartbeat_timeout", "duration", "kill when no heartbeat (WATCHDOG=1) arrives for this long"},
	{"startup-timeout", "checks.startup_timeout", "duration", "kill when no READY=1 or heartbeat arrives this long after start (default: --heartbeat-timeout, at least " + config.FormatDuration(config.StartupFloor) + ")"},
	{"progress-timeout", "checks.progress_timeout", "duration", "kill when PROGRESS has not increased for this long"},
	{"max-runtime", "checks.max_runtime", "duration", "kill after this much wall-clock time"},
	{"max-extension", "checks.max_extension", "duration", "how far EXTEND_TIMEOUT_USEC (a declared long wait) may push a deadline, in a row"},
	{"max-rss", "checks.memory.kill", "size", "kill when the tree's resident memory stays over this size"},
	{"max-cpu", "checks.cpu_spin.percent", "number", "kill when the tree's CPU stays over this percent of one core for --cpu-for"},
	{"cpu-for", "checks.cpu_spin.for", "duration", "how long --max-cpu must hold"},
	{"max-procs", "checks.procs.kill", "int", "kill when the tree has more tasks (processes and threads)"},
	{"max-fds", "checks.fds.kill", "int", "kill when the tree has more open file descriptors"},
	{"max-tokens", "checks.tokens.kill", "int", "kill when TOKENS go over this (metered ones with the LLM gateway)"},
	{"max-cost", "checks.cost.kill", "number", "kill when COST_USD goes over this (USD; metered with the LLM gateway)"},
	{"max-cost-rate", "checks.cost_rate", "usd/duration", "kill when the spend within a sliding window goes over USD, such as 0.50/1m (metered with the LLM gateway, else the increases of COST_USD)"},
	{"max-requests-rate", "checks.requests_rate", "n/duration", "kill when more than N LLM requests reach the gateway within a sliding window, such as 30/1m (without it: usage reports)"},
	{"max-tokens-rate", "checks.tokens_rate", "n/duration", "kill when the tokens within a sliding window go over N, such as 100000/1m (metered with the LLM gateway, else the increases of TOKENS)"},
	{"on-budget", "on_budget", "kill|pause", "what the money checks' kill thresholds (--max-cost, --max-tokens) do: kill (default), or pause: hold the LLM requests and freeze the tree until hermeskilld resume ID raises the budget"},
	{"pause-timeout", "pause_timeout", "duration", "kill a pause not resumed within this (default 1h)"},
	{"tool-loop", "checks.tool_loop.repeats", "int", "kill when the same tool call, or cycle of 2-3 calls, repeats this many times"},
	{"error-streak", "checks.error_streak.kill", "int", "kill after this many ERRORs without progress"},
	{"max-steps", "checks.steps.kill", "int", "kill when PROGRESS goes over this"},
	{"max-denials", "checks.denials.kill", "int", "kill after this many accesses refused by the agent's confinement (writes outside writable:, signals out of its domain; counted from the kernel's audit log, which must be on)"},
	{"network", "network", "host|gateway-only|allowlist", "the agent's network: host (default), gateway-only (a namespace of its own with only loopback: the LLM gateway), allowlist (the same, plus an egress proxy to the --allow destinations); outside host needs root"},
	{"max-egress-refusals", "checks.egress.refusals", "int", "kill when the egress proxy refused more requests than this (network: allowlist)"},
	{"max-egress-bytes", "checks.egress.bytes", "size", "kill when the egress proxy passed more bytes than this, both ways (network: allowlist)"},
	{"coop-signal", "escalation.coop_signal", "signal", "signal for the cooperative stop, or none"},
	{"coop-grace", "escalation.coop_grace", "duration", "wait after the cooperative stop"},
	{"ack-wait", "escalation.ack_wait", "duration", "wait for the client to acknowledge STOP before sending --coop-signal"},
	{"term-grace", "escalation.term_grace", "duration", "wait after SIGTERM before SIGKILL"},
	{"sample-interval", "checks.sample_interval", "duration", "how often kernel metrics are sampled"},
}

// agentFlag holds one flag's text. It is checked when parsed (a bad value
// is refused with the flag's name), and shows the default an agent file
// starts from in --help.
type agentFlag struct {
	key, typ, def, text string
}

func (v *agentFlag) String() string {
	if v.text != "" {
		return v.text
	}
	return v.def
}

func (v *agentFlag) Set(s string) error {
	if err := config.DefaultAgent().Set(v.key, s); err != nil {
		return err
	}
	v.text = s
	return nil
}

func (v *agentFlag) Type() string { return v.typ }

// addAgentFlags defines agentFlags on fl; apply sets the ones given.
func addAgentFlags(fl *pflag.FlagSet) (apply func(a *config.Agent) error) {
	defaults := map[string]string{}
	def := config.DefaultAgent()
	for _, kv := range def.Checks.Describe() {
		defaults["checks."+kv.Key] = kv.Value
	}
	for _, kv := range def.Escalation.Describe() {
		defaults["escalation."+kv.Key] = kv.Value
	}
	values := make([]*agentFlag, len(agentFlags))
	for i, f := range agentFlags {
		values[i] = &agentFlag{key: f.key, typ: f.typ, def: defaults[f.key]}
		fl.Var(values[i], f.name, f.usage)
	}
	return func(a *config.Agent) error {
		for i, f := range agentFlags {
			if !fl.Changed(f.name) {
				continue
			}
			if err := a.Set(f.key, values[i].text); err != nil {
				return fmt.Errorf("--%s: %w", f.name, err)
			}
		}
		return nil
	}
}

// applyGatewayFlags sets the gateway section from --llm-* flags: the
// upstreams given replace the file's, key files and prices are set over
// it.
func (f *superviseFlags) applyGatewayFlags(g *config.Gateway) error {
	if len(f.llmUpstreams) > 0 {
		g.Upstreams = f.llmUpstreams
	}
	for _, kv := range f.llmKeyFiles {
		name, path, ok := strings.Cut(kv, "=")
		if !ok || name == "" || path == "" {
			return fmt.Errorf("--llm-key-file %q: want NAME=PATH", kv)
		}
		if g.KeyFiles == nil {
			g.KeyFiles = map[string]string{}
		}
		g.KeyFiles[name] = path
	}
	if f.llmPrices != "" {
		g.Prices = f.llmPrices
	}
	return nil
}
