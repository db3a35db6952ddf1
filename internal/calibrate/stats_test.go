// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package calibrate

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/certs"
)

var updateStats = flag.Bool("update-stats", false, "rewrite testdata/stats/ (certificates and labels)")

// statsFixture is testdata/stats: certificates written by certs.Write and
// the labels file written by AppendLabel.
const statsFixture = "testdata/stats"

var statsT0 = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)

// statsCert is one certificate of the fixture.
type statsCert struct {
	id, agent, check, trigger, mode, reached string
	at                                       time.Duration // after statsT0
	took                                     time.Duration // triggered -> terminated (enforce)
}

var statsCerts = []statsCert{
	// heartbeat_timeout: 4 enforce kills; hb1 TP, hb2 FP, hb3 FP then TP, hb4 unlabelled.
	{"hb1", "alpha", "heartbeat_timeout", "auto", "enforce", "sigkill", 1 * time.Hour, 15200 * time.Millisecond},
	{"hb2", "beta", "heartbeat_timeout", "auto", "enforce", "cooperative", 2 * time.Hour, 300 * time.Millisecond},
	{"hb3", "alpha", "heartbeat_timeout", "auto", "enforce", "sigterm", 3 * time.Hour, 10100 * time.Millisecond},
	{"hb4", "gamma", "heartbeat_timeout", "auto", "enforce", "sigkill", 4 * time.Hour, 15500 * time.Millisecond},
	// tool_loop: 2 enforce (TP, FP) and 2 shadow (both FP).
	{"tl1", "alpha", "tool_loop", "auto", "enforce", "cooperative", 5 * time.Hour, 1 * time.Second},
	{"tl2", "beta", "tool_loop", "auto", "enforce", "cooperative", 6 * time.Hour, 2 * time.Second},
	{"ts1", "beta", "tool_loop", "auto", "shadow", "none", 7 * time.Hour, 0},
	{"ts2", "gamma", "tool_loop", "auto", "shadow", "none", 8 * time.Hour, 0},
	// memory: one kill, unlabelled.
	{"me1", "gamma", "memory", "auto", "enforce", "sigterm", 9 * time.Hour, 10 * time.Second},
	// manual: one operator kill, labelled TP.
	{"ma1", "beta", "manual", "manual", "enforce", "cooperative", 10 * time.Hour, 500 * time.Millisecond},
	// external (the OOM killer): never a check's decision; labelled, still left out.
	{"ex1", "alpha", "external", "external", "enforce", "none", 11 * time.Hour, 0},
	// old: a heartbeat_timeout FP 40 days before the others, outside a 30-day window.
	{"old", "alpha", "heartbeat_timeout", "auto", "enforce", "sigkill", -40 * 24 * time.Hour, 20 * time.Second},
}

var statsLabels = []struct{ id, verdict string }{
	{"hb1", TruePositive}, {"hb2", FalsePositive}, {"hb3", FalsePositive}, {"hb3", TruePositive},
	{"tl1", TruePositive}, {"tl2", FalsePositive}, {"ts1", FalsePositive}, {"ts2", FalsePositive},
	{"ma1", TruePositive}, {"ex1", TruePositive}, {"old", FalsePositive},
	{"no-such-certificate", FalsePositive},
}

func statsID(short string) string { return "0193d5d8-0000-7000-8000-000000000" + short }

func writeStatsFixture(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	checks := map[string]string{}
	for _, f := range statsCerts {
		trig := statsT0.Add(f.at)
		c := &certs.Certificate{
			CertID: statsID(f.id), AgentID: f.agent, Host: "agents-7", Mode: f.mode,
			Command: []string{"python3", "agent.py"}, PID: 4242,
			StartedAt: trig.Add(-time.Hour), TriggeredAt: trig,
			TriggerType: f.trigger, TriggerCheck: f.check, TriggerReason: f.check + " fired",
			Escalation: certs.Escalation{Reached: f.reached, CoopSignal: "SIGINT", CoopGraceMS: 10000, TermGraceMS: 5000},
		}
		if f.mode == certs.ModeEnforce {
			c.TerminatedAt = trig.Add(f.took)
		}
		_, err := certs.Write(dir, c, nil)
		require.NoError(t, err)
		checks[f.id] = f.check
	}
	// A planted file: listed with an error, skipped.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "zz-not-a-certificate.json"), []byte("{"), 0o640))
	for i, l := range statsLabels {
		require.NoError(t, AppendLabel(dir, Label{
			CertID: statsID(l.id), AgentID: "x", TriggerCheck: checks[l.id], Verdict: l.verdict,
			At: statsT0.Add(12*time.Hour + time.Duration(i)*time.Minute), By: "uid:1000(alice)",
		}))
	}
}

func ptrF(v float64) *float64             { return &v }
func ptrD(d time.Duration) *time.Duration { return &d }

func TestComputeOnFixture(t *testing.T) {
	if *updateStats {
		writeStatsFixture(t, statsFixture)
	}
	entries, err := certs.List(statsFixture)
	require.NoError(t, err)
	require.Len(t, entries, len(statsCerts)+1)
	labels, err := ReadLabels(statsFixture)
	require.NoError(t, err)
	require.Len(t, labels, len(statsLabels))

	// The last 30 days (of the fixture's clock): "old" is out.
	got := Compute(entries, labels, statsT0.Add(-30*24*time.Hour))
	want := []CheckStats{
		{Check: "heartbeat_timeout", Kills: 4, Labelled: 3, TruePositives: 2, FalsePositives: 1,
			Precision: ptrF(2.0 / 3.0), MedianTimeToDeath: ptrD(12650 * time.Millisecond), // (10.1+15.2)/2
			Reached: map[string]int{"cooperative": 1, "sigterm": 1, "sigkill": 2}},
		{Check: "manual", Kills: 1, Labelled: 1, TruePositives: 1, Precision: ptrF(1),
			MedianTimeToDeath: ptrD(500 * time.Millisecond), Reached: map[string]int{"cooperative": 1}},
		{Check: "memory", Kills: 1, MedianTimeToDeath: ptrD(10 * time.Second), Reached: map[string]int{"sigterm": 1}},
		{Check: "tool_loop", Kills: 2, ShadowKills: 2, Labelled: 4, TruePositives: 1, FalsePositives: 3,
			Precision: ptrF(0.25), MedianTimeToDeath: ptrD(1500 * time.Millisecond),
			Reached: map[string]int{"cooperative": 2}},
	}
	assert.Equal(t, want, got)

	// Everything: "old" adds a labelled false positive to heartbeat_timeout.
	all := Compute(entries, labels, time.Time{})
	hb := all[0]
	assert.Equal(t, "heartbeat_timeout", hb.Check)
	assert.Equal(t, 5, hb.Kills)
	assert.Equal(t, 0.5, *hb.Precision, "2 TP of 4 labelled")
	assert.Equal(t, 15200*time.Millisecond, *hb.MedianTimeToDeath)

	var table bytes.Buffer
	require.NoError(t, RenderTable(&table, got))
	assert.Equal(t, ""+
		"CHECK              KILLS  SHADOW  LABELLED  TP  FP  PRECISION  MEDIAN TTD  REACHED\n"+
		"heartbeat_timeout  4      0       3         2   1   66.7%      12.65s      cooperative 1, sigterm 1, sigkill 2\n"+
		"manual             1      0       1         1   0   100.0%     500ms       cooperative 1\n"+
		"memory             1      0       0         0   0   -          10s         sigterm 1\n"+
		"tool_loop          2      2       4         1   3   25.0%      1.5s        cooperative 2\n",
		table.String())
}

func TestCheckStatsJSON(t *testing.T) {
	in := []CheckStats{
		{Check: "memory", Kills: 1, MedianTimeToDeath: ptrD(10250 * time.Millisecond), Reached: map[string]int{"sigterm": 1}},
		{Check: "tool_loop", ShadowKills: 1, Labelled: 1, FalsePositives: 1, Precision: ptrF(0)},
	}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	assert.JSONEq(t, `[
	 {"check":"memory","kills":1,"shadow_kills":0,"labelled":0,"true_positives":0,"false_positives":0,
	  "precision":null,"median_time_to_death_s":10.25,"reached":{"sigterm":1}},
	 {"check":"tool_loop","kills":0,"shadow_kills":1,"labelled":1,"true_positives":0,"false_positives":1,
	  "precision":0,"median_time_to_death_s":null,"reached":{}}]`, string(b))
	var back []CheckStats
	require.NoError(t, json.Unmarshal(b, &back))
	in[1].Reached = map[string]int{}
	assert.Equal(t, in, back)
}

func TestComputeEmptyAndUnreadable(t *testing.T) {
	assert.Empty(t, Compute(nil, nil, time.Time{}))
	got := Compute([]certs.Entry{{Path: "x.json", Err: certs.ErrMalformed}}, []Label{{CertID: "x", Verdict: TruePositive}}, time.Time{})
	assert.Empty(t, got)
	var b bytes.Buffer
	require.NoError(t, RenderTable(&b, nil))
	assert.Equal(t, "CHECK  KILLS  SHADOW  LABELLED  TP  FP  PRECISION  MEDIAN TTD  REACHED\n", b.String())
}

func TestRenderTableEscapesControls(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, RenderTable(&b, []CheckStats{{Check: "evil\x1b[2J\tcheck", Kills: 1, Reached: map[string]int{"": 1}}}))
	assert.NotContains(t, b.String(), "\x1b")
	assert.Contains(t, b.String(), `evil\x1b[2J\tcheck`, "escaped as everywhere else")
	assert.Contains(t, b.String(), `"" 1`)
}

// A pause record (on_budget: pause) is no kill: only the certificate of
// the kill that may follow counts.
func TestComputeSkipsPauseRecords(t *testing.T) {
	at := statsT0
	entries := []certs.Entry{
		{Cert: &certs.Certificate{CertID: "p", Mode: certs.ModePaused, TriggerType: certs.TriggerAuto, TriggerCheck: "cost", TriggeredAt: at}},
		{Cert: &certs.Certificate{CertID: "k", Mode: certs.ModeEnforce, TriggerType: certs.TriggerAuto, TriggerCheck: "cost",
			TriggeredAt: at.Add(time.Hour), TerminatedAt: at.Add(time.Hour + time.Second), Escalation: certs.Escalation{Reached: "cooperative"}}},
	}
	got := Compute(entries, nil, time.Time{})
	require.Len(t, got, 1)
	assert.Equal(t, "cost", got[0].Check)
	assert.Equal(t, 1, got[0].Kills)
	assert.Zero(t, got[0].ShadowKills)
}
