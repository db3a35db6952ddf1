// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package client_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/hermeskill/hermeskilld/pkg/client"
)

// An agent reports to its supervisor, and stops when told to. Here the
// example plays hermeskilld too; a real agent calls client.FromEnv().
func Example() {
	dir, _ := os.MkdirTemp("", "hk")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "agent.sock")
	supervisor, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer supervisor.Close()

	c, err := client.New(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx := c.Context(context.Background())
	c.Ready()
	c.Progress(1)
	_ = c.ToolCall("web_search", map[string]any{"q": "a<b", "n": 1})

	buf := make([]byte, 8<<10)
	var agent *net.UnixAddr
	for range 3 {
		n, from, _ := supervisor.ReadFromUnix(buf)
		agent = from
		fmt.Printf("%q\n", buf[:n])
	}

	// hermeskilld decides the agent must stop.
	stop := "STOP=1\nCHECK=tool_loop\nREASON=same call 5 times\nGRACE_USEC=10000000"
	_, _ = supervisor.WriteToUnix([]byte(stop), agent)
	<-ctx.Done()
	fmt.Println(context.Cause(ctx))

	// Output:
	// "READY=1"
	// "PROGRESS=1"
	// "TOOL=web_search\nTOOL_ARGS_SHA256=6802a7c2b17e87b4a48247e8a05a547826899abba22624e4123454068da8f6eb"
	// hermeskilld stop: tool_loop: same call 5 times
}

func ExampleArgsHash() {
	sum, _ := client.ArgsHash(map[string]any{"q": "a<b", "n": 1})
	fmt.Println(sum)
	// Output: 6802a7c2b17e87b4a48247e8a05a547826899abba22624e4123454068da8f6eb
}

// A work loop vouched for by the background heartbeat: it calls the client
// every step, and declares the model call that may take minutes.
func ExampleClient_Extend() {
	c, err := client.FromEnv()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx := c.Context(context.Background())
	c.Ready()
	go c.Heartbeat(ctx, 0)
	for step := uint64(1); step <= 3 && ctx.Err() == nil; step++ {
		end := c.Extend(5 * time.Minute)
		answer := slowModelCall(ctx)
		end()
		c.Status(answer)
		c.Progress(step)
	}
}

func slowModelCall(context.Context) string { return "an answer" }
