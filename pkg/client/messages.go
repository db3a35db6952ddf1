// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"math"
	"strconv"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// maxText caps a text value, in bytes; the supervisor drops datagrams over 8 KiB.
const maxText = 1024

var (
	msgReady    = []byte("READY=1")
	msgWatchdog = []byte("WATCHDOG=1")
	msgStopping = []byte("STOPPING=1")
)

// Ready tells the supervisor that startup is done (READY=1).
func (c *Client) Ready() { c.sendConst(msgReady) }

// Beat sends one heartbeat (WATCHDOG=1) from the work loop: unlike the
// beats of Heartbeat, it counts as activity. It does not allocate.
func (c *Client) Beat() { c.sendConst(msgWatchdog) }

// Stopping tells the supervisor that the agent is shutting down by itself
// (STOPPING=1).
func (c *Client) Stopping() { c.sendConst(msgStopping) }

// Status sets the free text shown by `hermeskilld ps` (STATUS=text).
func (c *Client) Status(text string) { c.sendText("STATUS=", text) }

// Error reports that one error happened (ERROR=text). A nil err sends
// nothing, but still counts as activity.
func (c *Client) Error(err error) {
	if !c.supervised {
		return
	}
	if err == nil {
		c.touch()
		return
	}
	c.sendText("ERROR=", err.Error())
}

// Trigger asks the supervisor to kill the agent now, giving reason as its
// status (WATCHDOG=trigger, STATUS=reason).
func (c *Client) Trigger(reason string) { c.sendText("WATCHDOG=trigger\nSTATUS=", reason) }

// Progress reports the agent's step counter (PROGRESS=n), which must only
// grow. It does not allocate.
func (c *Client) Progress(n uint64) {
	if !c.supervised {
		return
	}
	c.touch()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = strconv.AppendUint(append(c.buf[:0], "PROGRESS="...), n, 10)
	c.send(c.buf)
}

// Usage reports the cumulative tokens used and money spent so far
// (TOKENS=N, COST_USD=X). A negative or non-finite costUSD is left out.
func (c *Client) Usage(tokens uint64, costUSD float64) {
	if !c.supervised {
		return
	}
	c.touch()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = strconv.AppendUint(append(c.buf[:0], "TOKENS="...), tokens, 10)
	if costUSD >= 0 && !math.IsInf(costUSD, 1) {
		c.buf = strconv.AppendFloat(append(c.buf, "\nCOST_USD="...), costUSD, 'f', -1, 64)
	}
	c.send(c.buf)
}

// ToolCall reports that a call of tool name began (TOOL=name,
// TOOL_ARGS_SHA256=ArgsHash(args)). The arguments never leave the process.
// It returns ArgsHash's error, and then reports nothing.
func (c *Client) ToolCall(name string, args any) error {
	if !c.supervised {
		return nil
	}
	c.touch()
	sum, err := ArgsHash(args)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = appendText(append(c.buf[:0], "TOOL="...), name)
	c.buf = append(append(c.buf, "\nTOOL_ARGS_SHA256="...), sum...)
	c.send(c.buf)
	return nil
}

// DumpSignal announces the signal that makes the agent print its stack
// traces, which hermeskilld sends just before stopping it (DUMP_SIGNAL=SIG).
// Go prints them on SIGQUIT, but also exits: announce it only if that is
// acceptable.
func (c *Client) DumpSignal(sig syscall.Signal) {
	if name := unix.SignalName(sig); name != "" {
		c.sendText("DUMP_SIGNAL=", name)
	}
}

// sendConst sends msg for the work loop: it counts as activity.
func (c *Client) sendConst(msg []byte) {
	if !c.supervised {
		return
	}
	c.touch()
	c.mu.Lock()
	c.send(msg)
	c.mu.Unlock()
}

// sendText sends prefix and text for the work loop: it counts as activity.
func (c *Client) sendText(prefix, text string) {
	if !c.supervised {
		return
	}
	c.touch()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = appendText(append(c.buf[:0], prefix...), text)
	c.send(c.buf)
}

// appendText appends text as a single-line value: CR and LF become spaces, and
// it is cut to maxText bytes on a UTF-8 character boundary.
func appendText(b []byte, text string) []byte {
	if len(text) > maxText {
		cut := maxText
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
	}
	for i := 0; i < len(text); i++ {
		switch ch := text[i]; ch {
		case '\n', '\r':
			b = append(b, ' ')
		default:
			b = append(b, ch)
		}
	}
	return b
}
