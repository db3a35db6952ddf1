// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// The version without -ldflags: what the toolchain recorded, with the
// revision when the version does not name it already.
func TestBuildVersion(t *testing.T) {
	const rev = "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tc := range []struct {
		name     string
		version  string
		settings []debug.BuildSetting
		want     string
	}{
		{"go install @v1.2.0", "v1.2.0", nil, "v1.2.0"},
		{"checkout, -buildvcs=false", "(devel)", nil, "(devel)"},
		{"no version recorded", "", nil, "(devel)"},
		{"checkout, clean", "(devel)", vcs("false"), "(devel) vcs 1a2b3c4"},
		{"checkout, modified", "(devel)", vcs("true"), "(devel) vcs 1a2b3c4 (modified)"},
		{"pseudo-version names the revision", "v0.0.0-20261202101503-1a2b3c4d5e6f+dirty", vcs("true"), "v0.0.0-20261202101503-1a2b3c4d5e6f+dirty"},
		{"tag in a checkout", "v1.2.0", vcs("false"), "v1.2.0 vcs 1a2b3c4"},
		{"short revision", "(devel)", []debug.BuildSetting{{Key: "vcs.revision", Value: "1a2b"}}, "(devel) vcs 1a2b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/hermeskill/hermeskilld", Version: tc.version}, Settings: tc.settings}
			require.Equal(t, tc.want, buildVersion(bi))
		})
	}
}
