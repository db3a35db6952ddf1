// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package client_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/pkg/client"
)

func hashOf(t *testing.T, v any) string {
	t.Helper()
	h, err := client.ArgsHash(v)
	require.NoError(t, err)
	return h
}

func TestArgsHash(t *testing.T) {
	hash := func(v any) string { return hashOf(t, v) }

	require.Equal(t, pinnedHash, hash(map[string]any{"q": "a<b", "n": 1}), "agrees with Python")
	require.Equal(t, pinnedHash, hash(map[string]any{"n": 1, "q": "a<b"}), "key order does not matter")
	require.Equal(t, pinnedHash, hash(struct {
		Q string `json:"q"`
		N int    `json:"n"`
	}{"a<b", 1}), "a struct hashes as its JSON")
	require.Equal(t, pinnedHash, hash(json.RawMessage(`{ "q" : "a\u003cb", "n" : 1 }`)), "raw JSON is canonicalised")

	require.NotEqual(t, hash(map[string]any{"q": "a"}), hash(map[string]any{"q": "b"}))
	require.Equal(t, hash(map[string]any{"b": []int{1, 2}, "a": map[string]int{"y": 1, "x": 2}}),
		hash(json.RawMessage(`{"a":{"x":2,"y":1},"b":[1,2]}`)), "nested objects are sorted too")
	require.Equal(t, hash(json.RawMessage(`{"n":12345678901234567890}`)),
		hash(map[string]uint64{"n": 12345678901234567890}), "big integers stay exact")

	for _, bad := range []any{make(chan int), math.NaN(), func() {}} {
		_, err := client.ArgsHash(bad)
		require.Error(t, err, "%T", bad)
	}
}

// The same arguments hash the same in the Go and the Python client
// (clients/python/test_hermeskill.py holds the same table; more cases
// as JSON texts in clients/testdata/canonical-args.json), whether they
// come as Go values or as the JSON a model wrote.
func TestArgsHashSharedWithPython(t *testing.T) {
	for _, c := range []struct {
		name string
		want string
		args []any // each must hash to want
	}{
		{"non-ASCII object", "c97cb19630ee6d7f6e09e87a9697336b6db877794915e562547770f4e43130ff", []any{
			map[string]any{"city": "Zürich", "q": "東京 café 😀", "sep": "\u2028"},
			json.RawMessage(`{"sep":"\u2028","q":"\u6771\u4eac caf\u00e9 \ud83d\ude00","city":"Z\u00fcrich"}`),
		}},
		{"plain string", "a0e1e8e603cc0f07843bfd4ce0f218626ce3ad45b764f44db419b1c390e1eece", []any{
			"SELECT * FROM users",
			json.RawMessage(`"SELECT * FROM users"`),
		}},
		{"non-ASCII string", "81af71ed60efb1ec771e47673552799c29fcfa0c899c66051bd71fe9f7e93476", []any{
			"naïve résumé — 東京",
			json.RawMessage(`"na\u00efve r\u00e9sum\u00e9 \u2014 東京"`),
		}},
		{"a string is not parsed", "cf83cef24c44460dd65f58ac435b11ca1d752ccd2aa2e4da82698923408f01c6", []any{
			`{"q":1}`,
		}},
		{"control characters", "e657e99fddbd08831d6ff78450dbec66961df7179abf69b9f56e982f16854d3e", []any{
			"tab\tnl\nnul\x00del\x7f",
			json.RawMessage(`"tab\u0009nl\u000anul\u0000del` + "\x7f" + `"`),
		}},
		{"numbers", "7b7253cc734685bcf9f0e7c88df27d717ba158e03744289eb1c7b445669a11fa", []any{
			map[string]any{"half": 0.5, "small": 1e-7, "big": 1e21, "n": -3},
			json.RawMessage(`{"half":5e-1,"small":0.00000010,"big":1E21,"n":-3}`),
		}},
		{"invalid UTF-8 and lone surrogates are U+FFFD", "568601070314e0f4489c9944b3c151d5251d379330008293bb7e1a826a22a845", []any{
			"\ufffd",
			"\xff",
			json.RawMessage(`"\ud800"`),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, args := range c.args {
				require.Equal(t, c.want, hashOf(t, args), "%#v", args)
			}
		})
	}
}

// The vectors every client's tests read: each JSON text, hashed by value,
// gives the vector's hash, which is the sha256 of its canonical form.
func TestArgsHashSharedVectors(t *testing.T) {
	raw, err := os.ReadFile("../../clients/testdata/canonical-args.json")
	require.NoError(t, err)
	var doc struct {
		Vectors []struct {
			Name      string   `json:"name"`
			JSON      []string `json:"json"`
			Canonical string   `json:"canonical"`
			SHA256    string   `json:"sha256"`
		} `json:"vectors"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.NotEmpty(t, doc.Vectors)
	for _, v := range doc.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			sum := sha256.Sum256([]byte(v.Canonical))
			require.Equal(t, v.SHA256, hex.EncodeToString(sum[:]), "the canonical form's hash")
			for _, text := range v.JSON {
				require.Equal(t, v.SHA256, hashOf(t, json.RawMessage(text)), text)
			}
		})
	}
}

// Numbers are written as Python writes the value json.loads reads: an
// integer exactly, anything else as a float in repr's form.
func TestArgsHashNumbers(t *testing.T) {
	for _, c := range []struct{ raw, canonical string }{
		{`[1.50, 1E2, 0.1e1, 2.5e-3]`, `[1.5,100.0,1.0,0.0025]`},
		{`[-0, -0.0, 0e5]`, `[0,-0.0,0.0]`},
		{`[1e15, 1e16, 123456789012345678.0]`, `[1000000000000000.0,1e+16,1.2345678901234568e+17]`},
		{`[0.0001, 0.00001, 1.5e-10]`, `[0.0001,1e-05,1.5e-10]`},
		{`[1e400, -1e400, 1e-400]`, `[Infinity,-Infinity,0.0]`},
		{`[12345678901234567890123, -7]`, `[12345678901234567890123,-7]`},
	} {
		sum := sha256.Sum256([]byte(c.canonical))
		require.Equal(t, hex.EncodeToString(sum[:]), hashOf(t, json.RawMessage(c.raw)), c.raw)
	}
	require.Equal(t, hashOf(t, json.RawMessage(`1`)), hashOf(t, 1.0), "encoding/json writes float64(1) as 1")
	require.Equal(t, hashOf(t, json.RawMessage(`1e-07`)), hashOf(t, 1e-7))
}
