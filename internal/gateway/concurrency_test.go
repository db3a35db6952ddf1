// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/gateway"
)

// Many runs at once, each streaming and not on both styles, one of them
// revoked half way: every request is counted once, in its own grant.
func TestConcurrentGrants(t *testing.T) {
	const grants, perGrant = 8, 24
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Stream bool }
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.Stream {
			streamingChatChunks(w)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, chatCompletion)
	}, func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Stream bool }
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.Stream {
			sse(w, anthropicStream...)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, anthropicMessage)
	})

	type run struct {
		gr   *gateway.Grant
		vars map[string]string
		recs records
	}
	runs := make([]run, grants)
	for i := range runs {
		runs[i].recs = newRecords()
		runs[i].gr, runs[i].vars = e.grant(t, runs[i].recs)
	}
	var wg sync.WaitGroup
	statuses := make([][]int, grants)
	for i := range runs {
		statuses[i] = make([]int, perGrant)
		for j := range perGrant {
			wg.Go(func() {
				rn := runs[i]
				if i == 0 && j == perGrant/2 {
					rn.gr.Revoke("cost", "test")
				}
				stream := j%2 == 0
				var resp *http.Response
				if j%4 < 2 {
					resp = e.post(t, gateway.OpenAI, rn.vars["OPENAI_BASE_URL"]+"/chat/completions", rn.vars["OPENAI_API_KEY"],
						jsonBody(t, map[string]any{"model": "gpt-4.1-mini", "stream": stream}))
				} else {
					resp = e.post(t, gateway.Anthropic, rn.vars["ANTHROPIC_BASE_URL"]+"/v1/messages", rn.vars["ANTHROPIC_API_KEY"],
						jsonBody(t, map[string]any{"model": "claude-sonnet-4-0", "stream": stream}))
				}
				readAll(t, resp)
				statuses[i][j] = resp.StatusCode
			})
		}
	}
	wg.Wait()

	for i, rn := range runs {
		m := rn.gr.Metered()
		require.Equal(t, int64(perGrant), m.Requests+m.Refused, "grant %d", i)
		var tokens int64
		for range perGrant {
			rec := rn.recs.next(t)
			tokens += rec.Tokens()
			if !rec.Refused && !rec.Cut {
				assert.False(t, rec.Incomplete, "grant %d", i)
				assert.Len(t, rec.ToolCalls, 2)
			}
		}
		assert.Equal(t, tokens, m.Tokens, "grant %d: Metered is the sum of its records", i)
		if i == 0 {
			assert.NotZero(t, m.Refused)
			continue
		}
		assert.Zero(t, m.Refused)
		assert.Equal(t, int64(perGrant/4*(1200+70+1170+1170)), m.Tokens, "grant %d", i)
		for _, s := range statuses[i] {
			assert.Equal(t, http.StatusOK, s)
		}
	}
}

// streamingChatChunks is a streamed chat completion with its usage chunk.
func streamingChatChunks(w http.ResponseWriter) { sse(w, chatChunks(true)...) }
