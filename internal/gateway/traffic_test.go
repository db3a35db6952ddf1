// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/gateway"
)

// traffic is a TrafficObserver that queues what it is told, in order.
type traffic chan told

// told is one call of a TrafficObserver: "arrived", "gone" or "request".
type told struct {
	what string
	at   time.Time
	rec  gateway.Record
}

var _ gateway.TrafficObserver = traffic(nil)

func (tr traffic) put(v told) {
	select {
	case tr <- v:
	default:
		panic("traffic: queue full")
	}
}

func (tr traffic) Arrived(at time.Time)     { tr.put(told{what: "arrived", at: at}) }
func (tr traffic) Gone(at time.Time)        { tr.put(told{what: "gone", at: at}) }
func (tr traffic) Request(r gateway.Record) { tr.put(told{what: "request", rec: r}) }

func (tr traffic) next(t testing.TB, what string) told {
	t.Helper()
	select {
	case v := <-tr:
		require.Equal(t, what, v.what, "%+v", v)
		return v
	case <-time.After(waitRecord):
		t.Fatalf("not told %q", what)
		return told{}
	}
}

func (tr traffic) none(t testing.TB) {
	t.Helper()
	select {
	case v := <-tr:
		t.Fatalf("told %+v", v)
	default:
	}
}

// Each request of a grant is told as it arrives, then once more as it
// ends (its record), so that a request in flight can hold the run's
// heartbeat: an answer, a failure, a refusal and a stream still coming.
func TestTrafficArrivalThenRecord(t *testing.T) {
	release := make(chan struct{})
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("case") {
		case "fail":
			http.Error(w, `{"error":{"message":"overloaded","type":"server_error"}}`, http.StatusInternalServerError)
		case "stream":
			sse(w, `{"id":"c","object":"chat.completion.chunk","model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"content":"hi"}}]}`)
			<-release
			sse(w, `{"id":"c","object":"chat.completion.chunk","model":"gpt-4.1-mini","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, "[DONE]")
		default:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, chatCompletion)
		}
	}, nil)
	tr := make(traffic, 64)
	_, vars := e.grant(t, tr)
	base, handle := vars["OPENAI_BASE_URL"], vars["OPENAI_API_KEY"]
	body := `{"model":"gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`

	readAll(t, e.post(t, gateway.OpenAI, base+"/chat/completions", handle, body))
	arrived := tr.next(t, "arrived")
	rec := tr.next(t, "request").rec
	require.True(t, arrived.at.Equal(rec.At), "the arrival is the record's At")
	require.True(t, rec.Answered())

	readAll(t, e.post(t, gateway.OpenAI, base+"/chat/completions?case=fail", handle, body))
	tr.next(t, "arrived")
	rec = tr.next(t, "request").rec
	require.Equal(t, http.StatusInternalServerError, rec.Status)
	require.False(t, rec.Answered(), "an error status is no answer")

	readAll(t, e.post(t, gateway.OpenAI, base+"/no/such/path", handle, body))
	tr.next(t, "arrived")
	rec = tr.next(t, "request").rec
	require.True(t, rec.Refused)
	require.False(t, rec.Answered())

	resp := e.post(t, gateway.OpenAI, base+"/chat/completions?case=stream", handle,
		`{"model":"gpt-4.1-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	first, err := eventReader{bufio.NewReader(resp.Body)}.next()
	require.NoError(t, err)
	require.Contains(t, first, `"hi"`)
	tr.next(t, "arrived")
	tr.none(t) // in flight: no record while the stream is still coming
	close(release)
	readAll(t, resp)
	rec = tr.next(t, "request").rec
	require.True(t, rec.Stream)
	require.True(t, rec.Answered())

	// Without the handle the request is nobody's: nothing is told.
	readAll(t, e.post(t, gateway.OpenAI, base+"/chat/completions", "hk-nobody", body))
	tr.none(t)
}

// A request whose body never comes whole (the agent went away) leaves no
// record: its end is told as Gone, so that it holds nothing.
func TestTrafficGoneWithoutRecord(t *testing.T) {
	e := newEnv(t, nil, nil)
	tr := make(traffic, 8)
	_, vars := e.grant(t, tr)
	u, err := url.Parse(vars["OPENAI_BASE_URL"])
	require.NoError(t, err)
	c, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	_, err = fmt.Fprintf(c, "POST %s/chat/completions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\":", u.Path, u.Host, vars["OPENAI_API_KEY"])
	require.NoError(t, err)
	arrived := tr.next(t, "arrived")
	require.NoError(t, c.Close())
	gone := tr.next(t, "gone")
	require.False(t, gone.at.Before(arrived.at))
	tr.none(t)
	require.Empty(t, e.openai.requests())
}
