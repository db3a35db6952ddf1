// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/stretchr/testify/require"
)

// TestManPages renders a section 1 man page for every command from the
// command tree itself (cobra/doc). It is also the generator of the pages
// that make deb packages: with HK_MAN_DIR set it writes them there, with
// HK_MAN_SOURCE (e.g. "hermeskilld v1.2.0") in their footer, dated
// SOURCE_DATE_EPOCH when set. Living in a test keeps cobra/doc and its
// markdown-to-roff dependency out of the hermeskilld binary.
func TestManPages(t *testing.T) {
	dir := os.Getenv("HK_MAN_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))

	root := newRoot(io.Discard, io.Discard)
	root.InitDefaultCompletionCmd() // added at Execute otherwise
	root.DisableAutoGenTag = true
	source := os.Getenv("HK_MAN_SOURCE")
	if source == "" {
		source = "hermeskilld " + versionString()
	}
	require.NoError(t, doc.GenManTree(root, &doc.GenManHeader{Source: source, Manual: "hermeskilld manual"}, dir))

	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c != root && (!c.IsAvailableCommand() || c.IsAdditionalHelpTopicCommand()) {
			return
		}
		page := filepath.Join(dir, strings.ReplaceAll(c.CommandPath(), " ", "-")+".1")
		b, err := os.ReadFile(page)
		require.NoError(t, err, "no man page for %q", c.CommandPath())
		s := string(b)
		require.Contains(t, s, `.TH "`+strings.ToUpper(strings.ReplaceAll(c.CommandPath(), " ", "-"))+`" "1"`)
		require.Contains(t, s, `"`+source+`"`)
		require.Contains(t, s, ".SH NAME\n")
		require.NotContains(t, s, "Auto generated")
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for _, name := range []string{"supervise", "daemon", "kill", "certs-verify", "completion-bash"} {
		require.FileExists(t, filepath.Join(dir, "hermeskilld-"+name+".1"))
	}
}
