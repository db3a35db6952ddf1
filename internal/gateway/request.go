// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// DefaultMaxOutputTokens is the output a request is reserved for when it
// names no bound of its own (max_tokens, max_completion_tokens,
// max_output_tokens).
const DefaultMaxOutputTokens = 4096

// reqInfo is what the gateway reads from an agent's request body: the
// members the provider acts on, looked up by their exact names, as the
// provider's own parser does (encoding/json's struct decoding folds case
// and Unicode: "ſtream" would be read as "stream", which the provider
// ignores).
type reqInfo struct {
	json       bool   // the body is a JSON object
	model      string // "model", when a string
	stream     bool   // "stream": true
	hasOpts    bool   // "stream_options" is an object
	usageOpt   bool   // "stream_options"."include_usage": true
	background bool   // "background": true
	maxOut     int64  // the largest of the output bounds; 0: none
}

// errDuplicateKey is a body with a member named twice: providers differ in
// which one they take, so the gateway cannot know what it will be charged
// for.
var errDuplicateKey = errors.New("duplicate key")

// parseRequest reads a request body. A body that is not a JSON object is
// not an error (the upstream answers it); one with a top-level member, or
// a member of stream_options, named twice is.
func parseRequest(body []byte) (reqInfo, error) {
	var info reqInfo
	top, err := objectMembers(body)
	if err != nil {
		if errors.Is(err, errDuplicateKey) {
			return info, err
		}
		return info, nil
	}
	info.json = true
	_ = json.Unmarshal(top["model"], &info.model)
	info.stream = isTrue(top["stream"])
	info.background = isTrue(top["background"])
	if raw, ok := top["stream_options"]; ok {
		opts, err := objectMembers(raw)
		if errors.Is(err, errDuplicateKey) {
			return info, fmt.Errorf("stream_options: %w", err)
		}
		if err == nil {
			info.hasOpts = true
			info.usageOpt = isTrue(opts["include_usage"])
		}
	}
	for _, k := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
		var n float64
		if json.Unmarshal(top[k], &n) == nil && n > float64(info.maxOut) {
			info.maxOut = int64(min(n, 1<<40))
		}
	}
	return info, nil
}

func isTrue(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("true")) }

// objectMembers splits a JSON object into its members by exact name,
// refusing one named twice (errDuplicateKey naming it). Anything else
// than one object is an error.
func objectMembers(b []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not an object")
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, ok := t.(string)
		if !ok {
			return nil, errors.New("not an object")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%w %q", errDuplicateKey, truncate(k, 64))
		}
		out[k] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the object")
	}
	return out, nil
}

// reservation is what a request may cost at most, charged when it starts
// and replaced by its metered usage when that is read.
type reservation struct {
	in, out int64
	usd     float64
	priced  bool
	// bounded: out is the request's own output bound, not the default.
	bounded bool
}

// reserve estimates a request's worst case: its body's bytes / 4 as input
// tokens (a token is about four bytes of English; JSON punctuation makes
// the estimate generous), and its output bound, else
// DefaultMaxOutputTokens, as output tokens (none for embeddings).
func (g *Gateway) reserve(ep endpoint, body []byte, info reqInfo) reservation {
	r := reservation{in: int64(len(body)+3) / 4, out: info.maxOut, bounded: info.maxOut > 0}
	if r.out <= 0 {
		r.out = g.cfg.DefaultMaxOutputTokens
	}
	if ep == epEmbeddings {
		r.out = 0
	}
	r.usd, r.priced = g.cfg.Prices.Cost(info.model, r.in, r.out, 0)
	return r
}

// isWebSocket is a request to open a WebSocket (the Responses API's
// WebSocket transport): the gateway meters HTTP responses only.
func isWebSocket(r *http.Request) bool {
	for _, v := range r.Header.Values("Upgrade") {
		for _, p := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(p), "websocket") {
				return true
			}
		}
	}
	return false
}
