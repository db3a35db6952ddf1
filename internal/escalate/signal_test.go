// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package escalate

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// The steps name signals as the configuration does.
func TestSignalNameAsConfig(t *testing.T) {
	for sig := syscall.Signal(-1); sig <= 65; sig++ {
		require.Equal(t, config.SignalName(sig), signalName(sig), "signal %d", int(sig))
	}
}
