// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// A run can start sub-agents under a `hermeskilld supervise` of their
// own. That supervise finds its parent's gateway in its environment
// (ParentFromEnv) and forwards through it, with the parent's handle as its
// provider key: the key never enters either run, the parent's gateway
// meters and caps every descendant's traffic as its own, and it counts
// each child's share (RunHeader) for the parent's certificate.
const (
	// EnvRun is the agent id of the run whose grant the environment's
	// base URLs and keys are (Grant.Env sets it).
	EnvRun = "HERMESKILL_LLM_RUN"
	// EnvPrices is the price file of that run's gateway, if it has one.
	EnvPrices = "HERMESKILL_LLM_PRICES"
	// RunHeader names, on a request a child's gateway forwards to its
	// parent's, the child run it is from. The parent's gateway takes it
	// from the request and never forwards it; from an agent's request it
	// is dropped and, on a child's gateway, replaced.
	RunHeader = "X-Hermeskill-Run"
)

// maxRunID bounds the run id RunHeader may carry.
const maxRunID = 128

// childRun is the run RunHeader names, or "" when there is none or it is
// not an id (printable ASCII without spaces, at most maxRunID bytes).
func childRun(r *http.Request) string {
	v := r.Header.Get(RunHeader)
	if v == "" || len(v) > maxRunID {
		return ""
	}
	for _, c := range []byte(v) {
		if c <= ' ' || c > '~' {
			return ""
		}
	}
	return v
}

// ParentFromEnv is the gateway section of a supervise started inside a
// supervised run whose gateway is on (environ has EnvRun): its upstreams
// are the parent's OpenAI-style and Anthropic-style base URLs
// (OPENAI_BASE_URL, ANTHROPIC_BASE_URL), their keys the parent's handle
// (OPENAI_API_KEY, ANTHROPIC_API_KEY), its prices the parent's
// (EnvPrices). ok is false outside such a run. A run id without a base
// URL and its key is an error: fail closed rather than run unmetered.
func ParentFromEnv(environ []string) (g config.Gateway, ok bool, err error) {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	run := env[EnvRun]
	if run == "" {
		return config.Gateway{}, false, nil
	}
	g = config.Gateway{ParentRun: run, Prices: env[EnvPrices], Keys: map[string]string{}}
	for _, p := range []struct {
		name, base, key string
	}{{"openai", "OPENAI_BASE_URL", "OPENAI_API_KEY"}, {"anthropic", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"}} {
		base, key := env[p.base], env[p.key]
		if base == "" {
			continue
		}
		if key == "" {
			return config.Gateway{}, false, fmt.Errorf("parent run %s: %s without %s", run, p.base, p.key)
		}
		g.Upstreams = append(g.Upstreams, p.name+"="+base)
		g.Keys[p.name] = key
	}
	if len(g.Upstreams) == 0 {
		return config.Gateway{}, false, fmt.Errorf("parent run %s (%s) gives no OPENAI_BASE_URL or ANTHROPIC_BASE_URL", run, EnvRun)
	}
	return g, true, nil
}
