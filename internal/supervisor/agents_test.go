// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/hermeskill/hermeskilld/pkg/client"
)

// The agents of the end-to-end tests below are this test binary
// re-executed with agentEnv naming what it does (TestMain runs agentMain).
const (
	agentEnv = "HK_SUPERVISOR_AGENT"
	// llmWorkersEnv is how many requests the "llm" agent keeps going at
	// once; llmChildrenEnv how many idle children it starts first (a
	// larger tree: a longer autopsy).
	llmWorkersEnv  = "HK_SUPERVISOR_LLM_WORKERS"
	llmChildrenEnv = "HK_SUPERVISOR_LLM_CHILDREN"
)

// agentMain is an agent's main; it returns the exit status.
func agentMain(mode string) int {
	switch mode {
	case "llm":
		return llmAgent()
	case "go-client", "go-client-loop":
		return goClientAgent(mode == "go-client-loop")
	case "beat-often":
		return beatOftenAgent()
	}
	fmt.Fprintln(os.Stderr, "agent: unknown mode", mode)
	return 2
}

// llmAgent sends chat completions to the gateway the supervisor gave it,
// from several goroutines at once and as fast as they are answered, until
// each is refused. Nothing of hermeskill's: only the variables an SDK
// reads.
func llmAgent() int {
	base, key := os.Getenv("OPENAI_BASE_URL"), os.Getenv("OPENAI_API_KEY")
	workers, _ := strconv.Atoi(os.Getenv(llmWorkersEnv))
	children, _ := strconv.Atoi(os.Getenv(llmChildrenEnv))
	for range children {
		cmd := exec.Command("sleep", "600")
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "agent:", err)
			return 2
		}
	}
	// max_tokens bounds what the gateway reserves for each request (see
	// gateway.Budget): as an SDK agent sets it, within the tests' budgets.
	body := []byte(`{"model":"gpt-test","max_tokens":10,"messages":[{"role":"user","content":"go on"}]}`)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for {
				req, _ := http.NewRequest(http.MethodPost, base+"/chat/completions", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return
				}
			}
		})
	}
	wg.Wait()
	return 0
}

// goClientAgent is an agent on pkg/client: READY, the background
// heartbeat, then (loop) the same tool call every 10ms, until the STOP
// directive cancels its context; it prints the stop's kill event id and
// exits 0.
func goClientAgent(loop bool) int {
	c, err := client.FromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		return 2
	}
	defer c.Close()
	ctx := c.Context(context.Background())
	c.Ready()
	go c.Heartbeat(ctx, 0)
	for ctx.Err() == nil {
		if loop {
			_ = c.ToolCall("web_search", map[string]any{"q": "the same"})
		} else {
			c.Beat()
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	var stop *client.StopError
	if !errors.As(context.Cause(ctx), &stop) {
		fmt.Fprintln(os.Stderr, "agent: not stopped by hermeskilld:", context.Cause(ctx))
		return 3
	}
	fmt.Printf("stopped check=%s kill_event_id=%s\n", stop.Check, stop.KillEventID)
	return 0
}
