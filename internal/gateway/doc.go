// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package gateway owns the HTTP side of hermeskilld's LLM gateway: the
// agents' requests to their model providers go through it on loopback, so
// that what they spend and which tools their models call are read on the
// wire instead of trusted from the agent, and so that the provider's key
// never enters the agent.
//
// It owns the listener, the per-run handles (Grant), the forwarding to the
// configured upstreams, the provider error formats, the reading of usage
// and tool calls from responses (streamed or not), the price file and the
// cost it gives. It reports each request to an Observer (its arrival too,
// to a TrafficObserver: the run's traffic is its heartbeat) and can refuse
// a run's further requests (Grant.Revoke).
//
// It never decides anything about an agent: it knows nothing of processes
// or checks; a budget it is given (Grant.SetBudget) it holds as a cap on
// what it forwards, and tells the Observer when a request met it. It never logs or records keys, handles, prompts,
// completions or tool arguments (only their hashes leave it, in Record).
//
// # Routing
//
// A configured upstream NAME is served under /NAME/: a request to
// http://ADDR/NAME/REST goes to the upstream's URL followed by /REST, with
// its query. Only the provider API paths below pass; anything else is
// refused with 404 (405 for the wrong method):
//
//	openai style:    POST chat/completions, POST responses, POST embeddings,
//	                 GET models, GET models/ID
//	anthropic style: POST v1/messages, POST v1/messages/count_tokens,
//	                 GET v1/models, GET v1/models/ID
//
// The official SDKs append these to their base URL: openai-go and the
// OpenAI Python SDK post to BASE/chat/completions and BASE/responses (their
// default base ends in /v1, so an openai upstream's URL is
// https://api.openai.com/v1); anthropic-sdk-go and the Anthropic Python SDK
// post to BASE/v1/messages (an anthropic upstream's URL is
// https://api.anthropic.com). Grant.Env sets the base URLs accordingly.
//
// # Security model
//
//   - The agent holds a handle, never the key: "hk-" and 32 random bytes
//     (crypto/rand), valid for one run and only at this gateway, which
//     listens on loopback only. A handle is looked up by its sha256 and
//     then compared in constant time. It is accepted as OpenAI's
//     "Authorization: Bearer HANDLE" or Anthropic's "x-api-key: HANDLE";
//     both headers are removed before forwarding.
//   - The upstream gets the real key in its own header (Authorization:
//     Bearer for openai style, x-api-key for anthropic style). The key is
//     read from a file that only its owner may read, and it appears in no
//     response, error, log line or record.
//   - It is not an open proxy: only configured upstreams (https, or http on
//     loopback), only the paths above, request bodies bounded, timeouts on
//     both sides, hop-by-hop headers stripped both ways, no redirects
//     followed, no cookies passed.
//   - Spend is read from the upstream's responses, never from the agent's
//     request: the response's usage gives the tokens, its model the price.
//     For a streamed OpenAI chat completion that did not ask for usage, the
//     gateway asks for it (stream_options.include_usage) and removes the
//     extra usage-only chunk before the agent sees it; the other chunks
//     then carry "usage":null, which the SDKs read as absent.
//   - A revoked or closed grant's requests are refused with 403 in the
//     provider's own error format, and its requests in flight are cut: a
//     stream gets a final error event in the provider's format and ends.
//   - A grant's Budget is a cap: a request is forwarded only if its worst
//     case fits, and a stream whose running cost (its output counted from
//     its deltas) crosses what the budget leaves it is ended at once with
//     the protocol's own ending of an answer cut at its output bound
//     (finish_reason "length", response.incomplete, stop_reason
//     "max_tokens"), its upstream request cancelled. A Pool, a budget
//     shared by the grants of several runs (Grant.SetPools), is held the
//     same way: a request must fit in its run's budget and in each pool.
//
// Streams are forwarded event by event, flushed after each; metering reads
// them as they pass with bounded memory (MaxEventBytes, MaxToolArgsBytes).
package gateway
