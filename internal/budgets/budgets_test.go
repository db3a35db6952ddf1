// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package budgets_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/budgets"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/labels"
)

var teamA = map[string]string{"team": "a"}

func defs() []config.Budget {
	return []config.Budget{
		{Name: "team-a", Selector: "team=a", Sel: labels.MustParse("team=a"), Per: config.PerDay, Warn: 8, Kill: 10},
		{Name: "all", Selector: "team", Sel: labels.MustParse("team"), Per: config.PerMonth, Kill: 100},
	}
}

func TestWindows(t *testing.T) {
	at := time.Date(2026, 12, 31, 23, 59, 59, 0, time.FixedZone("CET", 3600))
	require.Equal(t, time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC), budgets.Start(config.PerDay, at))
	require.Equal(t, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), budgets.Start(config.PerMonth, at))
	require.Equal(t, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), budgets.End(config.PerMonth, budgets.Start(config.PerMonth, at)))
	require.Equal(t, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), budgets.End(config.PerDay, budgets.Start(config.PerDay, at)))
}

// Charges cross warn then kill once per window; the trip holds matching
// labels only; at 00:00 UTC the day's window rolls over (spend, trip and
// hold gone) while the month's keeps counting.
func TestChargeTripAndRollover(t *testing.T) {
	now := time.Date(2026, 12, 7, 22, 0, 0, 0, time.UTC)
	b, err := budgets.Open(filepath.Join(t.TempDir(), "budgets.json"), defs(), now)
	require.NoError(t, err)

	require.Empty(t, b.Charge(teamA, 7.5, now))
	require.Empty(t, b.Charge(map[string]string{"team": "b"}, 50, now), "only the month's budget matches team b; below its kill")
	c := b.Charge(teamA, 0.6, now)
	require.Len(t, c, 1)
	require.Equal(t, budgets.Warn, c[0].Threshold)
	require.Equal(t, "budget team-a: spent $8.10 of $8.00 today", c[0].Reason())
	require.Empty(t, b.Charge(teamA, 0.1, now), "warn crosses once")
	c = b.Charge(teamA, 1.92, now)
	require.Len(t, c, 1)
	require.Equal(t, budgets.Kill, c[0].Threshold)
	require.Equal(t, "budget team-a: spent $10.12 of $10.00 today", c[0].Reason())

	h, ok := b.Held(teamA, now)
	require.True(t, ok)
	require.Equal(t, "team-a", h.Budget.Name)
	_, ok = b.Held(map[string]string{"team": "b"}, now)
	require.False(t, ok)
	require.Equal(t, time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC), b.NextRoll())

	st := b.List(now)
	require.Equal(t, budgets.StateTripped, st[0].State)
	require.InDelta(t, 10.12, st[0].SpentUSD, 1e-9)
	require.Equal(t, budgets.StateOK, st[1].State)
	require.InDelta(t, 60.12, st[1].SpentUSD, 1e-9)

	require.Empty(t, b.Roll(now.Add(time.Hour-time.Nanosecond)))
	midnight := time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)
	require.Equal(t, []string{"team-a"}, b.Roll(midnight))
	_, ok = b.Held(teamA, midnight)
	require.False(t, ok)
	st = b.List(midnight)
	require.Equal(t, budgets.StateOK, st[0].State)
	require.Zero(t, st[0].SpentUSD)
	require.Equal(t, midnight, st[0].Start)
	require.InDelta(t, 60.12, st[1].SpentUSD, 1e-9, "the month goes on")

	// The first charge of the new month starts the month's window afresh.
	jan := time.Date(2027, 1, 1, 0, 0, 1, 0, time.UTC)
	b.Charge(teamA, 1, jan)
	st = b.List(jan)
	require.InDelta(t, 1, st[1].SpentUSD, 1e-9)
	require.Equal(t, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), st[1].Start)
}

func TestLift(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	b, err := budgets.Open(filepath.Join(t.TempDir(), "budgets.json"), defs(), now)
	require.NoError(t, err)
	require.ErrorIs(t, b.Lift("team-a", "uid:0", now), budgets.ErrNotTripped)
	require.ErrorIs(t, b.Lift("nope", "uid:0", now), budgets.ErrUnknown)
	b.Charge(teamA, 11, now)
	require.NoError(t, b.Lift("team-a", "uid:0(root)", now))
	_, ok := b.Held(teamA, now)
	require.False(t, ok)
	require.Empty(t, b.Charge(teamA, 5, now), "a lifted window does not trip again")
	require.Equal(t, budgets.StateLifted, b.List(now)[0].State)
	require.ErrorIs(t, b.Lift("team-a", "uid:0", now), budgets.ErrNotTripped)
	require.Empty(t, b.Roll(now.Add(24*time.Hour)), "a lifted window held nothing")
}

// What Save wrote, Open reads back: the spend, the trip, the window.
func TestPersisted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "budgets.json")
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	b, err := budgets.Open(path, defs(), now)
	require.NoError(t, err)
	b.Charge(teamA, 10.5, now)
	require.NoError(t, b.Save())
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o640), fi.Mode().Perm())

	b2, err := budgets.Open(path, defs(), now.Add(time.Hour))
	require.NoError(t, err)
	h, ok := b2.Held(teamA, now.Add(time.Hour))
	require.True(t, ok)
	require.InDelta(t, 10.5, h.SpentUSD, 1e-9)
	require.Equal(t, b.List(now), b2.List(now))

	// A budget removed from the daemon file is forgotten; one added starts at 0.
	b3, err := budgets.Open(path, []config.Budget{defs()[1], {Name: "new", Sel: labels.MustParse("x"), Per: config.PerDay, Kill: 1}}, now)
	require.NoError(t, err)
	st := b3.List(now)
	require.Len(t, st, 2)
	require.InDelta(t, 10.5, st[0].SpentUSD, 1e-9)
	require.Zero(t, st[1].SpentUSD)
}

func TestCorruptFile(t *testing.T) {
	now := time.Now()
	for name, data := range map[string]string{
		"truncated":   `{"budgets": {"a": {"per": "day", "sta`,
		"unknown key": `{"budgets": {"a": {"per": "day", "start": "2026-12-07T00:00:00Z", "trippd": {}}}}`,
		"bad window":  `{"budgets": {"a": {"per": "week", "start": "2026-12-07T00:00:00Z"}}}`,
		"not object":  `[]`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "budgets.json")
			require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
			_, err := budgets.Open(path, defs(), now)
			require.ErrorIs(t, err, budgets.ErrCorrupt)
			require.ErrorContains(t, err, path)
		})
	}
}
