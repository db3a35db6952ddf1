// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package labels_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/labels"
)

func TestMatches(t *testing.T) {
	none := map[string]string{}
	empty := map[string]string{"team": ""}
	a := map[string]string{"team": "a", "gpu": "h100"}
	b := map[string]string{"team": "b"}
	for _, c := range []struct {
		sel               string
		none, empty, a, b bool
	}{
		{"team=", false, true, false, false},
		{"team=a", false, false, true, false},
		{"team==a", false, false, true, false},
		{"team!=a", true, true, false, true},
		{"team!=", true, false, true, true},
		{"team", false, true, true, true},
		{"!team", true, false, false, false},
		{"team=a,gpu", false, false, true, false},
		{"team!=a,!gpu", true, true, false, true},
		{" team = a , gpu ", false, false, true, false},
		{"team,team!=b", false, true, true, false},
	} {
		sel, err := labels.Parse(c.sel)
		require.NoError(t, err, c.sel)
		assert.Equal(t, c.none, sel.Matches(none), "%q on no labels", c.sel)
		assert.Equal(t, c.empty, sel.Matches(empty), "%q on team=\"\"", c.sel)
		assert.Equal(t, c.a, sel.Matches(a), "%q on team=a", c.sel)
		assert.Equal(t, c.b, sel.Matches(b), "%q on team=b", c.sel)
		again, err := labels.Parse(sel.String())
		require.NoError(t, err, "the canonical form %q reads back", sel.String())
		assert.Equal(t, sel, again)
	}
}

func TestParseStrict(t *testing.T) {
	for _, s := range []string{
		"", " ", ",", "team=a,", ",team=a", "team=a,,gpu",
		"=a", "!=a", "!", "! ", "!team=a", "te am=a", "9team=a", "team=a=b", "team=!a", "team!=a!",
		"team=a,team=b", "team,!team", "!team,team=a", "team=a,team!=a",
	} {
		_, err := labels.Parse(s)
		assert.Error(t, err, "%q", s)
	}
	var zero labels.Selector
	assert.False(t, zero.Matches(map[string]string{}), "the empty selector selects nothing")
	assert.False(t, zero.Matches(map[string]string{"team": "a"}))
}

func TestJSON(t *testing.T) {
	type req struct {
		Selector labels.Selector `json:"selector,omitzero"`
	}
	b, err := json.Marshal(req{Selector: labels.MustParse("team=a,!canary")})
	require.NoError(t, err)
	assert.JSONEq(t, `{"selector":"!canary,team=a"}`, string(b))
	b, err = json.Marshal(req{})
	require.NoError(t, err)
	assert.JSONEq(t, `{}`, string(b))

	var r req
	require.NoError(t, json.Unmarshal([]byte(`{"selector":"team!=a"}`), &r))
	assert.Equal(t, "team!=a", r.Selector.String())
	// The older form, an object of equalities, as stored rules hold it:
	// present-and-equal, so {"team":""} no longer matches a missing label.
	require.NoError(t, json.Unmarshal([]byte(`{"selector":{"team":"","model":"x"}}`), &r))
	assert.Equal(t, "model=x,team=", r.Selector.String())
	assert.False(t, r.Selector.Matches(map[string]string{"model": "x"}))
	for _, bad := range []string{`{"selector":{"":"v"}}`, `{"selector":"a,,b"}`, `{"selector":3}`, `{"selector":["a"]}`} {
		assert.Error(t, json.Unmarshal([]byte(bad), &r), bad)
	}
}

func TestFlag(t *testing.T) {
	var f labels.Flag
	require.NoError(t, f.Set("team=a"))
	require.NoError(t, f.Set("!canary"))
	assert.Equal(t, "!canary,team=a", f.String())
	assert.Error(t, f.Set("team=b"), "a repeated flag cannot contradict the first")
	assert.Error(t, f.Set(""))
}
