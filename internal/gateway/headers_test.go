// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What the gateway never forwards, both ways: the agent's handle and
// cookies, what names its connection (Forwarded, X-Forwarded-*,
// X-Real-Ip; none is added), Accept-Encoding, hop-by-hop headers and those
// Connection names, Te, a request body's framing; the upstream's cookies,
// Alt-Svc, hop-by-hop headers, trailers and informational (1xx) responses.
// The other headers pass as they are.
func TestHeadersNotForwarded(t *testing.T) {
	var host string
	var hmu sync.Mutex
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		hmu.Lock()
		host = r.Host
		hmu.Unlock()
		h := w.Header()
		h.Set("Link", "</style.css>; rel=preload")
		h.Set("Set-Cookie", "early=1")
		w.WriteHeader(http.StatusEarlyHints)
		h.Del("Link")
		h.Set("Content-Type", "application/json")
		h.Set("X-Request-Id", "req_1")
		h.Set("Set-Cookie", "__cf_bm=x")
		h.Set("Alt-Svc", `h3=":443"`)
		h.Set("Connection", "X-Hop-Up")
		h.Set("X-Hop-Up", "1")
		h.Set("Keep-Alive", "timeout=5")
		h.Set("Trailer", "X-Checksum")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(chatCompletion))
		h.Set("X-Checksum", "abc")
	}, nil)
	recs := newRecords()
	_, vars := e.grant(t, recs)

	req, err := http.NewRequest(http.MethodPost, vars["OPENAI_BASE_URL"]+"/chat/completions", strings.NewReader(`{"model":"gpt-4.1-mini"}`))
	require.NoError(t, err)
	for k, v := range map[string]string{
		"Authorization":       "Bearer " + vars["OPENAI_API_KEY"],
		"X-Api-Key":           vars["OPENAI_API_KEY"],
		"Cookie":              "session=agent",
		"Forwarded":           "for=10.0.0.1",
		"X-Forwarded-For":     "10.0.0.1",
		"X-Forwarded-Host":    "agent.example",
		"X-Forwarded-Proto":   "https",
		"X-Real-Ip":           "10.0.0.1",
		"Accept-Encoding":     "br",
		"Te":                  "trailers",
		"Connection":          "X-Hop-Down",
		"X-Hop-Down":          "1",
		"Proxy-Authorization": "Basic eDp5",
		"User-Agent":          "agent/1.0",
		"Openai-Organization": "org-1",
		"Content-Type":        "application/json",
	} {
		req.Header.Set(k, v)
	}
	var infos []int
	var imu sync.Mutex
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
		imu.Lock()
		infos = append(infos, code)
		imu.Unlock()
		return nil
	}}
	resp, err := e.agent.Do(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	require.NoError(t, err)
	body := readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, chatCompletion, body)

	up := e.openai.requests()
	require.Len(t, up, 1)
	got := up[0].Header
	assert.Equal(t, []string{"Bearer " + openaiKey}, got.Values("Authorization"), "the key replaces the handle")
	for _, k := range []string{"X-Api-Key", "Cookie", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host",
		"X-Forwarded-Proto", "X-Real-Ip", "Te", "Connection", "X-Hop-Down", "Proxy-Authorization", "Transfer-Encoding"} {
		assert.Empty(t, got.Values(k), "%s reached the upstream", k)
	}
	assert.Equal(t, "gzip", got.Get("Accept-Encoding"), "the transport's own, not the agent's")
	assert.Equal(t, "agent/1.0", got.Get("User-Agent"))
	assert.Equal(t, "org-1", got.Get("Openai-Organization"))
	assert.Equal(t, "24", got.Get("Content-Length"))
	hmu.Lock()
	assert.Equal(t, strings.TrimPrefix(e.openai.URL, "http://"), host, "the upstream's host, not the gateway's")
	hmu.Unlock()
	for k, vv := range got {
		for _, v := range vv {
			assert.NotContains(t, v, vars["OPENAI_API_KEY"], "the handle reached the upstream in %s", k)
		}
	}

	for _, k := range []string{"Set-Cookie", "Alt-Svc", "X-Hop-Up", "Keep-Alive", "Trailer", "Link"} {
		assert.Empty(t, resp.Header.Values(k), "%s reached the agent", k)
	}
	assert.Empty(t, resp.Trailer, "the upstream's trailers are not forwarded")
	assert.Equal(t, "req_1", resp.Header.Get("X-Request-Id"))
	imu.Lock()
	assert.Empty(t, infos, "the upstream's informational responses are not forwarded")
	imu.Unlock()
	rec := recs.next(t)
	assert.Equal(t, http.StatusOK, rec.Status)
	assert.Equal(t, int64(1000), rec.InputTokens)
}
