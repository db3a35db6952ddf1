// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package client_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/pkg/client"
)

// The tests below run real agents: this test binary re-executed with
// agentEnv naming what its main goroutine does after it said READY and
// started the documented background heartbeat. The supervisor's side is a
// real socket whose datagrams the kernel timestamps as they are queued, so
// a busy test process reads them late without moving them in time.

// agentEnv names the agent's behaviour; agentArgEnv is its duration.
const (
	agentEnv    = "HK_CLIENT_AGENT"
	agentArgEnv = "HK_CLIENT_AGENT_FOR"
)

// The agents' heartbeat timeout (WATCHDOG_USEC): they beat every 100ms.
const (
	agentTimeout  = 300 * time.Millisecond
	agentInterval = agentTimeout / 3
)

// agentMain is the agent's main; it returns the exit status.
func agentMain(mode string) int {
	d, _ := time.ParseDuration(os.Getenv(agentArgEnv))
	c, err := client.FromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		return 2
	}
	c.Ready()
	go c.Heartbeat(context.Background(), 0)
	switch mode {
	case "spin": // wedged in pure CPU code: never calls the client again
		for {
		}
	case "progress": // working: a step every 20ms, for d
		for n, end := uint64(1), time.Now().Add(d); time.Now().Before(end); n++ {
			c.Progress(n)
			time.Sleep(20 * time.Millisecond) // the step's work
		}
		c.Status("done")
		return 0
	case "extend": // a declared wait of d that never returns
		c.Extend(d)
		for {
		}
	case "extend-end": // a wait declared for an hour, over after d; then wedged
		end := c.Extend(time.Hour)
		time.Sleep(d) // the long call
		end()
		for {
		}
	}
	fmt.Fprintln(os.Stderr, "agent: unknown mode", mode)
	return 2
}

// datagram is one message received, with the time the kernel queued it.
type datagram struct {
	at   time.Time
	text string
}

// agentRun is a running agent and what its supervisor received.
type agentRun struct {
	t      *testing.T
	cmd    *exec.Cmd
	msgs   chan datagram
	exited chan struct{}
}

// startAgent runs the agent mode with the heartbeat timeout agentTimeout,
// its argument d, and the address variable addrVar naming a new supervisor
// socket. The agent is killed when the test ends.
func startAgent(t *testing.T, mode string, d time.Duration, addrVar string) *agentRun {
	t.Helper()
	sup := newSupervisor(t)
	raw, err := sup.conn.SyscallConn()
	require.NoError(t, err)
	var serr error
	require.NoError(t, raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}))
	require.NoError(t, serr)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), agentEnv+"="+mode, agentArgEnv+"="+d.String(),
		"HERMESKILL_SOCKET=", "NOTIFY_SOCKET=", "WATCHDOG_PID=",
		addrVar+"="+sup.addr, "WATCHDOG_USEC="+strconv.FormatInt(agentTimeout.Microseconds(), 10))
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	r := &agentRun{t: t, cmd: cmd, msgs: make(chan datagram, 1024), exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(r.exited)
	}()
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(r.msgs)
		buf, oob := make([]byte, 16<<10), make([]byte, 256)
		for {
			n, oobn, _, _, err := sup.conn.ReadMsgUnix(buf, oob)
			if err != nil {
				return
			}
			r.msgs <- datagram{queuedAt(oob[:oobn]), string(buf[:n])}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-r.exited
		sup.conn.Close()
		<-read
	})
	return r
}

// queuedAt is the kernel's timestamp of a datagram (SCM_TIMESTAMPNS), or
// the time it is read where the kernel gives none.
func queuedAt(oob []byte) time.Time {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Now()
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS {
			var ts unix.Timespec
			if binary.Read(bytes.NewReader(m.Data), binary.NativeEndian, &ts) == nil {
				return time.Unix(ts.Unix())
			}
		}
	}
	return time.Now()
}

// next returns the next datagram, failing the test after 10s.
func (r *agentRun) next() datagram {
	r.t.Helper()
	select {
	case d, ok := <-r.msgs:
		require.True(r.t, ok, "the supervisor's socket closed")
		return d
	case <-time.After(10 * time.Second):
		r.t.Fatal("no datagram in 10s")
		return datagram{}
	}
}

// declared skips the background heartbeat's first beats (its goroutine
// starts before the main one declares its wait) and returns the datagram
// text, which the agent sends next.
func (r *agentRun) declared(text string) datagram {
	r.t.Helper()
	for {
		d := r.next()
		if d.text == text {
			return d
		}
		require.Equal(r.t, "WATCHDOG=1", d.text)
	}
}

// untilQuiet returns the datagrams received until none came for quiet,
// failing the test if that takes more than limit.
func (r *agentRun) untilQuiet(quiet, limit time.Duration) []datagram {
	r.t.Helper()
	var got []datagram
	deadline := time.After(limit)
	for {
		select {
		case d := <-r.msgs:
			got = append(got, d)
		case <-time.After(quiet):
			return got
		case <-deadline:
			r.t.Fatalf("still talking after %s: %d datagrams, the last %q", limit, len(got), got[len(got)-1].text)
		}
	}
}

// untilExit returns the datagrams received until the agent exited.
func (r *agentRun) untilExit(limit time.Duration) []datagram {
	r.t.Helper()
	var got []datagram
	deadline := time.After(limit)
	for {
		select {
		case d := <-r.msgs:
			got = append(got, d)
		case <-r.exited:
			return append(got, r.untilQuiet(100*time.Millisecond, time.Second)...)
		case <-deadline:
			r.t.Fatalf("the agent still runs after %s", limit)
		}
	}
}

// vouchedUntil is when a supervisor with the agents' heartbeat timeout
// would stop trusting the agent, given what it received: each WATCHDOG=1
// sets the deadline to its arrival + the timeout (ending any extension),
// each EXTEND_TIMEOUT_USEC=N moves it to at least its arrival + N.
func vouchedUntil(t *testing.T, ds []datagram) time.Time {
	t.Helper()
	var until time.Time
	for _, d := range ds {
		for line := range strings.SplitSeq(d.text, "\n") {
			key, value, _ := strings.Cut(line, "=")
			switch key {
			case "READY", "WATCHDOG":
				until = d.at.Add(agentTimeout)
			case "EXTEND_TIMEOUT_USEC":
				usec, err := strconv.ParseInt(value, 10, 64)
				require.NoError(t, err, line)
				until = later(until, d.at.Add(time.Duration(usec)*time.Microsecond))
			}
		}
	}
	return until
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func texts(ds []datagram) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.text)
	}
	return out
}

// A main goroutine wedged in `for {}` after READY: the background
// heartbeat beats for one heartbeat timeout, then falls silent for good,
// so a supervisor would kill the agent at most two timeouts after its last
// call to the client.
func TestAgentSpinningIsNotVouchedFor(t *testing.T) {
	r := startAgent(t, "spin", 0, "HERMESKILL_SOCKET")
	ready := r.next()
	require.Equal(t, "READY=1", ready.text)
	beats := r.untilQuiet(4*agentTimeout, 10*time.Second)

	require.NotEmpty(t, beats, "vouched for at first")
	for _, b := range beats {
		require.Equal(t, "WATCHDOG=1", b.text)
	}
	require.LessOrEqual(t, len(beats), int(agentTimeout/agentInterval)+2, "beats for about one timeout, got %v", texts(beats))
	last := beats[len(beats)-1].at
	require.Less(t, last.Sub(ready.at), agentTimeout+agentInterval, "the last beat")
	require.Less(t, vouchedUntil(t, append([]datagram{ready}, beats...)).Sub(ready.at), 2*agentTimeout+agentInterval)
	select {
	case <-r.exited:
		t.Fatal("the agent exited: it was meant to spin")
	default:
	}
}

// A main loop that calls Progress every step keeps being vouched for, for
// many heartbeat timeouts.
func TestAgentMakingProgressIsVouchedFor(t *testing.T) {
	const run = 2 * time.Second
	r := startAgent(t, "progress", run, "HERMESKILL_SOCKET")
	ready := r.next()
	require.Equal(t, "READY=1", ready.text)
	got := r.untilExit(run + 10*time.Second)
	require.Contains(t, texts(got), "STATUS=done", "it ran to the end")

	var beats []datagram
	for _, d := range got {
		if d.text == "WATCHDOG=1" {
			beats = append(beats, d)
		}
	}
	require.GreaterOrEqual(t, len(beats), int(run/agentInterval)/2, "beats all along")
	require.Greater(t, beats[len(beats)-1].at.Sub(ready.at), run-2*agentInterval, "vouched for until the end")
	require.Greater(t, vouchedUntil(t, got).Sub(ready.at), run)
}

// A main goroutine that declares a wait of 1s and never comes back is
// vouched for until the declared time, with EXTEND_TIMEOUT_USEC once its
// timeout passed, and no longer.
func TestAgentInsideExtendIsVouchedForTheDeclaredTime(t *testing.T) {
	const wait = time.Second
	r := startAgent(t, "extend", wait, "HERMESKILL_SOCKET")
	require.Equal(t, "READY=1", r.next().text)
	declared := r.declared("EXTEND_TIMEOUT_USEC=1000000")
	got := r.untilQuiet(4*agentTimeout, 10*time.Second)

	var ticks int
	for _, d := range got {
		key, value, _ := strings.Cut(d.text, "=")
		if d.text == "WATCHDOG=1" {
			require.Zero(t, ticks, "WATCHDOG=1 only while the Extend call is recent")
			continue
		}
		require.Equal(t, "EXTEND_TIMEOUT_USEC", key, d.text)
		usec, err := strconv.ParseInt(value, 10, 64)
		require.NoError(t, err)
		require.LessOrEqual(t, time.Duration(usec)*time.Microsecond, agentTimeout, "never more than the timeout at a time")
		ticks++
	}
	require.GreaterOrEqual(t, ticks, 2, "vouched for by extensions: %v", texts(got))
	last := got[len(got)-1].at
	require.Greater(t, last.Sub(declared.at), wait-2*agentInterval, "until the declared time")
	require.Less(t, last.Sub(declared.at), wait, "and no longer")
	until := vouchedUntil(t, append([]datagram{declared}, got...))
	require.InDelta(t, wait, until.Sub(declared.at), float64(agentInterval), "a supervisor would trust it until the wait's end, %v", texts(got))
}

// To systemd, which cannot extend a watchdog, the wait is vouched for with
// WATCHDOG=1, for the declared time too.
func TestAgentInsideExtendUnderSystemd(t *testing.T) {
	const wait = time.Second
	r := startAgent(t, "extend", wait, "NOTIFY_SOCKET")
	require.Equal(t, "READY=1", r.next().text)
	declared := r.declared("EXTEND_TIMEOUT_USEC=1000000")
	got := r.untilQuiet(4*agentTimeout, 10*time.Second)
	for _, d := range got {
		require.Equal(t, "WATCHDOG=1", d.text)
	}
	last := got[len(got)-1].at
	require.Greater(t, last.Sub(declared.at), wait-2*agentInterval, "until the declared time")
	require.Less(t, last.Sub(declared.at), wait, "and no longer")
}

// A wait ended early is no cover: once the main goroutine wedges after
// it, it is vouched for one timeout more, not for the hour it declared.
func TestAgentAfterExtendEnds(t *testing.T) {
	const call = 200 * time.Millisecond
	r := startAgent(t, "extend-end", call, "HERMESKILL_SOCKET")
	require.Equal(t, "READY=1", r.next().text)
	declared := r.declared("EXTEND_TIMEOUT_USEC=3600000000")
	got := r.untilQuiet(4*agentTimeout, 10*time.Second)
	for _, d := range got {
		require.Equal(t, "WATCHDOG=1", d.text, "the call lasted less than the timeout: no extension needed")
	}
	last := got[len(got)-1].at
	require.Greater(t, last.Sub(declared.at), call, "the end of the wait counts as activity")
	require.Less(t, last.Sub(declared.at), call+agentTimeout+agentInterval)
	require.Less(t, vouchedUntil(t, append([]datagram{declared}, got...)).Sub(declared.at), call+2*agentTimeout+agentInterval)
}
