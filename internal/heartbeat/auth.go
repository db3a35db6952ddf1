// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat

import "time"

// Verdict is an Authenticator's answer about one sender pid.
type Verdict int

const (
	// Member: the pid belongs to the agent's process tree.
	Member Verdict = iota
	// NotMember: the pid is alive and outside the tree: a forgery.
	NotMember
	// Gone: the pid no longer exists, so membership cannot be verified.
	Gone
)

// Authenticator decides whether a sender pid belongs to the agent's tree.
// It is called while the socket is read — with a Poller, on the goroutine
// that reads every agent's socket — and as a stream connection is
// accepted, so it must answer at once and never wait for its run's state
// (Config.Ready holds the reading and the accepting back until the run can
// answer): while it runs nothing is read, and Socket.Close waits for it.
type Authenticator interface {
	Authenticate(pid int) Verdict
}

// AuthFunc adapts a function to Authenticator.
type AuthFunc func(pid int) Verdict

// Authenticate calls f.
func (f AuthFunc) Authenticate(pid int) Verdict { return f(pid) }

// Cache lifetimes. A verdict costs a /proc read; an agent sends many
// datagrams from the same few pids, so verdicts are cached. A positive
// verdict lives longer than an agent's usual beat interval (1s): on a host
// of a thousand agents, re-reading /proc/PID/cgroup for every heartbeat
// was a tenth of the daemon's CPU. What the lifetime admits — a member's
// pid reused within it by a process outside the tree — still needs that
// process to have the agent's uid (or root) to reach the 0600 socket in
// its 0700 directory, and such a process can signal the agent anyway.
//
// The rule for a sender that exited before its datagram was read (a
// fire-and-forget `systemd-notify --no-block`): it is accepted only when the
// same pid was verified as a member within memberTTL; otherwise it is
// dropped and counted as unverifiable. Accepting unverifiable senders would
// let any process of the agent's uid outside the tree keep a wedged agent
// alive by sending a heartbeat and exiting at once. systemd-notify's default
// mode waits for BARRIER=1 to be answered, so it is alive when read and
// always verifiable. A Gone verdict is never cached, so it cannot cause a
// later datagram from a live member to be dropped.
const (
	memberTTL    = 5 * time.Second
	notMemberTTL = 250 * time.Millisecond
	maxCached    = 4096
)

type cacheEntry struct {
	v       Verdict
	expires time.Time
}

// authCache is used under Socket.screenMu only: by whoever reads the
// datagrams, and by the stream socket's accepting goroutine.
type authCache struct {
	auth    Authenticator
	entries map[int]cacheEntry
}

func newAuthCache(a Authenticator) *authCache {
	return &authCache{auth: a, entries: make(map[int]cacheEntry)}
}

func (c *authCache) verdict(pid int, now time.Time) Verdict {
	if c.auth == nil {
		return Member
	}
	if e, ok := c.entries[pid]; ok && now.Before(e.expires) {
		return e.v
	}
	v := c.auth.Authenticate(pid)
	switch v {
	case Member:
		c.store(pid, cacheEntry{v, now.Add(memberTTL)})
	case NotMember:
		c.store(pid, cacheEntry{v, now.Add(notMemberTTL)})
	case Gone:
		// Not cached; see the rule above. A recent Member entry that
		// expired is not consulted either: it has expired.
	}
	return v
}

func (c *authCache) store(pid int, e cacheEntry) {
	if len(c.entries) >= maxCached {
		clear(c.entries)
	}
	c.entries[pid] = e
}
