// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Command benchagent is the agent of make bench-compare: one small static
// program (standard library only, built by the harness from this file)
// whose first argument picks what it does.
//
//	benchagent wedged FILE        catch SIGINT and SIGTERM and do nothing
//	                              about them; append "start PID NS" and one
//	                              "SIGNAME NS" line per signal to FILE
//	benchagent tree N             ignore SIGINT and SIGTERM, start N-1
//	                              `sleep` children (which inherit that),
//	                              then say READY=1 and WATCHDOG=trigger on
//	                              the notify socket, or "ready" on stdout
//	                              without one
//	benchagent beat EVERY [STOP]  READY=1, then WATCHDOG=1 every EVERY;
//	                              silent (but alive) after STOP
//	benchagent blast              READY=1, then WATCHDOG=1 as fast as the
//	                              socket takes them
//
// The notify socket is $HERMESKILL_SOCKET, else $NOTIFY_SOCKET.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	start := time.Now()
	if len(os.Args) < 2 {
		fail("usage: benchagent wedged FILE | tree N | beat EVERY [STOP] | blast")
	}
	switch os.Args[1] {
	case "wedged":
		wedged(start)
	case "tree":
		tree()
	case "beat":
		beat()
	case "blast":
		blast()
	default:
		fail("unknown mode " + os.Args[1])
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "benchagent:", msg)
	os.Exit(2)
}

func arg(i int) string {
	if len(os.Args) <= i {
		fail("missing argument")
	}
	return os.Args[i]
}

func forever() {
	for {
		time.Sleep(time.Hour)
	}
}

// dial connects a datagram socket to the notify socket; -1 without one.
func dial() int {
	path := os.Getenv("HERMESKILL_SOCKET")
	if path == "" {
		path = os.Getenv("NOTIFY_SOCKET")
	}
	if path == "" {
		return -1
	}
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		fail(err.Error())
	}
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		fail(err.Error())
	}
	return fd
}

func send(fd int, msg string) error {
	_, err := syscall.Write(fd, []byte(msg))
	return err
}

func wedged(start time.Time) {
	f, err := os.OpenFile(arg(2), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fail(err.Error())
	}
	c := make(chan os.Signal, 8)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
	fmt.Fprintf(f, "start %d %d\n", os.Getpid(), start.UnixNano())
	for s := range c {
		now := time.Now()
		name := "SIGTERM"
		if s == syscall.SIGINT {
			name = "SIGINT"
		}
		fmt.Fprintf(f, "%s %d\n", name, now.UnixNano())
	}
}

func tree() {
	n, err := strconv.Atoi(arg(2))
	if err != nil || n < 1 {
		fail("tree: bad size")
	}
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		fail(err.Error())
	}
	for range n - 1 {
		if err := exec.Command(sleep, "3600").Start(); err != nil {
			fail(err.Error())
		}
	}
	if fd := dial(); fd >= 0 {
		_ = send(fd, "READY=1")
		_ = send(fd, "WATCHDOG=trigger")
	} else {
		os.Stdout.WriteString("ready\n")
	}
	forever()
}

func beat() {
	every, err := time.ParseDuration(arg(2))
	if err != nil || every <= 0 {
		fail("beat: bad interval")
	}
	var stop time.Duration
	if len(os.Args) > 3 {
		if stop, err = time.ParseDuration(os.Args[3]); err != nil {
			fail("beat: bad stop")
		}
	}
	fd := dial()
	if fd < 0 {
		fail("beat: no notify socket")
	}
	_ = send(fd, "READY=1")
	t := time.NewTicker(every)
	begun := time.Now()
	for range t.C {
		if stop > 0 && time.Since(begun) >= stop {
			break
		}
		_ = send(fd, "WATCHDOG=1")
	}
	t.Stop()
	forever()
}

func blast() {
	fd := dial()
	if fd < 0 {
		fail("blast: no notify socket")
	}
	_ = send(fd, "READY=1")
	for {
		if err := send(fd, "WATCHDOG=1"); err != nil && err != syscall.EINTR && err != syscall.EAGAIN && err != syscall.ENOBUFS {
			os.Exit(0) // the reader is gone
		}
	}
}
