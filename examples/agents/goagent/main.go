// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Command goagent is a small agent that reports to hermeskilld through
// pkg/client: it calls fake tools, reports progress and usage, beats in the
// background, and exits cleanly (status 0) when hermeskilld or a signal
// stops it.
//
//	hermeskilld supervise --heartbeat-timeout 3s --tool-loop 5 -- goagent -loop
//
// -loop repeats the same tool call forever, which trips the tool_loop check.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hermeskill/hermeskilld/pkg/client"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	flags := flag.NewFlagSet("goagent", flag.ContinueOnError)
	loop := flags.Bool("loop", false, "repeat the same tool call forever")
	steps := flags.Int("steps", 10, "number of steps before finishing")
	delay := flags.Duration("delay", 100*time.Millisecond, "how long one tool call takes")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	logger := log.New(os.Stderr, "goagent: ", log.LstdFlags|log.Lmicroseconds)

	hk, err := client.FromEnv()
	if err != nil {
		logger.Print(err)
		return 1
	}
	defer hk.Close()

	// SIGINT is hermeskilld's default cooperative signal; SIGTERM its next
	// step. The handlers stay until the process exits (no stop()): the
	// directive and the signal of a cooperative stop come together, and a
	// signal that arrives while we wind down must not find its default
	// action (death by SIGINT) back in place.
	ctx, _ := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx = hk.Context(ctx)
	go hk.Heartbeat(ctx, 0)
	go func() {
		for w := range hk.Warnings() {
			logger.Printf("warning from hermeskilld: %s", w)
		}
	}()
	hk.Ready()
	logger.Printf("started (supervised: %v)", hk.Supervised())

	a := agent{hk: hk, logger: logger, delay: *delay}
	err = a.work(ctx, *steps, *loop)
	hk.Stopping()
	if ctx.Err() != nil {
		err = stopCause(hk, err)
	}
	var stopped *client.StopError
	switch {
	case err == nil:
		logger.Printf("done after %d steps, %d tokens, $%.4f", *steps, a.tokens, a.costUSD)
	case errors.As(err, &stopped):
		logger.Printf("stopped by hermeskilld: check=%s reason=%q grace=%s", stopped.Check, stopped.Reason, stopped.Grace)
	case ctx.Err() != nil:
		logger.Printf("stopped: %v", err)
	default:
		logger.Print(err)
		return 1
	}
	return 0
}

// stopCause prefers hermeskilld's STOP directive over the signal that cancelled
// ctx: hermeskilld sends the directive just before its cooperative SIGINT, and
// the signal can win the race to cancel ctx.
func stopCause(hk *client.Client, err error) error {
	if !hk.Supervised() {
		return err
	}
	stopped := hk.Context(context.Background())
	timer := time.NewTimer(100 * time.Millisecond)
	defer timer.Stop()
	select {
	case <-stopped.Done():
		return context.Cause(stopped)
	case <-timer.C:
		return err
	}
}

// agent is the fake model-and-tools loop.
type agent struct {
	hk      *client.Client
	logger  *log.Logger
	delay   time.Duration
	tokens  uint64
	costUSD float64
}

var tools = []string{"web_search", "fetch_page", "summarize"}

// work runs steps steps (forever with loop) and returns the context's cause
// when it ends first.
func (a *agent) work(ctx context.Context, steps int, loop bool) error {
	for step := 1; loop || step <= steps; step++ {
		tool, args := tools[step%len(tools)], map[string]any{"query": "agent safety", "page": step}
		if loop {
			tool, args = "web_search", map[string]any{"query": "agent safety", "page": 1}
		}
		a.hk.Status(fmt.Sprintf("step %d: %s", step, tool))
		if err := a.hk.ToolCall(tool, args); err != nil {
			return err
		}
		if err := a.callTool(ctx, step); err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			a.logger.Printf("step %d: %s: %v", step, tool, err)
			a.hk.Error(err)
			continue
		}
		a.tokens += 350
		a.costUSD += 0.0012
		a.hk.Usage(a.tokens, a.costUSD)
		a.hk.Progress(uint64(step))
	}
	return nil
}

var errToolTimeout = errors.New("tool timed out")

// callTool pretends to call a tool: it takes a.delay, and every seventh
// call fails.
func (a *agent) callTool(ctx context.Context, step int) error {
	timer := time.NewTimer(a.delay)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-timer.C:
	}
	if step%7 == 0 {
		return errToolTimeout
	}
	return nil
}
