// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import "testing"

func TestMatch(t *testing.T) {
	type cert struct{ id, path string }
	list := []cert{
		{"01aa11", "/c/20261202T101503.123Z_bot_01aa11.json"},
		{"01aa1", "/c/20261202T101504.000Z_bot_01aa1.json"},
		{"02bb22", "/c/20261202T101505.000Z_ops-bot_02bb22.json"},
		{"03cc33", "/c/20261202T101506.000Z_ops-bot_03cc33.json"},
		{"x/y", "/c/20261202T101507.000Z_odd_x_y.json"},
	}
	key := func(c cert) (string, string) { return c.id, c.path }
	for _, tt := range []struct {
		ref  string
		i, n int
	}{
		{"02bb22", 2, 1},               // a cert_id
		{"02bb", 2, 1},                 // a unique part of it
		{"bb2", 2, 1},                  // anywhere in the id
		{"01aa1", 1, 1},                // a cert_id wins over the names it is a part of
		{"01aa", 0, 2},                 // a part of two ids: ambiguous
		{"ops-bot", 0, 2},              // a part of two file names (the agent id)
		{"ops-bot_03", 3, 1},           // any unique part of the file name
		{"20261202T101506", 3, 1},      // its time
		{"x/y", 4, 1},                  // an id is compared as it is, not as a name
		{"x_y", 4, 1},                  // and its file name carries it sanitised
		{"/c/", 0, 0},                  // the directory is not part of the name
		{"nope", 0, 0},                 // nothing
		{"", 0, 0},                     // an empty ref names nothing
		{".json", 0, len(list)},        // every name
		{"20261202T101503.123Z", 0, 1}, // the first
		{"01aa11.json", 0, 1},          // with the extension
		{"01AA11", 0, 0},               // case matters
		{"bot_01aa1.", 1, 1},           // up to the extension
		{"_bot_01aa1", 0, 2},           // both bot files
		{"ops-bot_02bb22.json", 2, 1},  // the end of a name
		{"T101505.000Z_ops-bot", 2, 1}, // the middle of a name
		{"20261202T101505.000Z_ops-bot_02bb22.json", 2, 1}, // a whole name
	} {
		i, n := Match(tt.ref, list, key)
		if n != tt.n || (n == 1 && i != tt.i) {
			t.Errorf("Match(%q) = %d, %d; want %d, %d", tt.ref, i, n, tt.i, tt.n)
		}
	}
	if _, n := Match("a", []cert(nil), key); n != 0 {
		t.Errorf("Match in an empty list: %d matches", n)
	}
}
