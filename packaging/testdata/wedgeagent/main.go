// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Command wedgeagent is a static agent that needs nothing but its socket:
// it says READY=1 and beats once in plain sd_notify datagrams, then
// ignores SIGINT and SIGTERM and sleeps for ever, so only SIGKILL ends it.
package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
	c, err := net.Dial("unixgram", os.Getenv("NOTIFY_SOCKET"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "wedgeagent:", err)
		os.Exit(2)
	}
	if _, err := c.Write([]byte("READY=1\nWATCHDOG=1\n")); err != nil {
		fmt.Fprintln(os.Stderr, "wedgeagent:", err)
		os.Exit(2)
	}
	fmt.Println("wedgeagent: ready, now wedged")
	for {
		time.Sleep(time.Hour)
	}
}
