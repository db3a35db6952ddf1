// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// FromConfig builds a gateway from a gateway section of an agent or daemon
// file (or supervise's --llm-* flags): each upstream gets the key file its
// name is given in key_files. It does not serve yet. A key file for no
// upstream is an error, as is a bad upstream, key or price file.
func FromConfig(c config.Gateway, log *zap.Logger) (*Gateway, error) {
	cfg := Config{Listen: c.Listen, Log: log, DefaultMaxOutputTokens: c.DefaultMaxOutputTokens,
		UpstreamIdleConns: c.UpstreamIdleConns}
	names := map[string]bool{}
	for _, s := range c.Upstreams {
		u, err := ParseUpstream(s)
		if err != nil {
			return nil, fmt.Errorf("gateway upstream %q: %w", s, err)
		}
		u.KeyFile, u.Key = c.KeyFiles[u.Name], c.Keys[u.Name]
		names[u.Name] = true
		cfg.Upstreams = append(cfg.Upstreams, u)
	}
	for name := range c.KeyFiles {
		if !names[name] {
			return nil, fmt.Errorf("gateway key_files: %q names no upstream", name)
		}
	}
	if c.Prices != "" {
		if abs, err := filepath.Abs(c.Prices); err == nil {
			cfg.PricesFile = abs // given to the agents, who may run elsewhere
		}
		p, err := LoadPrices(c.Prices)
		if err != nil {
			return nil, fmt.Errorf("gateway prices: %w", err)
		}
		cfg.Prices = p
	}
	return New(cfg)
}
