// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package client_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(agentEnv); mode != "" {
		os.Exit(agentMain(mode)) // this binary re-executed as an agent
	}
	goleak.VerifyTestMain(m)
}
