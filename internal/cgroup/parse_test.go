// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadHierarchyFixtures(t *testing.T) {
	tests := []struct {
		fixture string
		mount   mount
		own     string
		ownDir  string
		errIs   error
	}{
		{
			fixture: "hybrid",
			mount:   mount{root: "/", point: "/sys/fs/cgroup/unified"},
			own:     "/",
			ownDir:  "/sys/fs/cgroup/unified",
		},
		{
			fixture: "unified",
			mount:   mount{root: "/", point: "/sys/fs/cgroup"},
			own:     "/system.slice/hermeskilld.service",
			ownDir:  "/sys/fs/cgroup/system.slice/hermeskilld.service",
		},
		{
			// A subtree bind-mounted at a path with a space (\040).
			fixture: "container",
			mount:   mount{root: "/kubepods/pod7/ctr1", point: "/run/my cgroup"},
			own:     "/kubepods/pod7/ctr1/app",
			ownDir:  "/run/my cgroup/app",
		},
		{
			// Of two cgroup2 mounts, the one of the whole hierarchy wins.
			fixture: "multi",
			mount:   mount{root: "/", point: "/sys/fs/cgroup"},
			own:     "/kubepods/pod7/ctr1/app",
			ownDir:  "/sys/fs/cgroup/kubepods/pod7/ctr1/app",
		},
		{fixture: "legacy", errIs: ErrUnavailable},
		{fixture: "missing", errIs: ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			h, err := readHierarchy("testdata/"+tt.fixture, "")
			if tt.errIs != nil {
				require.ErrorIs(t, err, tt.errIs)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.mount, h.mount)
			assert.Equal(t, tt.own, h.own)
			dir, ok := h.dirOf(h.own)
			require.True(t, ok)
			assert.Equal(t, tt.ownDir, dir)
			back, err := h.cgroupOf(dir)
			require.NoError(t, err)
			assert.Equal(t, tt.own, back)
		})
	}
}

func TestReadHierarchyMountOverride(t *testing.T) {
	h, err := readHierarchy("testdata/hybrid", "/sys/fs/cgroup/unified/")
	require.NoError(t, err)
	assert.Equal(t, mount{root: "/", point: "/sys/fs/cgroup/unified"}, h.mount)

	// Not in mountinfo: taken as the root of the hierarchy.
	h, err = readHierarchy("testdata/unified", "/elsewhere")
	require.NoError(t, err)
	assert.Equal(t, mount{root: "/", point: "/elsewhere"}, h.mount)
}

func TestHierarchyOutside(t *testing.T) {
	h := hierarchy{mount: mount{root: "/kubepods/pod7", point: "/sys/fs/cgroup"}}
	_, ok := h.dirOf("/system.slice/x.service")
	assert.False(t, ok)
	_, ok = h.dirOf("/kubepods/pod77")
	assert.False(t, ok, "a sibling with a common prefix is outside")
	_, err := h.cgroupOf("/sys/fs/cgroupx/a")
	assert.Error(t, err)
	_, err = h.cgroupOf("/sys/fs")
	assert.Error(t, err)
	cg, err := h.cgroupOf("/sys/fs/cgroup")
	require.NoError(t, err)
	assert.Equal(t, "/kubepods/pod7", cg)
}

func TestDetectFixtures(t *testing.T) {
	// No cgroup2 mount: nothing is touched.
	_, err := Detect(Options{ProcRoot: "testdata/legacy"})
	require.ErrorIs(t, err, ErrUnavailable)
	assert.Contains(t, err.Error(), "no cgroup2 mount")

	// A "cgroup2" mount point that is not one (statfs says otherwise).
	_, err = Detect(Options{ProcRoot: "testdata/notcgroup2"})
	require.ErrorIs(t, err, ErrUnavailable)

	// Options.Base outside the mount.
	_, err = Detect(Options{ProcRoot: "testdata/hybrid", Base: "/tmp/x"})
	require.ErrorIs(t, err, ErrUnavailable)
	assert.Contains(t, err.Error(), "not inside the cgroup2 mount")
}

func TestParseCgroup2MountsMalformed(t *testing.T) {
	_, err := parseCgroup2Mounts(strings.NewReader("1 2 3:4 / /x rw no-separator cgroup2\n"))
	assert.Error(t, err)
}

func TestUnescapeOctal(t *testing.T) {
	assert.Equal(t, "/a b\tc\\d", unescapeOctal(`/a\040b\011c\134d`))
	assert.Equal(t, `/trailing\04`, unescapeOctal(`/trailing\04`))
	assert.Equal(t, `/not\999octal`, unescapeOctal(`/not\999octal`))
}

func TestParseProcCgroup(t *testing.T) {
	tests := []struct {
		in, want string
		err      bool
	}{
		{in: "0::/\n", want: "/"},
		{in: "4:memory:/x\n0::/a/b.scope\n", want: "/a/b.scope"},
		{in: "0::/a/b (deleted)\n", want: "/a/b"},
		{in: "0::/with:colon", want: "/with:colon"},
		{in: "1:name=systemd:/a\n", err: true},
		{in: "0::relative\n", err: true},
		{in: "", err: true},
	}
	for _, tt := range tests {
		got, err := parseProcCgroup([]byte(tt.in))
		if tt.err {
			assert.Error(t, err, "%q", tt.in)
			continue
		}
		require.NoError(t, err, "%q", tt.in)
		assert.Equal(t, tt.want, got)
	}
}

func TestParseFlatKeyed(t *testing.T) {
	kv, err := parseFlatKeyed([]byte("populated 1\nfrozen 0\n"))
	require.NoError(t, err)
	assert.Equal(t, map[string]uint64{"populated": 1, "frozen": 0}, kv)

	kv, err = parseFlatKeyed([]byte("low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\noom_group_kill 0\n"))
	require.NoError(t, err)
	assert.Equal(t, uint64(2), kv["oom_kill"])

	_, err = parseFlatKeyed([]byte("populated\n"))
	assert.Error(t, err)
	_, err = parseFlatKeyed([]byte("populated x\n"))
	assert.Error(t, err)
}

func TestParseSingleValue(t *testing.T) {
	v, err := parseSingleValue([]byte("123456\n"))
	require.NoError(t, err)
	assert.Equal(t, uint64(123456), v)
	_, err = parseSingleValue([]byte("max\n"))
	assert.Error(t, err)
}

func TestAppendPIDs(t *testing.T) {
	pids, err := appendPIDs([]int{1}, []byte("42\n43\n\n"))
	require.NoError(t, err)
	assert.Equal(t, []int{1, 42, 43}, pids)
	pids, err = appendPIDs(nil, nil)
	require.NoError(t, err)
	assert.Empty(t, pids)
	_, err = appendPIDs(nil, []byte("12\nx\n"))
	assert.Error(t, err)
	_, err = appendPIDs(nil, []byte("0\n"))
	assert.Error(t, err)
}

func TestGroupNames(t *testing.T) {
	tests := []struct{ id, want string }{
		{"research-bot", "research-bot"},
		{"a.b/c d", "a_b_c_d"},
		{"../../etc", "______etc"},
		{"", "agent"},
		{"ünï", "_n_"},
		{strings.Repeat("x", 100), strings.Repeat("x", maxIDLen)},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, sanitizeID(tt.id), "%q", tt.id)
		name := groupName(tt.id, 4242, 99, 4026531836, 7)
		assert.Equal(t, tt.want+".4242-99-4026531836.7", name)
		o, ok := parseGroupName(name)
		assert.True(t, ok, name)
		assert.Equal(t, groupOwner{pid: 4242, start: 99, pidns: 4026531836}, o)
	}
	// Names of older versions carry less.
	o, ok := parseGroupName("bot.4242.7")
	assert.True(t, ok)
	assert.Equal(t, groupOwner{pid: 4242}, o)
	o, ok = parseGroupName("bot.4242-99.7")
	assert.True(t, ok)
	assert.Equal(t, groupOwner{pid: 4242, start: 99}, o)
	for _, name := range []string{
		"supervisor", "hermeskill-test-123", "a.1", "a.x.1", "a.1.x", ".1.2", "a b.1.2", "a.0.1", "cgroup.procs",
		"a.1-.2", "a.1-x.2", "a.-5.2", "a.1-2-3-4.5",
	} {
		_, ok := parseGroupName(name)
		assert.False(t, ok, name)
	}
}
