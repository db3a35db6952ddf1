package daemon

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckAgentsDir(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "agents.d")
	require.NoError(t, os.Mkdir(dir, 0o755))
	file := filepath.Join(root, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	missing := filepath.Join(root, "agnets.d")

	create, err := checkAgentsDir(dir, dir, "hk.yaml")
	require.NoError(t, err)
	assert.False(t, create, "an existing directory is used as it is")

	create, err = checkAgentsDir(missing, missing, "hk.yaml")
	require.NoError(t, err)
	assert.True(t, create, "the default is created")
	assert.NoDirExists(t, missing, "checking creates nothing")

	_, err = checkAgentsDir(missing, dir, "hk.yaml")
	require.ErrorIs(t, err, ErrNoAgentsDir)
	assert.Equal(t, "hk.yaml: agents_dir does not exist: "+missing+" (create it, or correct agents_dir)", err.Error())
	_, err = checkAgentsDir(missing, dir, "")
	assert.Equal(t, "agents_dir does not exist: "+missing+" (create it, or correct agents_dir)", err.Error())

	for _, p := range []string{file, filepath.Join(file, "agents.d")} {
		_, err = checkAgentsDir(p, p, "hk.yaml")
		require.ErrorIs(t, err, syscall.ENOTDIR, p)
		assert.NotErrorIs(t, err, ErrNoAgentsDir, "not a directory is not missing: not even the default is created")
	}
}
