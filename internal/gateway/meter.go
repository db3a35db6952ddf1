// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/hermeskill/hermeskilld/pkg/client"
)

// reading is what the meter read from one response.
type reading struct {
	model           string
	in, out, cached int64 // in counts cached ones too
	usage           bool  // the response's usage was read
	// counted estimates a stream's output tokens from its deltas as they
	// pass (deltaTokens): the running cost the budget checks.
	counted     int64
	tools       []ToolCall
	finish      []string // finish reasons, by choice
	incomplete  bool     // part of the response could not be read
	done        bool     // a stream's final event was seen
	upstreamErr string   // a stream's error event
}

// maxFinishReasons bounds the finish reasons kept of one response (one
// per choice: a request may ask for many choices).
const maxFinishReasons = 16

// addFinish keeps a finish reason the upstream sent, if any.
func (r *reading) addFinish(reason string) {
	if reason != "" && len(r.finish) < maxFinishReasons {
		r.finish = append(r.finish, reason)
	}
}

// usageOpenAI is the usage of chat completions, embeddings and the
// Responses API: chat and embeddings name their tokens prompt/completion,
// the Responses API input/output.
type usageOpenAI struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	InputTokens         int64 `json:"input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

func (u *usageOpenAI) apply(r *reading) {
	r.in = tokens(u.PromptTokens, u.InputTokens)
	r.out = tokens(u.CompletionTokens, u.OutputTokens)
	r.cached = min(tokens(u.PromptTokensDetails.CachedTokens, u.InputTokensDetails.CachedTokens), r.in)
	r.usage = true
}

// maxTokens bounds one count of one response: a thousand times any real
// response's, yet far from wrapping when the counts are added up.
const maxTokens = 1 << 40

// tokens sums counts as the upstream sent them, each in [0, maxTokens]: a
// negative or absurd count (the upstream's nonsense) must not make a
// negative reading or wrap a sum.
func tokens(counts ...int64) int64 {
	var n int64
	for _, c := range counts {
		n += min(max(c, 0), maxTokens)
	}
	return min(n, maxTokens)
}

// usageAnthropic is a message's usage. input_tokens excludes the tokens
// written to and read from the prompt cache, which are counted apart.
type usageAnthropic struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

// anthropicTally keeps a message's usage as its parts arrive: a stream's
// message_delta repeats only what changed.
type anthropicTally struct{ in, out, created, read int64 }

func (t *anthropicTally) add(u *usageAnthropic) {
	set := func(dst *int64, v *int64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&t.in, u.InputTokens)
	set(&t.out, u.OutputTokens)
	set(&t.created, u.CacheCreationInputTokens)
	set(&t.read, u.CacheReadInputTokens)
}

func (t *anthropicTally) apply(r *reading) {
	r.in = tokens(t.in, t.created, t.read)
	r.out = tokens(t.out)
	r.cached = min(tokens(t.read), r.in)
}

// toolArgs assembles one tool call's arguments, keeping at most limit
// bytes.
type toolArgs struct {
	name      string
	args      []byte
	truncated bool
}

func (t *toolArgs) add(p string, limit int) {
	if room := limit - len(t.args); len(p) > room {
		p = p[:max(room, 0)]
		t.truncated = true
	}
	t.args = append(t.args, p...)
}

func (t *toolArgs) call() ToolCall {
	return ToolCall{Name: t.name, ArgsSHA256: argsHash(t.args), Truncated: t.truncated}
}

func newToolCall(name string, args []byte, limit int) ToolCall {
	t := toolArgs{name: name}
	t.add(string(args), limit)
	return t.call()
}

// argsHash hashes tool arguments as client.ArgsHash does (the agents'
// own reports and the wire then agree). Empty arguments are {}; arguments
// that are not JSON hash as their bytes.
func argsHash(args []byte) string {
	if len(bytes.TrimSpace(args)) == 0 {
		args = []byte("{}")
	}
	if h, err := client.ArgsHash(json.RawMessage(args)); err == nil {
		return h
	}
	sum := sha256.Sum256(args)
	return hex.EncodeToString(sum[:])
}

// meterBody reads a complete response body of endpoint ep.
func meterBody(ep endpoint, body []byte, limit int) reading {
	var r reading
	var err error
	switch ep {
	case epChat:
		var v struct {
			Model   string `json:"model"`
			Choices []struct {
				Message struct {
					ToolCalls []chatToolCall `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage *usageOpenAI `json:"usage"`
		}
		if err = json.Unmarshal(body, &v); err == nil {
			r.model = v.Model
			if v.Usage != nil {
				v.Usage.apply(&r)
			}
			for _, c := range v.Choices {
				r.addFinish(c.FinishReason)
				for _, tc := range c.Message.ToolCalls {
					if tc.Type == "" || tc.Type == "function" {
						r.tools = append(r.tools, newToolCall(tc.Function.Name, []byte(tc.Function.Arguments), limit))
					}
				}
			}
		}
	case epResponses:
		var v responseObject
		if err = json.Unmarshal(body, &v); err == nil {
			v.apply(&r, true, limit)
		}
	case epEmbeddings:
		var v struct {
			Model string       `json:"model"`
			Usage *usageOpenAI `json:"usage"`
		}
		if err = json.Unmarshal(body, &v); err == nil {
			r.model = v.Model
			if v.Usage != nil {
				v.Usage.apply(&r)
			}
		}
	case epMessages:
		var v struct {
			Model      string          `json:"model"`
			Content    []contentBlock  `json:"content"`
			Usage      *usageAnthropic `json:"usage"`
			StopReason string          `json:"stop_reason"`
		}
		if err = json.Unmarshal(body, &v); err == nil {
			r.model = v.Model
			r.addFinish(v.StopReason)
			if v.Usage != nil {
				var t anthropicTally
				t.add(v.Usage)
				t.apply(&r)
				r.usage = true
			}
			for _, b := range v.Content {
				if b.Type == "tool_use" {
					r.tools = append(r.tools, newToolCall(b.Name, b.Input, limit))
				}
			}
		}
	}
	r.incomplete = err != nil
	return r
}

type chatToolCall struct {
	Index    int    `json:"index"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// responseObject is the Responses API's response, in a body or in a
// stream's response.completed event.
type responseObject struct {
	Model  string         `json:"model"`
	Status string         `json:"status"`
	Output []responseItem `json:"output"`
	Usage  *usageOpenAI   `json:"usage"`
}

type responseItem struct {
	Type      string `json:"type"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// apply takes the response's model, usage and, with tools, its function
// calls.
func (v *responseObject) apply(r *reading, tools bool, limit int) {
	if v.Model != "" {
		r.model = v.Model
	}
	if v.Usage != nil {
		v.Usage.apply(r)
	}
	if v.Status != "" && v.Status != "in_progress" && v.Status != "queued" {
		r.finish = append(r.finish[:0], v.Status)
	}
	if !tools {
		return
	}
	for _, it := range v.Output {
		if it.Type == "function_call" {
			r.tools = append(r.tools, newToolCall(it.Name, []byte(it.Arguments), limit))
		}
	}
}

type contentBlock struct {
	Type  string          `json:"type"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}
