// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const uuidV7 = `^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`

func TestNewIDFormatAndTime(t *testing.T) {
	before := time.Now().UnixMilli()
	id := NewID()
	after := time.Now().UnixMilli()
	assert.Regexp(t, uuidV7, id)
	b, err := hex.DecodeString(strings.ReplaceAll(id, "-", ""))
	require.NoError(t, err)
	var ms int64
	for _, x := range b[:6] {
		ms = ms<<8 | int64(x)
	}
	// The clock bump can only push the timestamp forward, by < 1ms per 4096 ids.
	assert.GreaterOrEqual(t, ms, before)
	assert.LessOrEqual(t, ms, after+1)
}

func TestNewIDUniqueAndOrdered(t *testing.T) {
	const n = 10000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = NewID()
	}
	for i := 1; i < n; i++ {
		require.Less(t, ids[i-1], ids[i], "id %d not after id %d", i, i-1)
	}
}

func TestNewIDConcurrentUnique(t *testing.T) {
	const workers, each = 8, 2000
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			local := make([]string, each)
			for i := range local {
				local[i] = NewID()
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range local {
				seen[id] = true
			}
		})
	}
	wg.Wait()
	assert.Len(t, seen, workers*each)
}

func TestNewIDClockGoesBack(t *testing.T) {
	now := time.Now()
	a := newID(now)
	b := newID(now.Add(-time.Second)) // NTP stepped the clock back
	c := newID(now)
	assert.Less(t, a, b)
	assert.Less(t, b, c)
}

func TestFileName(t *testing.T) {
	c := &Certificate{
		AgentID:     "research-bot",
		CertID:      "0193d5d8-7c4b-7a3e-9f21-0c5b1e2d3f40",
		TriggeredAt: time.Date(2026, 12, 2, 11, 15, 3, 123999999, time.FixedZone("CET", 3600)),
	}
	assert.Equal(t, "20261202T101503.123Z_research-bot_0193d5d8-7c4b-7a3e-9f21-0c5b1e2d3f40.json", FileName(c))

	c.AgentID = "../../etc/pass wd\x00é"
	name := FileName(c)
	assert.Equal(t, "20261202T101503.123Z_.._.._etc_pass_wd__", name[:len("20261202T101503.123Z_.._.._etc_pass_wd__")])
	assert.NotContains(t, name, "/")

	c.AgentID = strings.Repeat("a", 300)
	assert.Len(t, FileName(c), len("20261202T101503.123Z_")+64+1+36+len(".json"))

	assert.Equal(t, "00010101T000000.000Z_unknown_noid.json", FileName(&Certificate{}))

	// Fallbacks when the trigger time is unknown.
	term := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	assert.True(t, strings.HasPrefix(FileName(&Certificate{TerminatedAt: term, StartedAt: term.Add(-time.Hour)}), "20260102T030405.000Z_"))
}

func TestFileNameSortsByTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type named struct {
		at   time.Time
		name string
	}
	var certs []named
	for range 1000 {
		c := &Certificate{
			AgentID: []string{"zeta", "alpha", "m"}[rng.IntN(3)],
			CertID:  NewID(), // ids in creation order, unrelated to the times
			// up to 3 years, at ms resolution
			TriggeredAt: base.Add(time.Duration(rng.Int64N(3*365*24*3600*1000)) * time.Millisecond),
		}
		certs = append(certs, named{c.TriggeredAt, FileName(c)})
	}
	byName := slices.Clone(certs)
	sort.Slice(byName, func(i, j int) bool { return byName[i].name < byName[j].name })
	for i := 1; i < len(byName); i++ {
		assert.False(t, byName[i].at.Before(byName[i-1].at), "%s sorts after %s", byName[i].name, byName[i-1].name)
	}
}

func TestDefaultDir(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	home := func(h string, err error) func() (string, error) { return func() (string, error) { return h, err } }

	assert.Equal(t, "/var/lib/hermeskill/certs", defaultDir(0, env(map[string]string{"XDG_STATE_HOME": "/x"}), home("/root", nil)))
	assert.Equal(t, "/x/state/hermeskill/certs", defaultDir(1000, env(map[string]string{"XDG_STATE_HOME": "/x/state"}), home("/home/u", nil)))
	assert.Equal(t, "/home/u/.local/state/hermeskill/certs", defaultDir(1000, env(nil), home("/home/u", nil)))
	assert.Equal(t, "/home/u/.local/state/hermeskill/certs", defaultDir(1000, env(map[string]string{"XDG_STATE_HOME": "rel/ative"}), home("/home/u", nil)), "a relative XDG_STATE_HOME is ignored")
	assert.True(t, strings.HasSuffix(defaultDir(1000, env(nil), home("", errors.New("no home"))), "/hermeskill-certs-1000"))
	assert.NotEmpty(t, DefaultDir())
}
