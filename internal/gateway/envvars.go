// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import "strings"

// providerVars are the variables the official SDKs (openai-python,
// openai-node, openai-go, anthropic-sdk-python, anthropic-sdk-go and the
// clients built on them) read as a credential, as where to send requests,
// or as whose account they are charged to. With the gateway on, an agent
// gets none of them from elsewhere than the gateway: an operator's key
// would let it spend outside the gateway, an endpoint would send it past
// the gateway, an organisation or project id would put the operator's
// account on requests. docs/gateway.md lists them: keep the two in step.
var providerVars = map[string]bool{
	// OpenAI.
	"OPENAI_API_KEY":        true, // the key (every SDK)
	"OPENAI_ADMIN_KEY":      true, // the admin API key (openai-go, openai-node)
	"OPENAI_WEBHOOK_SECRET": true, // webhook signature secret
	"OPENAI_BASE_URL":       true, // the endpoint (v1 SDKs)
	"OPENAI_API_BASE":       true, // the endpoint (openai-python < 1, LangChain)
	"OPENAI_ORG_ID":         true, // OpenAI-Organization header
	"OPENAI_ORGANIZATION":   true, // the same (openai-python < 1, LangChain)
	"OPENAI_PROJECT_ID":     true, // OpenAI-Project header
	"OPENAI_PROJECT":        true, // the same (Codex CLI's built-in provider)
	"OPENAI_CUSTOM_HEADERS": true, // headers on every request (openai-go): may carry a credential

	// Anthropic.
	"ANTHROPIC_API_KEY":                   true, // the key (every SDK)
	"ANTHROPIC_AUTH_TOKEN":                true, // a bearer token instead of the key
	"ANTHROPIC_BASE_URL":                  true, // the endpoint
	"ANTHROPIC_API_URL":                   true, // the endpoint, read before ANTHROPIC_BASE_URL (LangChain's ChatAnthropic)
	"ANTHROPIC_CUSTOM_HEADERS":            true, // headers on every request: may carry a credential
	"ANTHROPIC_WEBHOOK_SIGNING_KEY":       true, // webhook signature secret
	"ANTHROPIC_PROFILE":                   true, // a credentials profile to load
	"ANTHROPIC_CONFIG_DIR":                true, // where profiles and credentials are read from
	"ANTHROPIC_CREDENTIALS_FILE":          true, // a credentials file
	"ANTHROPIC_IDENTITY_TOKEN":            true, // workload identity federation: the token,
	"ANTHROPIC_IDENTITY_TOKEN_FILE":       true, // or the file holding it,
	"ANTHROPIC_FEDERATION_RULE_ID":        true, // and the account it is exchanged for
	"ANTHROPIC_SERVICE_ACCOUNT_ID":        true,
	"ANTHROPIC_ORGANIZATION_ID":           true,
	"ANTHROPIC_WORKSPACE_ID":              true,
	"ANTHROPIC_AWS_API_KEY":               true, // Claude on AWS / Bedrock
	"ANTHROPIC_AWS_BASE_URL":              true,
	"ANTHROPIC_AWS_WORKSPACE_ID":          true,
	"ANTHROPIC_BEDROCK_BASE_URL":          true,
	"ANTHROPIC_BEDROCK_MANTLE_BASE_URL":   true,
	"ANTHROPIC_VERTEX_BASE_URL":           true, // Claude on Google Cloud
	"ANTHROPIC_VERTEX_PROJECT_ID":         true,
	"ANTHROPIC_GOOGLE_CLOUD_BASE_URL":     true,
	"ANTHROPIC_GOOGLE_CLOUD_PROJECT":      true,
	"ANTHROPIC_GOOGLE_CLOUD_WORKSPACE_ID": true,
	"ANTHROPIC_FOUNDRY_API_KEY":           true, // Claude on Microsoft Foundry
	"ANTHROPIC_FOUNDRY_BASE_URL":          true,
	"ANTHROPIC_FOUNDRY_RESOURCE":          true,
}

// credentialSuffixes catch, in the OPENAI_ and ANTHROPIC_ namespaces, a
// credential or endpoint an SDK may read that providerVars does not name
// yet: a name that ends so is one.
var credentialSuffixes = []string{"_KEY", "_TOKEN", "_TOKEN_FILE", "_SECRET", "_BASE_URL", "_API_BASE"}

// ProviderVar reports whether the environment variable name is one the
// gateway replaces: a provider credential, endpoint or account id
// (providerVars, or an OPENAI_ or ANTHROPIC_ name ending in _KEY, _TOKEN,
// _TOKEN_FILE, _SECRET, _BASE_URL or _API_BASE), or any HERMESKILL_LLM_
// variable (the gateway's own names for its other upstreams). With the
// gateway on, the agent gets such a variable only from Grant.Env; every
// other variable, OPENAI_AGENTS_DISABLE_TRACING or ANTHROPIC_LOG say, is
// not the gateway's.
func ProviderVar(name string) bool {
	if providerVars[name] || strings.HasPrefix(name, "HERMESKILL_LLM_") {
		return true
	}
	if !strings.HasPrefix(name, "OPENAI_") && !strings.HasPrefix(name, "ANTHROPIC_") {
		return false
	}
	for _, s := range credentialSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}
