// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	// The tail after rss, as Linux 6.x writes it; ParseStat ignores it.
	const tail = " 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
	tests := []struct {
		name string
		data string
		want Stat
	}{
		{
			name: "plain",
			data: "4242 (python3) S 100 4242 4242 34816 -1 4194560 1200 30 2 0 1500 250 0 0 20 0 4 0 10000 305418240 25600" + tail,
			want: Stat{PID: 4242, PPID: 100, PGID: 4242, SID: 4242, Comm: "python3", State: 'S',
				UTimeTicks: 1500, STimeTicks: 250, NumThreads: 4, StartTimeTicks: 10000, RSSPages: 25600},
		},
		{
			name: "comm with a closing parenthesis",
			data: "7 (a) b) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 99 0 5" + tail,
			want: Stat{PID: 7, PPID: 1, PGID: 7, SID: 7, Comm: "a) b", State: 'R',
				UTimeTicks: 1, STimeTicks: 2, NumThreads: 1, StartTimeTicks: 99, RSSPages: 5},
		},
		{
			name: "comm that fakes the fields after it",
			data: "8 (x) S 1 1 1 0 -1 0) R 2 8 8 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 77 0 6" + tail,
			want: Stat{PID: 8, PPID: 2, PGID: 8, SID: 8, Comm: "x) S 1 1 1 0 -1 0", State: 'R',
				UTimeTicks: 3, STimeTicks: 4, NumThreads: 1, StartTimeTicks: 77, RSSPages: 6},
		},
		{
			name: "comm with spaces, parentheses and unicode",
			data: "9 (( ünï )( ) S 1 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 1" + tail,
			want: Stat{PID: 9, PPID: 1, PGID: 9, SID: 9, Comm: "( ünï )( ", State: 'S',
				NumThreads: 1, StartTimeTicks: 5, RSSPages: 1},
		},
		{
			name: "empty comm",
			data: "10 () S 1 10 10 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 1" + tail,
			want: Stat{PID: 10, PPID: 1, PGID: 10, SID: 10, State: 'S', NumThreads: 1, StartTimeTicks: 5, RSSPages: 1},
		},
		{
			name: "zombie",
			data: "4250 (worker) Z 4243 4242 4242 0 -1 4227084 0 0 0 0 7 3 0 0 20 0 1 0 10070 0 0" + tail,
			want: Stat{PID: 4250, PPID: 4243, PGID: 4242, SID: 4242, Comm: "worker", State: 'Z',
				UTimeTicks: 7, STimeTicks: 3, NumThreads: 1, StartTimeTicks: 10070},
		},
		{
			name: "kernel thread",
			data: "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 5 0 0 20 0 1 0 2 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
			want: Stat{PID: 2, Comm: "kthreadd", State: 'S', STimeTicks: 5, NumThreads: 1, StartTimeTicks: 2},
		},
		{
			name: "old kernel, nothing after rss, no newline",
			data: "11 (sh) D 1 11 11 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 3",
			want: Stat{PID: 11, PPID: 1, PGID: 11, SID: 11, Comm: "sh", State: 'D', NumThreads: 1, StartTimeTicks: 5, RSSPages: 3},
		},
		{
			name: "huge counters",
			data: "12 (spin) R 1 12 12 0 -1 0 0 0 0 0 18446744073709551615 1 0 0 20 0 1000000 0 18446744073709551615 18446744073709551615 9223372036854775807" + tail,
			want: Stat{PID: 12, PPID: 1, PGID: 12, SID: 12, Comm: "spin", State: 'R', UTimeTicks: 1<<64 - 1, STimeTicks: 1,
				NumThreads: 1000000, StartTimeTicks: 1<<64 - 1, RSSPages: 1<<63 - 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tt.data))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseStatMalformed(t *testing.T) {
	const ok = "1 (init) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 1\n"
	tests := map[string]string{
		"empty":               "",
		"no comm":             "1 init S 0 1 1",
		"no closing paren":    "1 (init S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 1",
		"no pid":              "(init) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 1",
		"pid not a number":    "x1 (init) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 1",
		"no space before (":   "1(init) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 1",
		"no state":            "1 (init)",
		"long state":          "1 (init) SS 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 1",
		"truncated":           ok[:len(ok)/2],
		"missing rss":         "1 (init) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0\n",
		"ppid not a number":   "1 (init) S x 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 1",
		"negative utime":      "1 (init) S 0 1 1 0 -1 0 0 0 0 0 -1 0 0 0 20 0 1 0 5 0 1",
		"utime overflows":     "1 (init) S 0 1 1 0 -1 0 0 0 0 0 18446744073709551616 0 0 0 20 0 1 0 5 0 1",
		"pid overflows int64": "99999999999999999999 (init) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 1",
		"sign only":           "1 (init) S - 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 1",
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseStat([]byte(data))
			require.ErrorIs(t, err, ErrMalformed)
		})
	}
	_, err := ParseStat([]byte(ok))
	require.NoError(t, err, "the valid base line must parse")
}

func TestParseStatus(t *testing.T) {
	t.Run("process", func(t *testing.T) {
		got, err := ParseStatus([]byte("Name:\tpython3\nState:\tS (sleeping)\nUid:\t1000\t0\t0\t0\nGid:\t100\t101\t101\t101\n" +
			"VmHWM:\t  153600 kB\nVmRSS:\t  102400 kB\nThreads:\t4\n"))
		require.NoError(t, err)
		assert.Equal(t, Status{UID: 1000, EUID: 0, GID: 100, EGID: 101, VmRSS: 102400 << 10, VmHWM: 153600 << 10, Threads: 4}, got)
	})
	t.Run("zombie has no Vm lines", func(t *testing.T) {
		got, err := ParseStatus([]byte("Name:\tworker\nState:\tZ (zombie)\nUid:\t1\t1\t1\t1\nGid:\t2\t2\t2\t2\nThreads:\t1\n"))
		require.NoError(t, err)
		assert.Equal(t, Status{UID: 1, EUID: 1, GID: 2, EGID: 2, Threads: 1}, got)
	})
	t.Run("name with a colon and no final newline", func(t *testing.T) {
		got, err := ParseStatus([]byte("Name:\tUid: 7\nUid:\t3\t3\t3\t3\nGid:\t4\t4\t4\t4\nThreads:\t9"))
		require.NoError(t, err)
		assert.Equal(t, Status{UID: 3, EUID: 3, GID: 4, EGID: 4, Threads: 9}, got)
	})

	malformed := map[string]string{
		"empty":           "",
		"no Uid":          "Gid:\t1\t1\t1\t1\nThreads:\t1\n",
		"no Gid":          "Uid:\t1\t1\t1\t1\nThreads:\t1\n",
		"no Threads":      "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\n",
		"one uid":         "Uid:\t1\nGid:\t1\t1\t1\t1\nThreads:\t1\n",
		"bad threads":     "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nThreads:\tmany\n",
		"bad VmRSS":       "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nThreads:\t1\nVmRSS:\t12\n",
		"VmRSS in MB":     "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nThreads:\t1\nVmRSS:\t12 MB\n",
		"VmHWM overflows": "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nThreads:\t1\nVmHWM:\t9223372036854775807 kB\n",
	}
	for name, data := range malformed {
		t.Run(name, func(t *testing.T) {
			_, err := ParseStatus([]byte(data))
			require.ErrorIs(t, err, ErrMalformed)
		})
	}
}

func TestParseCgroup2(t *testing.T) {
	tests := []struct {
		name, data, want string
		ok               bool
	}{
		{"unified", "0::/hermeskill/research-bot\n", "/hermeskill/research-bot", true},
		{"hybrid", "12:pids:/a\n4:memory:/b\n1:name=systemd:/c\n0::/d\n", "/d", true},
		{"root", "0::/\n", "/", true},
		{"colons in the path", "0::/a:b::c\n", "/a:b::c", true},
		{"removed cgroup of a zombie", "0::/x (deleted)\n", "/x (deleted)", true},
		{"no final newline", "0::/y", "/y", true},
		{"v1 only", "4:memory:/b\n1:name=systemd:/c\n", "", false},
		{"empty", "", "", false},
		{"10:: is not 0::", "10::/z\n", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseCgroup2([]byte(tt.data))
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestEnvironValue(t *testing.T) {
	env := []byte("PATH=/bin\x00A=1\x00AB=2\x00EMPTY=\x00A=shadowed\x00=odd\x00NOEQUALS\x00LAST=end")
	tests := []struct {
		key, want string
		ok        bool
	}{
		{"A", "1", true}, // first one wins, as getenv(3)
		{"AB", "2", true},
		{"EMPTY", "", true},
		{"LAST", "end", true},
		{"PATH", "/bin", true},
		{"NOEQUALS", "", false},
		{"MISSING", "", false},
		{"", "", false},
		{"A=1", "", false},
	}
	for _, tt := range tests {
		got, ok := environValue(env, tt.key)
		assert.Equal(t, tt.ok, ok, tt.key)
		assert.Equal(t, tt.want, got, tt.key)
	}
}

func TestJoinCmdline(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		max  int
		want string
	}{
		{"empty", "", 0, ""},
		{"only NULs", "\x00\x00", 0, ""},
		{"args", "python3\x00agent.py\x00--name\x00research bot\x00", 0, "python3 agent.py --name research bot"},
		{"empty argument kept", "a\x00\x00b\x00", 0, "a  b"},
		{"setproctitle, no NUL", "sshd: listener", 0, "sshd: listener"},
		{"fits exactly", "abcdef\x00", 6, "abcdef"},
		{"cut", "abcdefgh\x00", 6, "abc…"},
		{"cut, no room for the ellipsis", "abcdefgh\x00", 2, "ab"},
		{"cut before a 2-byte rune", "abcdéfgh\x00", 7, "abcd…"},       // é is bytes 4-5
		{"cut inside a 2-byte rune", "abcdéfgh\x00", 8, "abcd…"},       // abcdé… would be 9
		{"cut inside a 4-byte rune", "ab😀cdef\x00", 7, "ab…"},          // 😀 is bytes 2-5
		{"no room for the ellipsis, inside a rune", "\xc3\xaf", 1, ""}, // found by FuzzJoinCmdline
		{"invalid UTF-8 does not back up far", "ab\x80\x80\x80\x80\x80\x80", 7, "ab\x80\x80…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := JoinCmdline([]byte(tt.raw), tt.max)
			assert.Equal(t, tt.want, got)
			if tt.max > 0 {
				assert.LessOrEqual(t, len(got), tt.max)
			}
		})
	}
}
