// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestLaunchFloorImportsWhatHermeskilldImports keeps the launch floor
// honest: it must initialise exactly the packages hermeskilld does, no
// fewer (a floor too low) and no more (a floor too high).
func TestLaunchFloorImportsWhatHermeskilldImports(t *testing.T) {
	imports := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	hk, floor := imports("../../cmd/hermeskilld"), imports("./agents/launchfloor")
	for _, p := range hk {
		if !slices.Contains(floor, p) {
			t.Errorf("agents/launchfloor does not import %s, which cmd/hermeskilld imports", p)
		}
	}
	for _, p := range floor {
		if !slices.Contains(hk, p) {
			t.Errorf("agents/launchfloor imports %s, which cmd/hermeskilld does not", p)
		}
	}
}
