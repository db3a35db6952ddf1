// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoadHeldRoundTrip: what the daemon writes, it reads back.
func TestLoadHeldRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "held.json")
	h, err := loadHeld(path)
	require.NoError(t, err, "no file: nothing held")
	require.NoError(t, h.quarantine("bot", "looping", "uid:0(root)"))
	require.NoError(t, h.setEstop(nil))

	again, err := loadHeld(path)
	require.NoError(t, err)
	q, ok := again.quarantined("bot")
	require.True(t, ok)
	assert.Equal(t, "looping", q.Reason)
	assert.WithinDuration(t, time.Now(), q.Since, time.Minute)
	_, ok = again.estop()
	assert.False(t, ok)
}

// TestLoadHeldCorrupt: anything but what the daemon writes refuses the
// start, naming the file and what to do.
func TestLoadHeldCorrupt(t *testing.T) {
	for name, data := range map[string]string{
		"unknown key":              `{"quarantined": {}, "estopp": {"since": "2026-12-02T10:00:00Z", "reason": "incident"}}`,
		"unknown key in an agent":  `{"quarantined": {"bot": {"since": "2026-12-02T10:00:00Z", "reasn": "looping"}}}`,
		"unknown key in the estop": `{"quarantined": {}, "estop": {"since": "2026-12-02T10:00:00Z", "operatr": "x"}}`,
		"trailing object":          `{"quarantined": {}} {"estop": {"reason": "incident"}}`,
		"trailing brace":           `{"quarantined": {}}}`,
		"empty":                    ``,
		"blank":                    " \n",
		"null":                     `null`,
		"list":                     `[]`,
		"truncated":                `{"quarantined": {"bot": {"since": "2026-12-02T10:00:00Z"`,
		"wrong type":               `{"quarantined": []}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "held.json")
			require.NoError(t, os.WriteFile(path, []byte(data), 0o640))
			_, err := loadHeld(path)
			require.ErrorIs(t, err, ErrCorruptHeld)
			assert.Regexp(t, `^`+regexp.QuoteMeta(path)+`: corrupt: .+ \(move it aside to start with no agent held\)$`, err.Error())
		})
	}
}
