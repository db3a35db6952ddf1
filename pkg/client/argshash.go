package client

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// ArgsHash returns the hex sha256 of args as canonical JSON: object keys
// sorted, no spaces, no HTML escaping, no trailing newline. args goes through
// encoding/json first, so a struct and a map with the same JSON hash the same,
// and a json.RawMessage hashes as the value it encodes. Numbers keep the text
// encoding/json gives them (integers of any size stay exact). This is what
// Python's json.dumps(args, sort_keys=True, separators=(",", ":"),
// ensure_ascii=False) produces, so the Go and Python clients agree, except
// that Go writes U+2028 and U+2029 as \u2028 and \u2029, and floats may be
// written differently (Go's 1.0 is "1", Python's "1.0").
//
// It returns json.Marshal's error for a value that has no JSON encoding.
func ArgsHash(args any) (string, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return "", fmt.Errorf("hash tool args: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("hash tool args: %w", err)
	}
	var canonical bytes.Buffer
	enc := json.NewEncoder(&canonical)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // maps are written with sorted keys
		return "", fmt.Errorf("hash tool args: %w", err)
	}
	sum := sha256.Sum256(bytes.TrimSuffix(canonical.Bytes(), []byte("\n")))
	return hex.EncodeToString(sum[:]), nil
}
