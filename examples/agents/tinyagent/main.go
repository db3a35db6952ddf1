// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Command tinyagent is the smallest well-behaved agent: READY, then a
// heartbeat every -interval until stopped. The daemon benchmark runs a
// thousand of them (scripts/bench-daemon.sh).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/hermeskill/hermeskilld/pkg/client"
)

func main() {
	interval := flag.Duration("interval", time.Second, "heartbeat interval")
	flag.Parse()
	c, err := client.FromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tinyagent:", err)
		os.Exit(2)
	}
	defer c.Close()
	ctx := c.Context(context.Background())
	c.Ready()
	// Its work loop is the beat itself: an explicit Beat from the loop
	// says the loop is alive (a background Heartbeat alone would stop
	// vouching for a loop that never passes through the client).
	t := time.NewTicker(*interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done(): // STOP
			return
		case <-t.C:
			c.Beat()
		}
	}
}
