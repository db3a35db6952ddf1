// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"testing"
)

// TestMain lets the test binary be the proxy under test of row group 7,
// as the harness's own binary is (it starts os.Executable()).
func TestMain(m *testing.M) {
	maybeServeProxy()
	os.Exit(m.Run())
}
