// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// addFixtureSeeds adds every testdata/proc/*/name file as a seed.
func addFixtureSeeds(f *testing.F, name string) {
	files, err := filepath.Glob(filepath.Join("testdata", "proc", "*", name))
	require.NoError(f, err)
	require.NotEmpty(f, files)
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(f, err)
		f.Add(data)
	}
}

func FuzzParseStat(f *testing.F) {
	addFixtureSeeds(f, "stat")
	for _, seed := range []string{
		"",
		"1 (",
		"1 ()",
		")",
		"1 () S",
		"1 (a) b) R 1 1 1 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 99 0 5\n",
		"1 (x) S 1 1 1 0 -1 0) R 2 8 8 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 77 0 6\n",
		"-1 (neg) S -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1\n",
		"1 (big) R 1 1 1 0 -1 0 0 0 0 0 18446744073709551616 0 0 0 20 0 1 0 5 0 1\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseStat(data)
		if err != nil {
			require.ErrorIs(t, err, ErrMalformed)
			return
		}
		// What parsed with the comm parses the same without it.
		st2, err := parseStat(data, false)
		require.NoError(t, err)
		st2.Comm = st.Comm
		require.Equal(t, st, st2)
	})
}

func FuzzParseStatus(f *testing.F) {
	addFixtureSeeds(f, "status")
	for _, seed := range []string{
		"",
		":",
		"Uid:",
		"Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nThreads:\t1\n",
		"Uid:\t-1\t-1\nGid:\t1\t1\nThreads:\t1\nVmRSS:\t9223372036854775807 kB\n",
		"Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nThreads:\t1\nVmRSS:\t12 MB\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseStatus(data)
		if err != nil {
			require.ErrorIs(t, err, ErrMalformed)
			return
		}
		require.GreaterOrEqual(t, st.VmRSS, int64(0))
		require.GreaterOrEqual(t, st.VmHWM, int64(0))
	})
}

func FuzzJoinCmdline(f *testing.F) {
	addFixtureSeeds(f, "cmdline")
	f.Add([]byte("ab\xf0\x9f\x98\x80cdef\x00"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, maxLen := range []int{0, 1, 2, 3, 4, 5, 8, 16} {
			got := JoinCmdline(raw, maxLen)
			if maxLen > 0 {
				require.LessOrEqual(t, len(got), maxLen)
			}
			if utf8.Valid(raw) {
				require.True(t, utf8.ValidString(got), "cut inside a rune: %q", got)
			}
		}
	})
}
