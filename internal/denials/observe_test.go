// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package denials

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Records as this kernel wrote them for `sh -c 'echo no > /root/x'` under a
// domain that allows writes only beneath another directory, and for a
// process of another sandbox on the host.
var agentEvent = []struct {
	typ  uint16
	text string
}{
	{typeLandlockAccess, `audit(1796655596.825:28): domain=1e327e44d blockers=fs.make_reg path="/root" dev="vda" ino=1224`},
	{typeLandlockDomain, `audit(1796655596.825:28): domain=1e327e44d status=allocated mode=enforcing pid=30751 uid=0 exe="/tmp/hkfs" comm="exe"`},
	{typeSyscall, `audit(1796655596.825:28): arch=c000003e syscall=257 success=no exit=-13 a0=ffffff9c a1=55cbdf4b6bb0 a2=241 a3=1b6 items=0 ppid=30735 pid=30751 auid=4294967295 uid=0 gid=0 comm="sh" exe="/usr/bin/dash" key=(null)`},
	{1327, `audit(1796655596.825:28): proctitle=7368002D63`},
	{typeEOE, `audit(1796655596.825:28): `},
	{typeLandlockAccess, `audit(1796655597.129:29): domain=1e327e44d blockers=fs.make_reg path="/root" dev="vda" ino=1224`},
	{typeSyscall, `audit(1796655597.129:29): arch=c000003e syscall=257 success=no exit=-13 ppid=30735 pid=30751 comm="sh"`},
	{typeEOE, `audit(1796655597.129:29): `},
	// Another sandbox's denial: never counted for the agent.
	{typeLandlockAccess, `audit(1796655597.130:30): domain=77 blockers=scope.signal opid=1 ocomm="systemd"`},
	{typeSyscall, `audit(1796655597.130:30): arch=c000003e syscall=62 success=no exit=-1 pid=999 comm="other"`},
	{typeEOE, `audit(1796655597.130:30): `},
}

func newTestReader() *Reader {
	return &Reader{tracked: map[*Counter]struct{}{}, domains: map[uint64]*Counter{}, pending: map[uint64][]access{}}
}

func feed(t *testing.T, r *Reader, events ...[]struct {
	typ  uint16
	text string
}) {
	t.Helper()
	for _, ev := range events {
		for _, rec := range ev {
			p, ok := parseRecord(rec.typ, rec.text)
			require.True(t, ok, rec.text)
			r.observe(p)
		}
	}
}

func TestCountsTheAgentsDenialsOnly(t *testing.T) {
	r := newTestReader()
	c := r.Track(func(pid int) bool { return pid == 30751 })
	feed(t, r, agentEvent)
	s := c.Summary()
	require.Equal(t, 2, s.Count)
	require.Equal(t, map[string]int{"fs.make_reg": 2}, s.ByBlocker)
	require.Equal(t, "fs.make_reg", s.Recent[0].Blockers)
	require.Equal(t, "/root", s.Recent[0].Target)
	require.Equal(t, 30751, s.Recent[0].PID)
	require.Equal(t, 30751, s.Recent[1].PID)
	require.Empty(t, r.pending, "every event was resolved")

	// The kernel's total, once the domain is gone, is the count: the
	// multicast group may have lost records on the way.
	p, _ := parseRecord(typeLandlockDomain, `audit(1796655597.169:31): domain=1e327e44d status=deallocated denials=5`)
	r.observe(p)
	require.Equal(t, 5, c.Count())
	c.Settle(0)
}

// A domain is attributed by the pid of its creator too: the first denial
// of a process that exits before its system call's record is matched is
// still the agent's.
func TestAttributedByTheDomainsCreator(t *testing.T) {
	r := newTestReader()
	c := r.Track(func(pid int) bool { return pid == 30751 })
	for _, rec := range agentEvent[:2] {
		p, _ := parseRecord(rec.typ, rec.text)
		r.observe(p)
	}
	require.Equal(t, 1, c.Count())
}

func TestParseRecord(t *testing.T) {
	p, ok := parseRecord(typeLandlockAccess, `audit(1796655596.825:28): domain=1e327e44d blockers=fs.make_reg path="/root" dev="vda" ino=1224`)
	require.True(t, ok)
	require.Equal(t, uint64(28), p.serial)
	dom, ok := p.domain()
	require.True(t, ok)
	require.Equal(t, uint64(0x1e327e44d), dom)
	require.Equal(t, "/root", p.fields["path"])
	for _, bad := range []string{"", "domain=1", "audit(x): a=b", "audit(1.2:x): a=b"} {
		_, ok := parseRecord(typeLandlockAccess, bad)
		require.False(t, ok, bad)
	}
}
