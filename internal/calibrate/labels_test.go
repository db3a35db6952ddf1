// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package calibrate

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func label(id, verdict string) Label {
	return Label{CertID: id, AgentID: "bot", TriggerCheck: "tool_loop", Verdict: verdict,
		At: time.Date(2026, 12, 2, 10, 0, 0, 0, time.FixedZone("CET", 3600)), By: "uid:0(root)"}
}

func TestAppendAndRead(t *testing.T) {
	dir := t.TempDir()
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)

	got, err := ReadLabels(dir)
	require.NoError(t, err)
	assert.Empty(t, got, "no file: no labels")

	a := label("c1", TruePositive)
	a.Note = "looped on web_search\nfor an hour"
	require.NoError(t, AppendLabel(dir, a))
	require.NoError(t, AppendLabel(dir, label("c2", FalsePositive)))

	fi, err := os.Stat(filepath.Join(dir, LabelsFile))
	require.NoError(t, err)
	assert.Equal(t, LabelsMode, fi.Mode().Perm(), "0640 whatever the umask")

	data, err := os.ReadFile(filepath.Join(dir, LabelsFile))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	require.Len(t, lines, 2, "one line per label")
	assert.JSONEq(t, `{"cert_id":"c1","agent_id":"bot","trigger_check":"tool_loop","verdict":"true-positive",
		"note":"looped on web_search\nfor an hour","at":"2026-12-02T09:00:00Z","by":"uid:0(root)"}`, lines[0])

	got, err = ReadLabels(dir)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "c1", got[0].CertID)
	assert.Equal(t, a.Note, got[0].Note)
	assert.True(t, got[0].At.Equal(a.At))
	assert.Equal(t, FalsePositive, got[1].Verdict)
}

func TestAppendRejectsBadLabels(t *testing.T) {
	dir := t.TempDir()
	require.ErrorIs(t, AppendLabel(dir, label("", TruePositive)), ErrBadLabel)
	require.ErrorIs(t, AppendLabel(dir, label("c1", "maybe")), ErrBadLabel)
	big := label("c1", TruePositive)
	big.Note = strings.Repeat("x", maxLine)
	require.ErrorIs(t, AppendLabel(dir, big), ErrBadLabel)
	_, err := os.Stat(filepath.Join(dir, LabelsFile))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestAppendFillsTime(t *testing.T) {
	dir := t.TempDir()
	l := label("c1", TruePositive)
	l.At = time.Time{}
	before := time.Now()
	require.NoError(t, AppendLabel(dir, l))
	got, err := ReadLabels(dir)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.False(t, got[0].At.Before(before.Truncate(time.Second)))
	assert.Equal(t, time.UTC, got[0].At.Location())
}

func TestTornAndBadLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, LabelsFile)
	require.NoError(t, AppendLabel(dir, label("c1", TruePositive)))

	// A write cut short: no newline. Readers skip it; the next append
	// ends it first, so the new label is intact.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"cert_id":"c9","verd`)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	got, err := ReadLabels(dir)
	require.NoError(t, err)
	assert.Len(t, got, 1)

	require.NoError(t, AppendLabel(dir, label("c2", FalsePositive)))
	got, err = ReadLabels(dir)
	var bad *BadLinesError
	require.ErrorAs(t, err, &bad)
	require.ErrorIs(t, err, ErrBadLabel)
	assert.Equal(t, []int{2}, bad.Lines)
	assert.Contains(t, err.Error(), path)
	require.Len(t, got, 2, "the good labels come with the error")
	assert.Equal(t, []string{"c1", "c2"}, []string{got[0].CertID, got[1].CertID})
}

func TestConcurrentAppends(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			l := label("c", TruePositive)
			l.Note = strings.Repeat(string(rune('a'+i)), 3000)
			assert.NoError(t, AppendLabel(dir, l))
		})
	}
	wg.Wait()
	got, err := ReadLabels(dir)
	require.NoError(t, err)
	assert.Len(t, got, 20)
}

func TestAppendRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	require.NoError(t, os.WriteFile(target, nil, 0o600))
	require.NoError(t, os.Symlink(target, filepath.Join(dir, LabelsFile)))
	require.Error(t, AppendLabel(dir, label("c1", TruePositive)))
	data, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Empty(t, data)
}
