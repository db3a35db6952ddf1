// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/gateway"
)

// Inside a supervised run whose gateway is on, a supervise finds the
// run's base URLs, handle and prices; elsewhere nothing; a run id
// without a usable base URL fails closed.
func TestParentFromEnv(t *testing.T) {
	g, ok, err := gateway.ParentFromEnv([]string{"HERMESKILL_LLM_RUN=parent", "OPENAI_BASE_URL=http://127.0.0.1:9/openai",
		"OPENAI_API_KEY=hk-1", "ANTHROPIC_BASE_URL=http://127.0.0.1:9/anthropic", "ANTHROPIC_API_KEY=hk-1",
		"HERMESKILL_LLM_PRICES=/etc/prices.yaml", "PATH=/bin"})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "parent", g.ParentRun)
	assert.Equal(t, []string{"openai=http://127.0.0.1:9/openai", "anthropic=http://127.0.0.1:9/anthropic"}, g.Upstreams)
	assert.Equal(t, map[string]string{"openai": "hk-1", "anthropic": "hk-1"}, g.Keys)
	assert.Equal(t, "/etc/prices.yaml", g.Prices)

	_, ok, err = gateway.ParentFromEnv([]string{"OPENAI_BASE_URL=https://api.openai.com/v1", "OPENAI_API_KEY=sk-x"})
	require.NoError(t, err)
	assert.False(t, ok, "not inside a gateway run")

	_, _, err = gateway.ParentFromEnv([]string{"HERMESKILL_LLM_RUN=parent"})
	require.ErrorContains(t, err, "parent run parent (HERMESKILL_LLM_RUN) gives no OPENAI_BASE_URL or ANTHROPIC_BASE_URL")
	_, _, err = gateway.ParentFromEnv([]string{"HERMESKILL_LLM_RUN=parent", "OPENAI_BASE_URL=http://127.0.0.1:9/openai"})
	require.ErrorContains(t, err, "parent run parent: OPENAI_BASE_URL without OPENAI_API_KEY")
}
