// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseDaemonBudgets(t *testing.T) {
	d, err := ParseDaemon([]byte(`budgets:
  - {name: team-a, selector: "team=a,env!=dev", per: day, warn: 8, kill: 10.5}
  - name: all
    selector: team
    per: month
    kill: 100
`), "hk.yaml")
	require.NoError(t, err)
	require.Len(t, d.Budgets, 2)
	a := d.Budgets[0]
	require.Equal(t, "team-a", a.Name)
	require.Equal(t, PerDay, a.Per)
	require.Equal(t, 8.0, a.Warn)
	require.Equal(t, 10.5, a.Kill)
	require.Equal(t, 2, a.Line)
	require.True(t, a.Sel.Matches(map[string]string{"team": "a"}))
	require.False(t, a.Sel.Matches(map[string]string{"team": "a", "env": "dev"}))
	require.Equal(t, PerMonth, d.Budgets[1].Per)
	require.Equal(t, 3, d.Budgets[1].Line)
}

func TestParseDaemonBudgetErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, err string }{
		{"not a list", "budgets: {name: a}\n", `hk.yaml:1: budgets: must be a list of budgets such as [{name: team-a, selector: team=a, per: day, kill: 10}], got a mapping`},
		{"missing keys", "budgets:\n  - {kill: 1}\n", "hk.yaml:2: budgets[0].name: required\nhk.yaml:2: budgets[0].selector: required\nhk.yaml:2: budgets[0].per: required"},
		{"bad window", "budgets:\n  - {name: a, selector: t=a, per: week, kill: 1}\n", `hk.yaml:2: budgets[0].per: must be one of day, month, got "week"`},
		{"bad selector", "budgets:\n  - name: a\n    selector: \"t=a,,u\"\n    per: day\n    kill: 1\n", `hk.yaml:3: budgets[0].selector: selector "t=a,,u": requirement 2 is empty`},
		{"no amount", "budgets:\n  - {name: a, selector: t=a, per: day}\n", `hk.yaml:2: budgets[0].kill: a budget needs a kill amount, a warn amount, or both (USD)`},
		{"both zero", "budgets:\n  - {name: a, selector: t=a, per: day, warn: 0, kill: 0}\n", `hk.yaml:2: budgets[0].kill: warn and kill are both 0: set one above 0`},
		{"warn above kill", "budgets:\n  - name: a\n    selector: t=a\n    per: day\n    warn: 5\n    kill: 4\n", `hk.yaml:5: budgets[0].warn: 5 must be below kill (4)`},
		{"negative", "budgets:\n  - {name: a, selector: t=a, per: day, kill: -1}\n", `hk.yaml:2: budgets[0].kill: must not be negative, got -1`},
		{"bad name", "budgets:\n  - {name: \"a b\", selector: t=a, per: day, kill: 1}\n", `hk.yaml:2: budgets[0].name: "a b" must be up to 63 letters, digits, '_', '.', '-', starting with a letter or digit`},
		{"duplicate name", "budgets:\n  - {name: a, selector: t=a, per: day, kill: 1}\n  - {name: a, selector: t=b, per: day, kill: 1}\n", `hk.yaml:3: budgets[1].name: duplicate budget "a" (first at line 2)`},
		{"unknown key", "budgets:\n  - {name: a, selector: t=a, per: day, kil: 1}\n", `hk.yaml:2: budgets[0]: unknown key "kil" (known: name, selector, per, warn, kill); did you mean "kill"?` + "\n" + `hk.yaml:2: budgets[0].kill: a budget needs a kill amount, a warn amount, or both (USD)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseDaemon([]byte(tc.yaml), "hk.yaml")
			require.EqualError(t, err, tc.err)
			require.ErrorIs(t, err, ErrInvalid)
		})
	}
}
