package client_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/pkg/client"
)

func TestArgsHash(t *testing.T) {
	hash := func(v any) string {
		t.Helper()
		h, err := client.ArgsHash(v)
		require.NoError(t, err)
		return h
	}

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

	_, err := client.ArgsHash(make(chan int))
	require.Error(t, err)
}
