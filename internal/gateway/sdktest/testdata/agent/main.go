// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Command agent is an LLM agent built on the providers' official Go SDKs
// and on nothing of hermeskill's: it is configured only by the environment
// those SDKs read by default (OPENAI_BASE_URL and OPENAI_API_KEY, or
// ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY), so that what the end-to-end
// tests show of the gateway holds for any agent written this way.
//
// It asks the model, runs the tools the model asks for (each answers
// "no results"), and asks again, with the whole conversation, until -turns
// answers (exit status 0; by default never). It gives up after -give-up
// errors in a row (exit status 1). It ignores SIGINT, the cooperative
// stop, as a runaway agent would: what it then gets from the model is the
// gateway's refusal.
//
//	-provider openai|anthropic   the SDK (default openai)
//	-model NAME                  the model asked for
//	-stream                      stream each answer (chat completions with
//	                             stream: true; messages with stream: true)
//	-responses                   with openai, call the Responses API (streamed
//	                             with -stream) instead of chat completions
//	-hold                        before the loop, open one more stream whose
//	                             prompt says HOLD (the tests' upstream keeps
//	                             it open) and wait for its first event: it is
//	                             in flight when the agent is stopped
//	-turns N                     stop after N answers (default 0: never)
//	-give-up N                   stop after N errors in a row (default 3)
//	-report FILE                 write to FILE, as JSON lines: the agent's
//	                             environment, then each request's outcome
//	                             (an answer's finish_reason, stop_reason or
//	                             status and the length of its text), then
//	                             the held stream's
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// holdPrompt marks the request the tests' upstream keeps open.
const holdPrompt = "HOLD this stream open"

// line is one line of the report.
type line struct {
	Env     []string `json:"env,omitempty"`
	N       int      `json:"n,omitempty"`
	OK      bool     `json:"ok,omitempty"`
	Tools   int      `json:"tools,omitempty"`
	Finish  string   `json:"finish,omitempty"` // why the answer ended, as the SDK read it
	Text    int      `json:"text,omitempty"`   // the bytes of its text
	Status  int      `json:"status,omitempty"`
	Code    string   `json:"code,omitempty"`
	Err     string   `json:"err,omitempty"`
	Message string   `json:"message,omitempty"` // the provider's error message
	Held    bool     `json:"held,omitempty"`
	HeldErr string   `json:"held_err,omitempty"`
}

// answer is what a turn got: how many tools the model asked for, why the
// answer ended (finish_reason, stop_reason, or the Responses API's status
// and incomplete reason), the bytes of its text.
type answer struct {
	tools  int
	finish string
	text   int
}

type report struct {
	mu  sync.Mutex
	enc *json.Encoder
	f   *os.File
}

func (r *report) write(l line) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enc.Encode(l); err != nil {
		fmt.Fprintln(os.Stderr, "agent: report:", err)
		os.Exit(2)
	}
	_ = r.f.Sync()
}

// caller is one SDK's turn: ask with the conversation so far, extend it
// with the answer and the tools' results.
type caller interface {
	turn(ctx context.Context) (answer, error)
	hold(ctx context.Context, started chan<- struct{}) error
}

func main() {
	provider := flag.String("provider", "openai", "openai or anthropic")
	model := flag.String("model", "", "model")
	stream := flag.Bool("stream", false, "stream each answer")
	useResponses := flag.Bool("responses", false, "with openai, call the Responses API")
	hold := flag.Bool("hold", false, "keep one more stream open while looping")
	giveUp := flag.Int("give-up", 3, "errors in a row before giving up")
	turns := flag.Int("turns", 0, "answers before it is done (0: never)")
	reportFile := flag.String("report", "", "report file")
	flag.Parse()

	signal.Ignore(os.Interrupt)
	f, err := os.Create(*reportFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(2)
	}
	rep := &report{enc: json.NewEncoder(f), f: f}
	rep.write(line{Env: os.Environ()})

	var c caller
	switch *provider {
	case "openai":
		c = newOpenAI(*model, *stream)
		if *useResponses {
			c = &responsesAgent{openAIAgent: c.(*openAIAgent)}
		}
	case "anthropic":
		c = newAnthropic(*model, *stream)
	default:
		fmt.Fprintln(os.Stderr, "agent: -provider openai|anthropic")
		os.Exit(2)
	}
	ctx := context.Background()
	held := make(chan struct{})
	if *hold {
		started := make(chan struct{})
		go func() {
			defer close(held)
			err := c.hold(ctx, started)
			l := line{Held: true}
			if err != nil {
				l.HeldErr = err.Error()
			}
			rep.write(l)
		}()
		select {
		case <-started:
		case <-held:
			os.Exit(1)
		}
	} else {
		close(held)
	}
	for n, errs, answers := 1, 0, 0; errs < *giveUp; n++ {
		a, err := c.turn(ctx)
		if err == nil {
			errs = 0
			rep.write(line{N: n, OK: true, Tools: a.tools, Finish: a.finish, Text: a.text})
			if answers++; answers == *turns {
				<-held
				os.Exit(0)
			}
			continue
		}
		errs++
		l := line{N: n, Err: err.Error()}
		var oe *openai.Error
		var ae *anthropic.Error
		switch {
		case errors.As(err, &oe):
			l.Status, l.Code, l.Message = oe.StatusCode, oe.Code, oe.Message
		case errors.As(err, &ae):
			l.Status, l.Code, l.Message = ae.StatusCode, string(ae.Type()), ae.RawJSON()
		}
		rep.write(l)
	}
	<-held
	os.Exit(1)
}

type openAIAgent struct {
	client openai.Client
	model  string
	stream bool
	msgs   []openai.ChatCompletionMessageParamUnion
}

func newOpenAI(model string, stream bool) *openAIAgent {
	return &openAIAgent{client: openai.NewClient(), model: model, stream: stream,
		msgs: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Find out what hermeskill is.")}}
}

func (a *openAIAgent) params(msgs []openai.ChatCompletionMessageParamUnion) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: a.model, Messages: msgs,
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "web_search", Description: openai.String("Search the web"),
			Parameters: shared.FunctionParameters{"type": "object",
				"properties": map[string]any{"query": map[string]any{"type": "string"}}, "required": []string{"query"}},
		})}}
}

func (a *openAIAgent) turn(ctx context.Context) (answer, error) {
	var msg openai.ChatCompletionMessage
	var finish string
	if a.stream {
		s := a.client.Chat.Completions.NewStreaming(ctx, a.params(a.msgs))
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			if !acc.AddChunk(s.Current()) {
				return answer{}, errors.New("a chunk the accumulator refused")
			}
		}
		if err := s.Err(); err != nil {
			return answer{}, err
		}
		if len(acc.Choices) == 0 {
			return answer{}, errors.New("no choice in the answer")
		}
		msg, finish = acc.Choices[0].Message, acc.Choices[0].FinishReason
	} else {
		cc, err := a.client.Chat.Completions.New(ctx, a.params(a.msgs))
		if err != nil {
			return answer{}, err
		}
		if len(cc.Choices) == 0 {
			return answer{}, errors.New("no choice in the answer")
		}
		msg, finish = cc.Choices[0].Message, cc.Choices[0].FinishReason
	}
	a.msgs = append(a.msgs, msg.ToParam())
	for _, tc := range msg.ToolCalls {
		a.msgs = append(a.msgs, openai.ToolMessage("no results", tc.ID))
	}
	if len(msg.ToolCalls) == 0 {
		a.msgs = append(a.msgs, openai.UserMessage("Go on."))
	}
	return answer{tools: len(msg.ToolCalls), finish: finish, text: len(msg.Content)}, nil
}

// responsesAgent is the openai agent on the Responses API: each turn's
// input is the conversation so far as text.
type responsesAgent struct {
	*openAIAgent
	input []responses.ResponseInputItemUnionParam
}

func (a *responsesAgent) turn(ctx context.Context) (answer, error) {
	if a.input == nil {
		a.input = append(a.input, responses.ResponseInputItemParamOfMessage("Find out what hermeskill is.", responses.EasyInputMessageRoleUser))
	}
	params := responses.ResponseNewParams{Model: a.model, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: a.input}}
	var resp *responses.Response
	var text string
	if a.stream {
		s := a.client.Responses.NewStreaming(ctx, params)
		for s.Next() {
			switch ev := s.Current(); ev.Type {
			case "response.output_text.delta":
				text += ev.Delta
			case "response.completed", "response.incomplete", "response.failed":
				r := ev.Response
				resp = &r
			}
		}
		if err := s.Err(); err != nil {
			return answer{}, err
		}
		if resp == nil {
			return answer{}, errors.New("the stream ended without its response")
		}
	} else {
		r, err := a.client.Responses.New(ctx, params)
		if err != nil {
			return answer{}, err
		}
		resp, text = r, r.OutputText()
	}
	finish := string(resp.Status)
	if resp.IncompleteDetails.Reason != "" {
		finish += ":" + resp.IncompleteDetails.Reason
	}
	a.input = append(a.input, responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleAssistant),
		responses.ResponseInputItemParamOfMessage("Go on.", responses.EasyInputMessageRoleUser))
	return answer{finish: finish, text: len(text)}, nil
}

func (a *openAIAgent) hold(ctx context.Context, started chan<- struct{}) error {
	s := a.client.Chat.Completions.NewStreaming(ctx, a.params([]openai.ChatCompletionMessageParamUnion{openai.UserMessage(holdPrompt)}))
	for first := true; s.Next(); first = false {
		if first {
			close(started)
		}
	}
	return s.Err()
}

type anthropicAgent struct {
	client anthropic.Client
	model  string
	stream bool
	msgs   []anthropic.MessageParam
}

func newAnthropic(model string, stream bool) *anthropicAgent {
	return &anthropicAgent{client: anthropic.NewClient(), model: model, stream: stream,
		msgs: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Find out what hermeskill is."))}}
}

func (a *anthropicAgent) params(msgs []anthropic.MessageParam) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: anthropic.Model(a.model), MaxTokens: 1024, Messages: msgs,
		Tools: []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
			Properties: map[string]any{"query": map[string]any{"type": "string"}}, Required: []string{"query"}}, "web_search")}}
}

func (a *anthropicAgent) turn(ctx context.Context) (answer, error) {
	var msg anthropic.Message
	if a.stream {
		s := a.client.Messages.NewStreaming(ctx, a.params(a.msgs))
		for s.Next() {
			if err := msg.Accumulate(s.Current()); err != nil {
				return answer{}, err
			}
		}
		if err := s.Err(); err != nil {
			return answer{}, err
		}
	} else {
		m, err := a.client.Messages.New(ctx, a.params(a.msgs))
		if err != nil {
			return answer{}, err
		}
		msg = *m
	}
	text := 0
	for _, b := range msg.Content {
		text += len(b.Text)
	}
	a.msgs = append(a.msgs, msg.ToParam())
	var results []anthropic.ContentBlockParamUnion
	for _, b := range msg.Content {
		if b.Type == "tool_use" {
			results = append(results, anthropic.NewToolResultBlock(b.ID, "no results", false))
		}
	}
	tools := len(results)
	if tools == 0 {
		results = append(results, anthropic.NewTextBlock("Go on."))
	}
	a.msgs = append(a.msgs, anthropic.NewUserMessage(results...))
	return answer{tools: tools, finish: string(msg.StopReason), text: text}, nil
}

func (a *anthropicAgent) hold(ctx context.Context, started chan<- struct{}) error {
	s := a.client.Messages.NewStreaming(ctx, a.params([]anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(holdPrompt))}))
	for first := true; s.Next(); first = false {
		if first {
			close(started)
		}
	}
	return s.Err()
}
