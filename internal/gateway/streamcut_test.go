// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/gateway"
)

// delta is the text of each event of an endless stream: 40 bytes, 10
// output tokens as the gateway counts them.
const delta = "Lorem ipsum dolor sit amet, consectetur "

// deltaTokens is what the gateway counts of one delta.
const deltaTokens = int64(len(delta)+3) / 4

// maxEvents bounds an endless stream: a stream the gateway does not cut
// ends after them.
const maxEvents = 20_000

// endless is an upstream that streams deltas in style's protocol until
// the client goes away (or maxEvents), and counts what it served.
type endless struct {
	style  string // "chat", "responses" or "messages"
	model  string
	served atomic.Int64 // delta events written
	// gone gets a value when a stream's client went away before its end
	gone chan struct{}
}

func newEndless(style, model string) *endless {
	return &endless{style: style, model: model, gone: make(chan struct{}, 64)}
}

func (u *endless) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	write := func(ev string) bool {
		if _, err := io.WriteString(w, ev+"\n\n"); err != nil {
			return false
		}
		return http.NewResponseController(w).Flush() == nil
	}
	var start, each, end []string
	switch u.style {
	case "chat":
		chunk := func(d string) string {
			return `data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1700000000,"model":"` + u.model +
				`","choices":[{"index":0,"delta":` + d + `,"finish_reason":null}]}`
		}
		start = []string{chunk(`{"role":"assistant","content":""}`)}
		each = []string{chunk(`{"content":"` + delta + `"}`)}
		end = []string{`data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1700000000,"model":"` + u.model +
			`","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, "data: [DONE]"}
	case "responses":
		resp := `{"id":"resp_9","object":"response","created_at":1700000000,"status":"in_progress","model":"` + u.model + `","output":[],"usage":null}`
		start = []string{
			`event: response.created` + "\n" + `data: {"type":"response.created","sequence_number":0,"response":` + resp + `}`,
			`event: response.output_item.added` + "\n" + `data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_9","type":"message","status":"in_progress","role":"assistant","content":[]}}`,
			`event: response.content_part.added` + "\n" + `data: {"type":"response.content_part.added","sequence_number":2,"item_id":"msg_9","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`,
		}
		each = []string{`event: response.output_text.delta` + "\n" + `data: {"type":"response.output_text.delta","sequence_number":%d,"item_id":"msg_9","output_index":0,"content_index":0,"delta":"` + delta + `"}`}
		end = []string{`event: response.completed` + "\n" + `data: {"type":"response.completed","sequence_number":%d,"response":{"id":"resp_9","object":"response","status":"completed","model":"` + u.model + `","output":[],"usage":{"input_tokens":10,"output_tokens":10,"total_tokens":20}}}`}
	case "messages":
		start = []string{
			`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_9","type":"message","role":"assistant","model":"` + u.model + `","content":[],"stop_reason":null,"usage":{"input_tokens":40,"output_tokens":1}}}`,
			`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		}
		each = []string{`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + delta + `"}}`}
		end = []string{`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`,
			`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":10}}`,
			`event: message_stop` + "\n" + `data: {"type":"message_stop"}`}
	}
	seq := len(start)
	for _, ev := range start {
		if !write(ev) {
			u.gone <- struct{}{}
			return
		}
	}
	for range maxEvents {
		ev := each[0]
		if strings.Contains(ev, "%d") {
			ev = fmt.Sprintf(ev, seq)
		}
		seq++
		if r.Context().Err() != nil || !write(ev) {
			u.gone <- struct{}{}
			return
		}
		u.served.Add(1)
		// The pace is the behaviour under test, not a wait: a model
		// streams its tokens over time and the gateway must cut the
		// stream while it flows. 200µs an event is faster than any model.
		time.Sleep(200 * time.Microsecond)
	}
	for _, ev := range end {
		if strings.Contains(ev, "%d") {
			ev = fmt.Sprintf(ev, seq)
		}
		write(ev)
	}
}

// cutCase is a protocol's stream and where it goes.
type cutCase struct {
	name, style, path string
	upstream          gateway.Style
	model             string
	outPrice          float64 // USD per output token, as newEnv's prices say
	body              string
}

var cutCases = []cutCase{
	{"chat", "chat", "/chat/completions", gateway.OpenAI, "gpt-4.1-mini", 1.60 / 1e6,
		`{"model":"gpt-4.1-mini","stream":true,"messages":[{"role":"user","content":"write forever"}]}`},
	{"chat-include-usage", "chat", "/chat/completions", gateway.OpenAI, "gpt-4.1-mini", 1.60 / 1e6,
		`{"model":"gpt-4.1-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"write forever"}]}`},
	{"responses", "responses", "/responses", gateway.OpenAI, "gpt-4.1-mini", 1.60 / 1e6,
		`{"model":"gpt-4.1-mini","stream":true,"input":"write forever"}`},
	{"messages", "messages", "/v1/messages", gateway.Anthropic, "claude-sonnet-4-20250514", 15.0 / 1e6,
		`{"model":"claude-sonnet-4-20250514","stream":true,"messages":[{"role":"user","content":"write forever"}]}`},
}

// postStream sends c's request and returns the events the agent got.
func postStream(t *testing.T, e *env, vars map[string]string, c cutCase) []string {
	t.Helper()
	base, key := vars["OPENAI_BASE_URL"], vars["OPENAI_API_KEY"]
	if c.upstream == gateway.Anthropic {
		base, key = vars["ANTHROPIC_BASE_URL"], vars["ANTHROPIC_API_KEY"]
	}
	resp := e.post(t, c.upstream, base+c.path, key, c.body)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	er := eventReader{bufio.NewReader(resp.Body)}
	var got []string
	for {
		ev, err := er.next()
		if err == io.EOF {
			require.Empty(t, ev, "the stream ends after a whole event")
			return got
		}
		require.NoError(t, err, "the stream ends in good order, not broken")
		got = append(got, ev)
	}
}

// eventData is an event's data, decoded.
func eventData(t *testing.T, ev string) map[string]any {
	t.Helper()
	_, data, ok := strings.Cut(ev, "data: ")
	require.True(t, ok, ev)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(data), &v), ev)
	return v
}

// A stream that crosses the budget ends at once with its protocol's own
// ending of an answer cut at its output bound; the upstream sees the
// client go away; the stream costs the budget and at most one event more,
// which the record and Metered give as the overshoot.
func TestStreamCutAtBudget(t *testing.T) {
	for _, c := range cutCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			up := newEndless(c.style, c.model)
			e := newEnv(t, up.ServeHTTP, up.ServeHTTP)
			recs := newRecords()
			gr, vars := e.grant(t, recs)
			const budget = 0.002
			gr.SetBudget(gateway.Budget{CostUSD: budget})

			got := postStream(t, e, vars, c)
			eventUSD := float64(deltaTokens) * c.outPrice
			switch c.style {
			case "chat":
				require.GreaterOrEqual(t, len(got), 3)
				assert.Equal(t, "data: [DONE]", got[len(got)-1])
				last := got[len(got)-2]
				if strings.Contains(c.body, "include_usage") {
					u := eventData(t, last)
					assert.Empty(t, u["choices"])
					usage := u["usage"].(map[string]any)
					assert.Positive(t, usage["completion_tokens"])
					last = got[len(got)-3]
				} else {
					assert.NotContains(t, strings.Join(got, "\n"), `"usage":{`, "no usage chunk the agent did not ask for")
				}
				fin := eventData(t, last)
				assert.Equal(t, "chatcmpl-9", fin["id"])
				assert.Equal(t, "chat.completion.chunk", fin["object"])
				ch := fin["choices"].([]any)[0].(map[string]any)
				assert.Equal(t, "length", ch["finish_reason"])
			case "responses":
				last := got[len(got)-1]
				assert.True(t, strings.HasPrefix(last, "event: response.incomplete\n"), last)
				v := eventData(t, last)
				assert.Equal(t, "response.incomplete", v["type"])
				assert.EqualValues(t, len(got)-1, v["sequence_number"], "the next in sequence")
				r := v["response"].(map[string]any)
				assert.Equal(t, "resp_9", r["id"])
				assert.Equal(t, "incomplete", r["status"])
				assert.Equal(t, "max_output_tokens", r["incomplete_details"].(map[string]any)["reason"])
				assert.Positive(t, r["usage"].(map[string]any)["output_tokens"])
				out := r["output"].([]any)
				require.Len(t, out, 1)
				assert.Equal(t, "incomplete", out[0].(map[string]any)["status"])
			case "messages":
				require.GreaterOrEqual(t, len(got), 3)
				assert.Equal(t, "event: message_stop\ndata: {\"type\":\"message_stop\"}", got[len(got)-1])
				md := eventData(t, got[len(got)-2])
				assert.Equal(t, "message_delta", md["type"])
				assert.Equal(t, "max_tokens", md["delta"].(map[string]any)["stop_reason"])
				assert.Positive(t, md["usage"].(map[string]any)["output_tokens"])
				stop := got[len(got)-3]
				assert.Equal(t, "event: content_block_stop\ndata: {\"index\":0,\"type\":\"content_block_stop\"}", stop)
			}

			select {
			case <-up.gone:
			case <-time.After(waitRecord):
				t.Fatal("the upstream never saw the stream cut")
			}
			rec := recs.next(t)
			assert.True(t, rec.Cut)
			assert.Equal(t, "cost", rec.OverBudget)
			assert.Contains(t, rec.Err, "budget")
			assert.False(t, rec.UsageUnknown, "charged what was counted, not the reservation")
			assert.Greater(t, rec.CostUSD, budget, "it crossed")
			assert.LessOrEqual(t, rec.CostUSD, budget+eventUSD+1e-12, "by one event at most")
			assert.Positive(t, rec.OvershootUSD)
			assert.LessOrEqual(t, rec.OvershootUSD, eventUSD+1e-12)
			assert.InDelta(t, rec.CostUSD-budget, rec.OvershootUSD, 1e-12)
			assert.Positive(t, rec.OvershootTokens)
			assert.LessOrEqual(t, rec.OvershootTokens, deltaTokens)
			deltas := 0
			for _, ev := range got {
				if strings.Contains(ev, delta) {
					deltas++
				}
			}
			assert.Equal(t, deltaTokens*int64(deltas), rec.OutputTokens, "charged every delta the agent got")
			assert.LessOrEqual(t, up.served.Load(), int64(maxEvents/2), "the upstream stopped long before its end")

			m := gr.Metered()
			assert.EqualValues(t, 1, m.StreamsCut)
			assert.Equal(t, rec.OvershootUSD, m.OvershootUSD)
			assert.Equal(t, rec.OvershootTokens, m.OvershootTokens)
			assert.Zero(t, m.Errors, "a cut is not an error")
			t.Logf("%s: budget $%.6f, metered $%.6f, overshoot %d tokens $%.8f (one event: %d tokens $%.8f); upstream served %d deltas, the agent got %d",
				c.name, budget, m.CostUSD, m.OvershootTokens, m.OvershootUSD, deltaTokens, eventUSD, up.served.Load(), deltas)

			resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], cutCases[0].body)
			readAll(t, resp)
			assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the budget is spent: the next request is refused")
		})
	}
}

// A tokens budget cuts a stream as a cost budget does.
func TestStreamCutAtTokenBudget(t *testing.T) {
	t.Parallel()
	up := newEndless("chat", "gpt-4.1-mini")
	e := newEnv(t, up.ServeHTTP, nil)
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	gr.SetBudget(gateway.Budget{Tokens: 1000})
	got := postStream(t, e, vars, cutCases[0])
	assert.Equal(t, "data: [DONE]", got[len(got)-1])
	rec := recs.next(t)
	assert.Equal(t, "tokens", rec.OverBudget)
	assert.Greater(t, rec.Tokens(), int64(1000))
	assert.LessOrEqual(t, rec.Tokens(), 1000+deltaTokens)
	assert.Equal(t, rec.Tokens()-1000, rec.OvershootTokens)
	assert.Zero(t, rec.OvershootUSD)
}

// Streams at once against one budget: each holds its reservation, or its
// running cost once that is more, so that the others see it; together
// they never pass the budget by more than one event each.
func TestStreamCutConcurrent(t *testing.T) {
	t.Parallel()
	up := newEndless("chat", "gpt-4.1-mini")
	// Each request names no output bound and is reserved 20 output tokens,
	// which the upstream runs far past: the six fit beside each other.
	e := newEnv(t, up.ServeHTTP, nil, func(c *gateway.Config) { c.DefaultMaxOutputTokens = 20 })
	const n, budget = 6, 0.003
	eventUSD := float64(deltaTokens) * 1.60 / 1e6
	for round := range 3 {
		recs := newRecords()
		gr, vars := e.grant(t, recs)
		gr.SetBudget(gateway.Budget{CostUSD: budget})
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				got := postStream(t, e, vars, cutCases[0])
				assert.Equal(t, "data: [DONE]", got[len(got)-1])
				assert.Contains(t, got[len(got)-2], `"finish_reason":"length"`)
			})
		}
		wg.Wait()
		var over float64
		for range n {
			rec := recs.next(t)
			assert.True(t, rec.Cut, "round %d", round)
			assert.Equal(t, "cost", rec.OverBudget)
			assert.LessOrEqual(t, rec.OvershootUSD, eventUSD+1e-12)
			over += rec.OvershootUSD
		}
		m := gr.Metered()
		assert.EqualValues(t, n, m.StreamsCut)
		assert.LessOrEqual(t, m.CostUSD, budget+n*eventUSD+1e-12, "round %d: $%.6f metered", round, m.CostUSD)
		assert.InDelta(t, over, m.OvershootUSD, 1e-12)
		t.Logf("round %d: %d streams against $%.4f: metered $%.6f, overshoot $%.8f in all (one event: $%.8f)",
			round, n, budget, m.CostUSD, m.OvershootUSD, eventUSD)
		gr.Close()
	}
}

// A stream that ends within the budget is not cut, and the budget's check
// after each of its events changes nothing of what the agent gets.
func TestStreamWithinBudgetNotCut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, streamingChat, nil)
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	gr.SetBudget(gateway.Budget{CostUSD: 1})
	resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], `{"model":"gpt-4.1-mini","stream":true}`)
	got := events(t, readAll(t, resp))
	want := chatChunks(false)
	for i := range want {
		want[i] = "data: " + want[i]
	}
	assert.Equal(t, want, got)
	rec := recs.next(t)
	assert.False(t, rec.Cut)
	assert.Empty(t, rec.OverBudget)
	assert.Zero(t, gr.Metered().StreamsCut)
}

// billing is an upstream that bills what it serves as a provider does,
// the input it was sent and the output it generated, and holds every
// request but the first answered ones open until its client goes away.
type billing struct {
	answer  int64 // the first answer requests are answered at once
	mu      sync.Mutex
	n       int64
	billed  float64 // USD, at $10/M input, $20/M output
	reached atomic.Int64
	held    atomic.Int64 // requests held open, their events sent
}

func (b *billing) bill(in, out int64) {
	b.mu.Lock()
	b.billed += (float64(in)*10 + float64(out)*20) / 1e6
	b.mu.Unlock()
}

func (b *billing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Stream    bool  `json:"stream"`
		MaxTokens int64 `json:"max_tokens"`
	}
	_ = json.Unmarshal(body, &req)
	in := int64(len(body)) / 4
	b.mu.Lock()
	b.n++
	first := b.n <= b.answer
	b.mu.Unlock()
	b.reached.Add(1)
	switch {
	case first:
		b.bill(in, req.MaxTokens)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"length"}],`+
			`"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, in, req.MaxTokens, in+req.MaxTokens)
		return
	case req.Stream:
		// Three deltas, then it goes on generating until the client
		// goes away: it bills the input and all it could generate.
		b.bill(in, req.MaxTokens)
		sse(w, `{"id":"c","object":"chat.completion.chunk","model":"gpt-test","choices":[{"index":0,"delta":{"content":"`+delta+`"}}]}`,
			`{"id":"c","object":"chat.completion.chunk","model":"gpt-test","choices":[{"index":0,"delta":{"content":"`+delta+`"}}]}`,
			`{"id":"c","object":"chat.completion.chunk","model":"gpt-test","choices":[{"index":0,"delta":{"content":"`+delta+`"}}]}`)
	default:
		// Generating the answer, which it bills whether it is read or not.
		b.bill(in, req.MaxTokens)
	}
	b.held.Add(1)
	<-r.Context().Done()
}

// 32 requests of $0.02 each reach the upstream, in parallel, streamed and
// not; a few are answered, the others are in flight when the run is
// revoked. Each cut one is charged what the upstream was sent and could
// have answered (its reservation: its usage never came), never $0: the
// metered total covers what the upstream billed.
func TestRevokedRequestsStillBilled(t *testing.T) {
	t.Parallel()
	up := &billing{answer: 7}
	prices, err := gateway.ParsePrices([]byte("models:\n  gpt-test: {input: 10.00, output: 20.00}\n"), "prices.yaml")
	require.NoError(t, err)
	e := newEnv(t, up.ServeHTTP, nil, func(c *gateway.Config) { c.Prices = prices })
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	prompt := strings.Repeat("word ", 800)
	var wg sync.WaitGroup
	for i := range 32 {
		body := jsonBody(t, map[string]any{"model": "gpt-test", "max_tokens": 500, "stream": i%2 == 1,
			"messages": []map[string]any{{"role": "user", "content": prompt}}})
		wg.Go(func() {
			readAll(t, e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], body))
		})
	}
	require.Eventually(t, func() bool { return up.reached.Load() == 32 && up.held.Load() == 32-up.answer },
		waitRecord, 5*time.Millisecond, "every request reached the upstream")
	rev := gr.Revoke("cost", "spent")
	wg.Wait()
	var cut int
	var metered float64
	for range 32 {
		rec := recs.next(t)
		metered += rec.CostUSD
		if rec.Cut {
			cut++
			assert.True(t, rec.UsageUnknown, "charged at its reservation")
			assert.GreaterOrEqual(t, rec.CostUSD, 0.02, "a cut request is never free")
		}
	}
	assert.Equal(t, 25, cut)
	assert.Equal(t, 25, rev.InFlight)
	up.mu.Lock()
	billed := up.billed
	up.mu.Unlock()
	m := gr.Metered()
	assert.InDelta(t, metered, m.CostUSD, 1e-9)
	assert.GreaterOrEqual(t, m.CostUSD, billed, "metered $%.4f, the upstream billed $%.4f", m.CostUSD, billed)
	t.Logf("32 requests reached the upstream, 25 cut by the revocation: the upstream billed $%.4f, metered $%.4f", billed, m.CostUSD)
}

// A stream the revocation cuts after it ran past its reservation (it
// named no output bound, and the default was a guess) is charged the
// output counted from its deltas, not the smaller reservation.
func TestRevokedStreamPastItsReservation(t *testing.T) {
	t.Parallel()
	up := newEndless("chat", "gpt-4.1-mini")
	e := newEnv(t, up.ServeHTTP, nil, func(c *gateway.Config) { c.DefaultMaxOutputTokens = 20 })
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	resp := e.post(t, gateway.OpenAI, vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"], cutCases[0].body)
	defer resp.Body.Close()
	er := eventReader{bufio.NewReader(resp.Body)}
	deltas := 0
	for deltas < 50 {
		ev, err := er.next()
		require.NoError(t, err)
		if strings.Contains(ev, delta) {
			deltas++
		}
	}
	gr.Revoke("tool_loop", "looping")
	_, _ = io.Copy(io.Discard, resp.Body)
	rec := recs.next(t)
	assert.True(t, rec.Cut)
	assert.True(t, rec.UsageUnknown)
	assert.GreaterOrEqual(t, rec.OutputTokens, int64(deltas)*deltaTokens, "every delta the agent got, past the reservation's 20")
}
