// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"bytes"
	"context"
	"errors"
	"golang.org/x/sys/unix"
	"strconv"
	"syscall"
	"time"
)

const (
	warningsBuffer = 16
	maxDirective   = 8 << 10
)

// Context returns a child of parent that is also cancelled when hermeskilld
// sends the STOP directive; context.Cause then returns a *StopError. Called
// after STOP, it returns a context that is already cancelled. The no-op client
// returns parent itself.
//
// Each call registers with the client until the returned context ends: call
// it once per task, not per step.
//
// While a context of Context is live, the agent is taken to watch it: the
// client acknowledges a STOP (STOPPING=1) right after cancelling it, and
// hermeskilld then withholds its cooperative signal (SIGINT by default),
// which would otherwise end a Go agent at once (status 130) before its
// context carried the StopError. Without a live context the signal comes
// as usual.
func (c *Client) Context(parent context.Context) context.Context {
	if !c.supervised {
		return parent
	}
	ctx, cancel := context.WithCancelCause(parent)
	if c.stopped.Err() != nil {
		cancel(context.Cause(c.stopped))
		return ctx
	}
	c.watchers.Add(1)
	unregister := context.AfterFunc(c.stopped, func() { cancel(context.Cause(c.stopped)) })
	context.AfterFunc(ctx, func() {
		unregister()
		c.watchers.Add(-1)
	})
	return ctx
}

// Warnings returns the channel of WARNING directives, "check: text" (e.g.
// "memory: tree RSS 1.1GiB over 1GiB"). Warnings that find the channel's
// buffer full are discarded. The channel is closed by Close.
func (c *Client) Warnings() <-chan string { return c.warnings }

// readDirectives receives the supervisor's datagrams until Close.
func (c *Client) readDirectives() {
	defer close(c.readerDone)
	buf := make([]byte, maxDirective)
	fds := []unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLIN}, {Fd: int32(c.wake), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			return // unexpected; never spin on it
		}
		if fds[1].Revents != 0 {
			return // Close
		}
		for {
			n, _, err := unix.Recvfrom(c.fd, buf, unix.MSG_DONTWAIT)
			switch {
			case err == nil:
				if n > 0 { // an empty datagram carries nothing
					c.apply(buf[:n])
				}
				continue
			case err == unix.EINTR:
				continue
			case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
				// A pending socket error, reported once: keep reading.
				continue
			}
			break // EAGAIN: all read; or unexpected, and poll says again
		}
		if fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 && fds[0].Revents&unix.POLLIN == 0 {
			return // the socket is unusable; never spin on it
		}
	}
}

// apply acts on one directive datagram.
func (c *Client) apply(datagram []byte) {
	stop, warning := parseDirective(datagram)
	if stop != nil && c.stopped.Err() == nil {
		watched := c.watchers.Load() > 0 // before the cancellation ends them
		c.stop(stop)                     // only the first cause is kept
		if watched {
			c.Stopping() // the acknowledgement: the agent's stop path is armed
		}
	}
	if warning != "" {
		select {
		case c.warnings <- warning:
		default:
		}
	}
}

// parseDirective parses a datagram of newline-separated KEY=VALUE lines. It
// returns a StopError when STOP=1 is present, and the WARNING value. As on the
// supervisor's side, the first of duplicate keys wins, lines without '=' and
// unknown keys are ignored, and a trailing CR is trimmed.
func parseDirective(datagram []byte) (stop *StopError, warning string) {
	var fields struct{ stop, check, reason, grace, killEventID, warning []byte }
	for line := range bytes.SplitSeq(datagram, []byte("\n")) {
		key, value, ok := bytes.Cut(bytes.TrimSuffix(line, []byte("\r")), []byte("="))
		if !ok {
			continue
		}
		var field *[]byte
		switch string(key) {
		case "STOP":
			field = &fields.stop
		case "CHECK":
			field = &fields.check
		case "REASON":
			field = &fields.reason
		case "GRACE_USEC":
			field = &fields.grace
		case "KILL_EVENT_ID":
			field = &fields.killEventID
		case "WARNING":
			field = &fields.warning
		default:
			continue
		}
		if *field == nil { // Cut never returns a nil value: nil means unseen, and the first wins
			*field = value
		}
	}
	if string(fields.stop) == "1" {
		stop = &StopError{
			Check:       string(fields.check),
			Reason:      string(fields.reason),
			Grace:       parseUsec(fields.grace),
			KillEventID: string(fields.killEventID),
		}
	}
	return stop, string(fields.warning)
}

// parseUsec parses a count of microseconds; 0 when malformed, capped when huge.
func parseUsec(v []byte) time.Duration {
	usec, err := strconv.ParseUint(string(v), 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange) || usec > uint64(maxDuration/time.Microsecond):
		return maxDuration
	case err != nil:
		return 0
	}
	return time.Duration(usec) * time.Microsecond
}
