// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// ProviderVar is true for the credentials, endpoints and account ids the
// official SDKs read, and for the gateway's own names; a framework's or an
// SDK's other settings are not the gateway's.
func TestProviderVar(t *testing.T) {
	replaced := []string{
		"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "OPENAI_ORG_ID", "OPENAI_ORGANIZATION",
		"OPENAI_PROJECT_ID", "OPENAI_ADMIN_KEY", "OPENAI_WEBHOOK_SECRET", "OPENAI_CUSTOM_HEADERS",
		"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_CUSTOM_HEADERS",
		"ANTHROPIC_PROFILE", "ANTHROPIC_CONFIG_DIR", "ANTHROPIC_IDENTITY_TOKEN_FILE", "ANTHROPIC_ORGANIZATION_ID",
		"ANTHROPIC_WORKSPACE_ID", "ANTHROPIC_BEDROCK_BASE_URL", "ANTHROPIC_VERTEX_PROJECT_ID",
		"ANTHROPIC_FOUNDRY_API_KEY", "ANTHROPIC_WEBHOOK_SIGNING_KEY",
		// Read by frameworks and tools on the SDKs: @langchain/anthropic
		// and langchain-anthropic take ANTHROPIC_API_URL before
		// ANTHROPIC_BASE_URL; Codex CLI sends OPENAI_PROJECT as the
		// OpenAI-Project header.
		"ANTHROPIC_API_URL", "OPENAI_PROJECT",
		// By the suffix rule: names no SDK reads today.
		"OPENAI_REALTIME_API_KEY", "ANTHROPIC_SOMECLOUD_BASE_URL", "ANTHROPIC_FUTURE_TOKEN", "OPENAI_X_SECRET",
		// The gateway's own.
		"HERMESKILL_LLM_LOCAL_BASE_URL", "HERMESKILL_LLM_LOCAL_API_KEY", "HERMESKILL_LLM_ANYTHING",
	}
	passed := []string{
		"OPENAI_AGENTS_DISABLE_TRACING", "OPENAI_AGENTS_DONT_LOG_MODEL_DATA", "OPENAI_DEFAULT_MODEL", "OPENAI_LOG",
		"OPENAI_API_VERSION", "OPENAI_API_TYPE", "ANTHROPIC_LOG", "ANTHROPIC_MODEL", "ANTHROPIC_SMALL_FAST_MODEL",
		"ANTHROPIC_OPEN_TELEMETRY", "ANTHROPIC_GOOGLE_CLOUD_LOCATION",
		"OPENAI", "ANTHROPIC", "MY_OPENAI_API_KEY", "openai_api_key", "PATH", "HOME",
		"AZURE_OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", // other providers' and clouds': not the gateway's
		"HERMESKILL_SOCKET", "HERMESKILL_AGENT_ID",
	}
	for _, k := range replaced {
		assert.True(t, ProviderVar(k), "%s is replaced", k)
	}
	for _, k := range passed {
		assert.False(t, ProviderVar(k), "%s passes", k)
	}
	for k := range providerVars {
		assert.True(t, strings.HasPrefix(k, "OPENAI_") || strings.HasPrefix(k, "ANTHROPIC_"), k)
	}
}

// Every variable a grant gives is one ProviderVar names: what the agent
// had of them from elsewhere is always removed before they are added.
func TestGrantEnvIsProviderVars(t *testing.T) {
	ups := []Upstream{{Name: "openai", Style: OpenAI}, {Name: "anthropic", Style: Anthropic},
		{Name: "local-llm", Style: OpenAI}, {Name: "claude-eu", Style: Anthropic}}
	env, err := envFor(ups)
	if !assert.NoError(t, err) {
		return
	}
	for _, e := range env {
		assert.True(t, ProviderVar(e.baseURL), e.baseURL)
		assert.True(t, ProviderVar(e.key), e.key)
	}
}
