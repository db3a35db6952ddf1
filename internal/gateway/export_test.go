// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import "net/http"

// NewTransport is the gateway's upstream transport for cfg, for a bare
// proxy to compare the gateway with on the same settings.
func NewTransport(cfg Config) *http.Transport {
	cfg.setDefaults()
	return newTransport(cfg)
}
