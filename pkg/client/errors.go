// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"errors"
	"time"
)

var (
	// ErrBadAddress is returned for a socket address that is neither an
	// absolute path nor an abstract name ("@name"), or does not fit sun_path.
	ErrBadAddress = errors.New("hermeskill client: bad socket address")
	// ErrBadWatchdog is returned by FromEnv and WatchdogFromEnv when
	// WATCHDOG_USEC is not a positive integer.
	ErrBadWatchdog = errors.New("hermeskill client: bad WATCHDOG_USEC")
)

var _ error = (*StopError)(nil)

// StopError is the cause of a context returned by Client.Context once
// hermeskilld has sent the STOP directive. Get it with context.Cause and
// errors.As.
type StopError struct {
	// Check is the symptom check that fired, e.g. "tool_loop".
	Check string
	// Reason is hermeskilld's human-readable explanation.
	Reason string
	// Grace is how long the agent has to exit before SIGTERM.
	Grace time.Duration
	// KillEventID is the id of the death certificate that records this
	// kill (its cert_id), sent as KILL_EVENT_ID: save it with partial
	// results to find the certificate later. Empty when hermeskilld did
	// not send one.
	KillEventID string
}

// Error returns "hermeskilld stop: CHECK: REASON".
func (e *StopError) Error() string {
	msg := "hermeskilld stop"
	if e.Check != "" {
		msg += ": " + e.Check
	}
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}
