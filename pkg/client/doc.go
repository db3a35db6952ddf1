// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package client is the Go agent side of hermeskilld's heartbeat protocol.
//
// An agent supervised by hermeskilld finds the supervisor's socket in
// HERMESKILL_SOCKET (or NOTIFY_SOCKET, so the same code also talks to systemd),
// and reports to it over AF_UNIX SOCK_DGRAM. The protocol is sd_notify(3)'s,
// https://www.freedesktop.org/software/systemd/man/latest/sd_notify.html,
// extended with keys that systemd ignores. One datagram is one message of
// newline-separated KEY=VALUE lines:
//
//	READY=1                      startup done
//	WATCHDOG=1                   heartbeat: the work loop is alive
//	EXTEND_TIMEOUT_USEC=N        a wait of up to N µs: no heartbeat meanwhile
//	WATCHDOG=trigger + STATUS=…  the agent asks to be killed
//	STATUS=text                  free text shown by `hermeskilld ps`
//	STOPPING=1                   the agent is shutting down by itself
//	PROGRESS=N                   monotonic step counter
//	TOKENS=N, COST_USD=X         cumulative usage
//	TOOL=name + TOOL_ARGS_SHA256=hex   one tool call began (see ArgsHash)
//	ERROR=text                   one error happened
//	DUMP_SIGNAL=SIGNAME          the signal that makes the agent dump its stacks
//
// Text values are made single-line and capped at 1 KiB.
//
// The supervisor answers with directives, sent back to the client's socket:
//
//	STOP=1, CHECK=name, REASON=text, GRACE_USEC=N,  stop now; KILL_EVENT_ID names
//	KILL_EVENT_ID=id                                the certificate of this kill
//	WARNING=name: text                              a warning symptom
//
// [Client.Context] turns STOP into context cancellation with a [*StopError]
// cause (its KillEventID is the death certificate's cert_id), and [Client.Warnings] delivers warnings. The client's socket is
// connected to the supervisor's, so the kernel refuses directives from any
// other socket.
//
// # What the background heartbeat proves
//
// [Client.Heartbeat], run in its own goroutine, proves only that a goroutine
// lives, which is not that the agent works: a main loop spinning in for {}
// or blocked forever leaves it running. So it vouches for the agent only
// while the work loop passes through the client: it sends WATCHDOG=1 while
// some reporting method (Progress, ToolCall, Usage, Error, Status, Beat, …)
// was called within the heartbeat timeout (WATCHDOG_USEC; three beat
// intervals when it is unset), and then falls silent, so the supervisor
// kills a wedged loop at most about two timeouts after its last call.
//
//	c.Ready()
//	go c.Heartbeat(ctx, 0)
//	for step := uint64(1); ctx.Err() == nil; step++ {
//		end := c.Extend(5 * time.Minute) // a model call of minutes
//		answer, err := model.Complete(ctx, prompt)
//		end()
//		…
//		c.Progress(step) // once per step, at least once per timeout
//	}
//
// A call that may block longer than the timeout is declared with
// [Client.Extend]: it sends EXTEND_TIMEOUT_USEC, which hermeskilld bounds
// by its max_extension, and Heartbeat keeps the wait vouched for up to the
// declared time, no longer. docs/protocol.md in the repository states the
// rule for every client.
//
// Every method is safe for concurrent use and never blocks the agent: a message
// that cannot be sent at once is dropped and counted ([Client.Dropped]). When the
// process is not supervised, [FromEnv] returns a client whose methods do nothing,
// so agent code runs the same with and without hermeskilld.
package client
