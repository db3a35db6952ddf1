// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"time"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/fault"
)

// Observer receives what the gateway metered for one grant.
type Observer interface {
	// Request is called once per request of the grant that reached the
	// upstream or was refused, after it completed (a stream: when it
	// ended) and after Grant.Metered counts it, from the gateway's
	// goroutines: it must not block. A request is no longer in flight
	// when it is reported, so a Revoke it leads to does not cut it.
	Request(r Record)
}

// TrafficObserver is an Observer told when each of the grant's requests
// arrives, so that the run's traffic can be a heartbeat while a request is
// in flight, not only once it ended.
//
// Every Arrived is followed, on the same goroutine, by exactly one
// Request, or by one Gone for a request that leaves no record; the only
// exception is a panic in the request's handling, which a FaultObserver is
// told of instead (the run is failed). Neither may block.
type TrafficObserver interface {
	Observer
	// Arrived: a request of the grant arrived at, its handle and its peer
	// checked, before anything else is done with it.
	Arrived(at time.Time)
	// Gone: a request that arrived ended at without a record: its body
	// could not be read (the agent went away, or was too slow sending it).
	Gone(at time.Time)
}

// Answered reports whether the upstream answered the request in full with
// a success: not refused, not cut, no error, a 2xx status.
func (r Record) Answered() bool {
	return !r.Refused && !r.Cut && r.Err == "" && r.Status/100 == 2
}

// FaultObserver is an Observer told of a panic in the gateway's handling
// of one of the grant's requests (the gateway recovers it, counts it and
// breaks that response off): the run should be failed, since what the
// request used may not have been counted.
type FaultObserver interface {
	Observer
	Fault(e *fault.Error)
}

// Record is one request of a grant, as the gateway saw it.
type Record struct {
	At       time.Time     // when the request arrived
	Duration time.Duration // until its response ended
	Upstream string        // the upstream's name
	Path     string        // the API path, without the upstream's name: "chat/completions"
	// Model is the model the response names (the upstream's, often a
	// dated snapshot), else the one the request named.
	Model string
	// RequestModel is the model the request named ("" when it named
	// none, or was not a POST).
	RequestModel string
	// Status is the HTTP status the agent got: the upstream's, or the
	// gateway's own for a refusal (403, 404, 405, 413) or a failed upstream
	// (502, 504).
	Status  int
	Stream  bool
	Refused bool // by the gateway: revoked, closed, outside the API, too large, over budget
	// OverBudget names the budget (Grant.SetBudget) a refused request's
	// worst case did not fit in, or a stream's running cost crossed (the
	// stream was cut: Cut is set): "cost" or "tokens", or OverPool for a
	// budget across runs (Grant.SetPools), which Budget names; Err says by
	// how much.
	OverBudget string
	Budget     string
	// OvershootTokens and OvershootUSD are what a stream cut at the budget
	// cost past it: output tokens of its last event, at most. A cut on a
	// cost budget has both (the tokens at the model's output price), on a
	// tokens budget only the tokens.
	OvershootTokens int64
	OvershootUSD    float64
	// Tokens read from the response's usage. InputTokens counts every
	// input token, CachedInputTokens included (OpenAI's prompt_tokens;
	// Anthropic's input_tokens + cache_creation_input_tokens +
	// cache_read_input_tokens).
	InputTokens, OutputTokens, CachedInputTokens int64
	// CostUSD is their price (Prices.Cost); Priced is false when the model
	// has no price: CostUSD is then 0 and means unknown.
	CostUSD float64
	Priced  bool
	// Incomplete: a successful response of an API that spends tokens
	// could not be read in full (a stream cut or broken before its usage,
	// a body or an event over its bound, a body that is not the API's
	// JSON): its usage and tool calls are those read, possibly none.
	Incomplete bool
	// UsageUnknown: the request reached the upstream, which may have
	// charged for it, but its usage was never read (a stream the agent
	// aborted or the kill cut before its usage, a body over its bound or
	// not the API's JSON, a response never received). It is then charged
	// at its reservation: the tokens and CostUSD are the larger of what
	// was read and the request's worst case (its body's bytes / 4 as
	// input, its output bound, else Config.DefaultMaxOutputTokens, as
	// output), never a silent 0.
	UsageUnknown bool
	ToolCalls    []ToolCall // those the response asked for, in order
	// FinishReasons are why the response's generation ended, as the
	// upstream says it, one per choice: OpenAI chat's finish_reason
	// ("stop", "length", "tool_calls"), the Responses API's status
	// ("completed", "incomplete", "failed"), Anthropic's stop_reason
	// ("end_turn", "max_tokens", "tool_use"). Empty when none was read.
	FinishReasons []string
	// Err says why the request failed or ended early: the upstream could
	// not be reached or broke off, or the agent went away. Empty for a
	// response the upstream sent in full, whatever its status.
	Err string
	// Cut: the request was in flight when the grant was revoked or
	// closed, or the gateway shut down, or it was a stream whose running
	// cost crossed the budget (OverBudget), and was ended by the gateway.
	Cut bool
	// Child is the run started inside the grant's run (a slice of it:
	// Grant.Slice) whose request this was, or empty: the run's own.
	Child string
}

// OverPool is Record.OverBudget for a budget across runs (a Pool).
const OverPool = "budget"

// Tokens is every input and output token of the request.
func (r Record) Tokens() int64 { return r.InputTokens + r.OutputTokens }

// ToolCall is one tool call a response asked for.
type ToolCall struct {
	Name string
	// ArgsSHA256 is the hex sha256 of the call's arguments as canonical
	// JSON (client.ArgsHash's form: keys sorted, no spaces, UTF-8 not
	// escaped); empty arguments hash as {}. Arguments that are not JSON
	// (a model's mistake, or cut at the bound) hash as their bytes.
	ArgsSHA256 string
	// Truncated: the arguments were longer than MaxToolArgsBytes; the hash
	// is of their first MaxToolArgsBytes bytes.
	Truncated bool
}

// Metered is a snapshot of what a grant's requests used: the certificate's
// metered block, what its children spent of it, and what only the gateway
// counts. It is not written as
// JSON (certs.Metered's MarshalJSON would leave Incomplete out).
type Metered struct {
	certs.Metered
	// Incomplete counts the successful requests that could not be read
	// in full (Record.Incomplete): their tokens may be missing.
	Incomplete int64
	// InFlight counts the requests forwarded upstream whose response has
	// not ended yet.
	InFlight int
	// Children are what the runs started inside this one spent through
	// its gateway (its slices: Grant.Slice), by run; included in the
	// totals.
	Children []certs.ChildRun
	// Held counts the requests a paused grant holds (Grant.Pause).
	Held int
}

// Revocation is what Grant.Revoke did.
type Revocation struct {
	At       time.Time
	Check    string
	Reason   string
	InFlight int // requests in flight that were cut
}
