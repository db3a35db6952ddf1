// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/hermeskill/hermeskilld/internal/connlimit"
)

// problem is an error the gateway itself answers, in the provider's own
// format so that the agent's SDK raises its usual exception for the
// status (401 authentication, 403 permission, 404 not found…).
type problem struct {
	status int
	code   string // OpenAI's error code; says what happened in both styles
	msg    string
	// check and reason: why the grant was revoked (403 only).
	check, reason string
	// noRetry: the SDKs must not retry it (x-should-retry: false, which
	// the official OpenAI and Anthropic SDKs obey over their own rules).
	noRetry bool
}

// anthropicTypes are Anthropic's error types by status.
var anthropicTypes = map[int]string{
	http.StatusUnauthorized:          "authentication_error",
	http.StatusForbidden:             "permission_error",
	http.StatusNotFound:              "not_found_error",
	http.StatusRequestEntityTooLarge: "request_too_large",
	http.StatusTooManyRequests:       "rate_limit_error",
	http.StatusServiceUnavailable:    "overloaded_error",
}

func (p problem) anthropicType() string {
	if t, ok := anthropicTypes[p.status]; ok {
		return t
	}
	if p.status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

func (p problem) openAIType() string {
	if p.code == "insufficient_quota" {
		return p.code // OpenAI's own, for a quota used up: its 429s say so
	}
	if p.status >= 500 {
		return "server_error"
	}
	return "invalid_request_error"
}

type openAIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
	Check   string  `json:"check,omitempty"`
	Reason  string  `json:"reason,omitempty"`
}

type anthropicError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Check   string `json:"check,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// body is the problem as the style's error response body:
//
//	openai:    {"error":{"message":…,"type":…,"param":null,"code":…}}
//	anthropic: {"type":"error","error":{"type":…,"message":…}}
//
// with "check" and "reason" beside the message for a revocation.
func (p problem) body(style Style) []byte {
	var v any
	if style == Anthropic {
		v = struct {
			Type  string         `json:"type"`
			Error anthropicError `json:"error"`
		}{"error", anthropicError{Type: p.anthropicType(), Message: p.msg, Check: p.check, Reason: p.reason}}
	} else {
		v = struct {
			Error openAIError `json:"error"`
		}{openAIError{Message: p.msg, Type: p.openAIType(), Code: p.code, Check: p.check, Reason: p.reason}}
	}
	b, _ := json.Marshal(v) // strings and a nil pointer: cannot fail
	return b
}

// write answers the request with the problem.
func (p problem) write(w http.ResponseWriter, style Style) {
	b := p.body(style)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	if p.noRetry {
		h.Set("X-Should-Retry", "false")
	}
	w.WriteHeader(p.status)
	_, _ = w.Write(b) // the agent going away is not ours to report
}

// event is the problem as the style's error event, ending a stream whose
// headers are already sent:
//
//	openai:    event: error / data: {"type":"error","message":…,"code":…,"error":{…}}
//	anthropic: event: error / data: {"type":"error","error":{"type":…,"message":…}}
//
// The OpenAI SDKs raise on an event whose data has an "error" member (chat
// completions) and on an "error" event (Responses API); this one is both.
func (p problem) event(style Style) []byte {
	var data []byte
	if style == Anthropic {
		data = p.body(Anthropic)
	} else {
		e := openAIError{Message: p.msg, Type: p.openAIType(), Code: p.code, Check: p.check, Reason: p.reason}
		data, _ = json.Marshal(struct {
			Type    string      `json:"type"`
			Message string      `json:"message"`
			Code    string      `json:"code"`
			Error   openAIError `json:"error"`
		}{"error", p.msg, p.code, e})
	}
	out := make([]byte, 0, len(data)+32)
	out = append(out, "event: error\ndata: "...)
	out = append(out, data...)
	return append(out, "\n\n"...)
}

// tooManyConns is the refusal of a connection over the gateway's bounds
// (package connlimit), written before any request is read: one body both
// styles' SDKs read as their error for a 503 (OpenAI's error.message,
// type and code; Anthropic's type "error" and error.type), which they
// retry after Retry-After.
func tooManyConns(perPeer bool) []byte {
	msg := "hermeskilld llm gateway: too many connections open in total; close idle ones"
	if perPeer {
		msg = "hermeskilld llm gateway: too many connections open from this user; close idle ones"
	}
	body, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{
		"type": "overloaded_error", "message": msg, "param": nil, "code": "too_many_connections"}})
	return connlimit.HTTPRefusal(http.StatusServiceUnavailable, body)
}
