// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const docDir = "/usr/share/doc/hermeskilld"

// docFile is a file of the repository that the package ships as is.
type docFile struct{ src, dst string }

// readmeDocLink is a link of README.md to a document of docs/ or to the
// sample configuration in examples/config/.
var readmeDocLink = regexp.MustCompile(`\]\(((?:docs|examples/config)/[^)#\s]+)`)

// requireDocs checks that the package's listing (files) has, under
// docDir where README.md's relative links find them, every document of
// docs/ and docs/alerts/, the sample price file and whatever else of docs/
// or examples/config/ the README links to; and the man pages, compressed
// only. It returns the shipped documents, for requireInstalledDocs.
func requireDocs(t *testing.T, files []string) []docFile {
	t.Helper()
	root := repoRoot(t)
	var srcs []string
	for _, pattern := range []string{"docs/*.md", "docs/alerts/*"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		require.NoError(t, err)
		require.NotEmpty(t, m, pattern)
		for _, p := range m {
			rel, err := filepath.Rel(root, p)
			require.NoError(t, err)
			srcs = append(srcs, rel)
		}
	}
	srcs = append(srcs, "README.md", "examples/config/prices.yaml")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	for _, m := range readmeDocLink.FindAllStringSubmatch(string(readme), -1) {
		srcs = append(srcs, m[1])
	}
	var docs []docFile
	seen := map[string]bool{}
	for _, src := range srcs {
		if seen[src] {
			continue
		}
		seen[src] = true
		d := docFile{src: src, dst: docDir + "/" + src}
		require.Contains(t, files, d.dst, "the package ships %s where README.md's links find it", src)
		docs = append(docs, d)
	}
	var man int
	for _, f := range files {
		if !strings.HasPrefix(f, "/usr/share/man/") {
			continue
		}
		require.True(t, strings.HasSuffix(f, ".1.gz") || !strings.Contains(filepath.Base(f), "."),
			"%s: man pages are shipped compressed", f)
		if strings.HasSuffix(f, ".gz") {
			man++
		}
	}
	require.Greater(t, man, 10, "a man page per command")
	return docs
}

// requireInstalledDocs checks, once the package is installed, that each
// shipped document is the repository's, and that every man page is
// compressed as Debian policy asks (gzip -9n: maximum compression, no file
// name, no time, so the same page gives the same bytes) around a troff
// page.
func requireInstalledDocs(t *testing.T, docs []docFile) {
	t.Helper()
	root := repoRoot(t)
	for _, d := range docs {
		want, err := os.ReadFile(filepath.Join(root, d.src))
		require.NoError(t, err)
		got, err := os.ReadFile(d.dst)
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, got), "%s is the repository's %s", d.dst, d.src)
	}
	pages, err := filepath.Glob("/usr/share/man/man1/hermeskilld*.1.gz")
	require.NoError(t, err)
	require.NotEmpty(t, pages)
	for _, p := range pages {
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Greater(t, len(raw), 10, p)
		// RFC 1952: byte 8 is XFL, 2 for the slowest, best compression.
		require.Equal(t, byte(2), raw[8], "%s: gzip -9", p)
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		require.NoError(t, err, p)
		require.Empty(t, zr.Header.Name, "%s: gzip -n keeps no file name", p)
		require.True(t, zr.Header.ModTime.IsZero(), "%s: gzip -n keeps no time", p)
		page, err := io.ReadAll(zr)
		require.NoError(t, err, p)
		require.Contains(t, string(page), "\n.TH ", "%s is a man page", p)
	}
}
