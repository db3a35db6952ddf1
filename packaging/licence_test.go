// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every Go, Python and shell source of the repository names its licence
// in its first lines (the package ships LICENSE; the header says which
// licence a file copied out of the tree is under).
func TestSourcesNameTheirLicence(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "dist", "bin", "node_modules", "__pycache__", "build":
				return filepath.SkipDir
			}
			if strings.HasSuffix(d.Name(), ".egg-info") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil // a link names the file it points at
		}
		switch filepath.Ext(path) {
		case ".go", ".py", ".sh":
		default:
			return nil
		}
		checked++
		assert.True(t, hasSPDX(t, path), "%s: no SPDX-License-Identifier: Apache-2.0 in its first lines", path)
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, checked, 100)
}

func hasSPDX(t *testing.T, path string) bool {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for i := 0; i < 5 && sc.Scan(); i++ {
		if strings.Contains(sc.Text(), "SPDX-License-Identifier: Apache-2.0") {
			return true
		}
	}
	return false
}
