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
	c.Heartbeat(ctx, *interval) // until STOP
}
