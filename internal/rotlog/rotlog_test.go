package rotlog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRotatesAtTheLimitAndKeepsN(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.log")
	w, err := Open(path, 100, 2)
	require.NoError(t, err)
	line := strings.Repeat("x", 39) + "\n" // 40 bytes
	for i := 0; i < 10; i++ {
		_, err := w.Write([]byte(line))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	for _, name := range []string{path, path + ".1", path + ".2"} {
		fi, err := os.Stat(name)
		require.NoError(t, err, name)
		require.LessOrEqual(t, fi.Size(), int64(100))
		require.Equal(t, os.FileMode(0o640), fi.Mode().Perm())
	}
	_, err = os.Stat(path + ".3")
	require.True(t, os.IsNotExist(err), "only keep=2 rotated files")
	_, err = w.Write([]byte("late"))
	require.ErrorIs(t, err, os.ErrClosed)
}

func TestAppendsToExisting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.log")
	require.NoError(t, os.WriteFile(path, []byte("before\n"), 0o640))
	w, err := Open(path, 0, 1)
	require.NoError(t, err)
	_, err = w.Write([]byte("after\n"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "before\nafter\n", string(b))
}
