// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// zeroHash is prev_sha256 on the first line of a fresh chain.
var zeroHash = strings.Repeat("0", 2*sha256.Size)

// record is one line. Its field order is the key order of the line format (doc.go): change it
// and every reader that relies on the documented layout breaks.
type record struct {
	Seq        uint64          `json:"seq"`
	Time       string          `json:"time"`
	Type       string          `json:"type"`
	AgentID    string          `json:"agent_id,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
	TornBytes  int64           `json:"torn_bytes,omitempty"`
	PrevSHA256 string          `json:"prev_sha256"`
}

// encodeLine returns rec as one line, "\n" included.
func encodeLine(rec record) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	// Encode ends the value with the "\n" the line needs; encoding/json escapes control
	// characters in strings and compacts RawMessage, so that is the only newline.
	if err := enc.Encode(rec); err != nil {
		return nil, fmt.Errorf("encode audit line: %w", err)
	}
	return buf.Bytes(), nil
}

// marshalData turns Event.Data into the raw value of "data"; nil for no data.
func marshalData(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode audit data: %w", err)
	}
	data := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if bytes.Equal(data, []byte("null")) {
		return nil, nil
	}
	return data, nil
}

// hashLine is the prev_sha256 the line after line must carry; line has no "\n".
func hashLine(line []byte) string {
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:])
}

// formatTime is the time field's layout.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// link is the part of a line the chain is made of, and its type.
type link struct {
	seq  uint64
	prev string
	typ  string
}

var errNotJSON = errors.New("not JSON")

// decodeLink reads seq and prev_sha256 from line (no "\n"). Its errors are the Reasons of a
// BrokenError: errNotJSON, or "not an audit record: …".
func decodeLink(line []byte) (link, error) {
	if !json.Valid(line) {
		return link{}, errNotJSON
	}
	var raw struct {
		Seq  *uint64 `json:"seq"`
		Type any     `json:"type"` // any: a type that is not a string is not a chain break
		Prev *string `json:"prev_sha256"`
	}
	if err := json.Unmarshal(line, &raw); err != nil {
		return link{}, notRecord("not an object with a numeric seq and a string prev_sha256")
	}
	switch {
	case raw.Seq == nil:
		return link{}, notRecord("no seq")
	case raw.Prev == nil:
		return link{}, notRecord("no prev_sha256")
	case !isHash(*raw.Prev):
		return link{}, notRecord("prev_sha256 is not 64 lowercase hex digits")
	}
	typ, _ := raw.Type.(string)
	return link{seq: *raw.Seq, prev: *raw.Prev, typ: typ}, nil
}

func notRecord(detail string) error { return errors.New("not an audit record: " + detail) }

func isHash(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
