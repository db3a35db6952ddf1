// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/gateway"
)

func TestParseUpstream(t *testing.T) {
	for _, c := range []struct {
		in   string
		want gateway.Upstream
		err  string
	}{
		{in: "openai=https://api.openai.com/v1/", want: gateway.Upstream{Name: "openai", URL: "https://api.openai.com/v1", Style: gateway.OpenAI}},
		{in: "anthropic=https://api.anthropic.com", want: gateway.Upstream{Name: "anthropic", URL: "https://api.anthropic.com", Style: gateway.Anthropic}},
		{in: "local=http://127.0.0.1:11434/v1,style=openai", want: gateway.Upstream{Name: "local", URL: "http://127.0.0.1:11434/v1", Style: gateway.OpenAI}},
		{in: "openai=http://localhost:8080,style=anthropic", want: gateway.Upstream{Name: "openai", URL: "http://localhost:8080", Style: gateway.Anthropic}},
		{in: "azure=https://x.openai.azure.com/openai/v1", err: "no style"},
		{in: "openai", err: "NAME=URL"},
		{in: "x=https://h,style=gemini", err: `style "gemini"`},
		{in: "x=https://h,region=eu", err: "unknown option"},
		{in: "a/b=https://h,style=openai", err: "name"},
		{in: "=https://h,style=openai", err: "name"},
		{in: "openai=http://api.openai.com/v1", err: "loopback"},
		{in: "openai=ftp://h", err: "https"},
		{in: "openai=https://user:pw@h/v1", err: "user"},
		{in: "openai=https://h/v1?x=1", err: "query"},
		{in: "openai=https:///v1", err: "no host"},
	} {
		got, err := gateway.ParseUpstream(c.in)
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, c.in)
			continue
		}
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
	}
}

func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	key, err := gateway.LoadKey(write("ok", "  sk-abc_DEF-123\n", 0o600))
	require.NoError(t, err)
	assert.Equal(t, "sk-abc_DEF-123", key)
	key, err = gateway.LoadKey(write("ro", "sk-ro", 0o400))
	require.NoError(t, err)
	assert.Equal(t, "sk-ro", key)

	for _, mode := range []os.FileMode{0o640, 0o604, 0o620, 0o644, 0o666} {
		_, err := gateway.LoadKey(write("exposed", "sk-SECRET", mode))
		assert.ErrorIs(t, err, gateway.ErrKeyExposed, "%04o", mode)
		assert.ErrorContains(t, err, "group or others")
		assert.NotContains(t, err.Error(), "SECRET")
	}
	for name, content := range map[string]string{"empty": "", "blank": " \n\n", "two": "sk-a\nsk-b\n", "space": "sk a", "ctl": "sk-\x01"} {
		_, err := gateway.LoadKey(write(name, content, 0o600))
		assert.ErrorIs(t, err, gateway.ErrKeyInvalid, name)
	}
	_, err = gateway.LoadKey(dir)
	assert.ErrorIs(t, err, gateway.ErrKeyInvalid, "a directory")
	_, err = gateway.LoadKey(filepath.Join(dir, "missing"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

const pricesYAML = `# USD per million tokens
models:
  gpt-4.1-mini: {input: 0.40, output: 1.60, cached_input: 0.10}
  "claude-sonnet-4*": {input: 3.00, output: 15.00, cached_input: 0.30}
  "claude-*": {input: 1, output: 5}
  gpt-4o-2024-05-13: {input: 5, output: 15}
  gpt-4o: {input: 2.5, output: 10}
default_price: {input: 5.00, output: 15.00}
`

func TestPrices(t *testing.T) {
	p, err := gateway.ParsePrices([]byte(pricesYAML), "prices.yaml")
	require.NoError(t, err)
	for _, c := range []struct {
		model string
		want  gateway.Price
	}{
		{"gpt-4.1-mini", gateway.Price{Input: 0.40, Output: 1.60, CachedInput: 0.10}},
		{"gpt-4.1-mini-2025-04-14", gateway.Price{Input: 0.40, Output: 1.60, CachedInput: 0.10}},
		{"claude-sonnet-4-20250514", gateway.Price{Input: 3, Output: 15, CachedInput: 0.30}},
		{"claude-haiku-4-5", gateway.Price{Input: 1, Output: 5, CachedInput: 1}},
		{"gpt-4o-2024-05-13", gateway.Price{Input: 5, Output: 15, CachedInput: 5}},
		{"gpt-4o-2024-08-06", gateway.Price{Input: 2.5, Output: 10, CachedInput: 2.5}},
		{"o3", gateway.Price{Input: 5, Output: 15, CachedInput: 5}},
	} {
		got, ok := p.Lookup(c.model)
		assert.True(t, ok, c.model)
		assert.Equal(t, c.want, got, c.model)
	}

	usd, priced := p.Cost("gpt-4.1-mini", 1_000_000, 1_000_000, 250_000)
	assert.True(t, priced)
	assert.InDelta(t, 0.75*0.40+0.25*0.10+1.60, usd, 1e-12)

	noDefault, err := gateway.ParsePrices([]byte("models:\n  gpt-4.1-mini: {input: 1, output: 2}\n"), "p.yaml")
	require.NoError(t, err)
	usd, priced = noDefault.Cost("o3", 100, 100, 0)
	assert.False(t, priced)
	assert.Zero(t, usd)
	var none *gateway.Prices
	_, priced = none.Cost("gpt-4.1-mini", 1, 1, 0)
	assert.False(t, priced, "nil prices nothing")
}

func TestPricesErrorsNameTheLine(t *testing.T) {
	for _, c := range []struct{ yaml, err string }{
		{"models:\n  a: {input: 1}\n", "prices.yaml:2: a price needs input and output"},
		{"models:\n  a: {input: 1, output: -2}\n", "prices.yaml:2: output: -2: want a finite price"},
		{"models:\n  a: {input: 1, output: .nan}\n", `prices.yaml:2: output: ".nan" is not a number`},
		{"models:\n  a: {input: 1, output: cheap}\n", `prices.yaml:2: output: "cheap" is not a number`},
		{"models:\n  a: {input: 1, output: 2, cache: 1}\n", `prices.yaml:2: unknown key "cache"`},
		{"models:\n  a: {input: 1, output: 2}\n  a: {input: 1, output: 2}\n", `prices.yaml:3: "a" is already set on line 2`},
		{"models:\n  a*b: {input: 1, output: 2}\n", "prices.yaml:2: model \"a*b\": '*' only at the end"},
		{"models:\n  \"*\": {input: 1, output: 2}\n", "prices.yaml:2: model \"*\""},
		{"models: [a]\n", "prices.yaml:1: want a mapping"},
		{"model:\n  a: {input: 1, output: 2}\n", `prices.yaml:1: unknown key "model"`},
		{"\n\ndefault_price: 3\n", "prices.yaml:3: want a mapping"},
		{"", "prices.yaml: empty"},
		{"models: {}\n", "prices.yaml: no prices"},
		{"models:\n  a: {input: 1, output: 2\n", "prices.yaml: YAML syntax: line"},
	} {
		_, err := gateway.ParsePrices([]byte(c.yaml), "prices.yaml")
		var pe *gateway.PricesError
		require.True(t, errors.As(err, &pe), "%q: %v", c.yaml, err)
		assert.True(t, strings.HasPrefix(err.Error(), c.err), "%q:\n got %v\nwant %s", c.yaml, err, c.err)
	}
}

func TestLoadPrices(t *testing.T) {
	p := filepath.Join(t.TempDir(), "prices.yaml")
	require.NoError(t, os.WriteFile(p, []byte("models:\n  a: {input: 1}\n"), 0o644))
	_, err := gateway.LoadPrices(p)
	assert.ErrorContains(t, err, p+":2:")
	require.NoError(t, os.WriteFile(p, []byte(pricesYAML), 0o644))
	_, err = gateway.LoadPrices(p)
	require.NoError(t, err)
}

func TestEnv(t *testing.T) {
	up := func(name, url string, style gateway.Style) gateway.Upstream {
		return gateway.Upstream{Name: name, URL: url, Style: style}
	}
	gw, err := gateway.New(gateway.Config{Upstreams: []gateway.Upstream{
		up("local", "http://127.0.0.1:1/v1", gateway.OpenAI),
		up("openai", "https://api.openai.com/v1", gateway.OpenAI),
		up("claude-eu", "https://eu.example.com", gateway.Anthropic),
	}})
	require.NoError(t, err)
	defer gw.Close()
	gr := gw.Grant("a", nil)
	defer gr.Close()
	env := gr.Env()
	handle := strings.TrimPrefix(env[1], "HERMESKILL_LLM_LOCAL_API_KEY=")
	assert.Regexp(t, `^hk-[A-Za-z0-9_-]{43}$`, handle, "hk- and 32 random bytes, base64url")
	base := "http://" + gw.Addr()
	assert.Equal(t, []string{
		"HERMESKILL_LLM_LOCAL_BASE_URL=" + base + "/local", "HERMESKILL_LLM_LOCAL_API_KEY=" + handle,
		"OPENAI_BASE_URL=" + base + "/openai", "OPENAI_API_KEY=" + handle,
		"ANTHROPIC_BASE_URL=" + base + "/claude-eu", "ANTHROPIC_API_KEY=" + handle,
		"HERMESKILL_LLM_RUN=a",
	}, env, "openai is named so; the first anthropic-style upstream is ANTHROPIC_*; then the run, for a sub-agent's supervise")

	other := gw.Grant("b", nil)
	defer other.Close()
	assert.NotEqual(t, env[1], other.Env()[1], "a handle per run")
}
