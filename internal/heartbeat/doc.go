// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package heartbeat owns the agent-facing side of the wire: the AF_UNIX
// SOCK_DGRAM socket an agent sends sd_notify(3)-style messages to, the parser
// for those messages, sender authentication by kernel credentials, and the
// directives sent back to clients that bound their socket.
//
// The protocol is systemd's (https://www.freedesktop.org/software/systemd/man/latest/sd_notify.html):
// one datagram is newline-separated KEY=VALUE assignments; unknown keys are
// ignored; the first occurrence of a duplicate key wins. hermeskill adds its
// own keys (PROGRESS, TOKENS, COST_USD, TOOL, TOOL_ARGS_SHA256, ERROR,
// DUMP_SIGNAL) that systemd ignores, so one client can talk to both.
//
// Nothing read from the socket is trusted before it is authenticated: every
// datagram carries SCM_CREDENTIALS (SO_PASSCRED), the uid must be the agent's
// or root, and the pid must belong to the agent's process tree (an
// Authenticator supplied by the caller decides, backed by the cgroup or the
// /proc process tree). Oversize, malformed, forged, unverifiable and
// rate-limited datagrams are dropped and counted, never delivered.
//
// Beside the datagram socket, a SOCK_STREAM socket (Config.StreamPath,
// StreamName) carries the same messages for runtimes without Unix
// datagrams: KEY=VALUE lines, each message ended by an empty line, the
// peer authenticated once by SO_PEERCRED at accept with the same rules,
// directives written back on the connection in the same framing (see
// stream.go).
//
// This package decides nothing about the agent's health; it hands
// authenticated messages to the symptoms engine through a channel.
package heartbeat
