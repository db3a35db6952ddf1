// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package fdbudget accounts for the daemon's file descriptors against its
// limit (RLIMIT_NOFILE, getrlimit(2)): what each agent holds, what the
// listeners may hold at their connection bounds, and what the daemon
// itself keeps. The daemon refuses an agent that would not fit, with the
// figure, and warns once the budget passes WarnFraction of the limit:
// running out is never found by a socket that stops accepting or a kernel
// check that silently stops sampling.
//
// The soft limit is what counts. Go raises it to the hard limit for the
// process at start (package syscall, since Go 1.19) and gives every child
// the soft limit the process started with, so agents keep theirs: only the
// hard limit (systemd's LimitNOFILE=) bounds the daemon.
//
// It also counts the shortages that happened anyway (Shortage), by where.
package fdbudget

import (
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// What one agent holds for as long as it runs, measured on a daemon of
// agents (a test counts them): its pidfd, its stdout and stderr pipes, its
// heartbeat datagram and stream sockets, a stream connection, its output
// log, and what its kernel checks keep open between samples — in cgroup
// mode the cgroup directory, cgroup.procs and cpu.stat — and SamplerFiles
// /proc/PID/stat files. Processes of its tree beyond SamplerFiles are read
// with open, read and close (one descriptor for a moment).
const (
	SamplerFiles    = 4
	perAgentPgroup  = 7 + SamplerFiles
	perAgentCgroup  = perAgentPgroup + 3
	WarnFraction    = 0.9
	daemonOwn       = 64 // logs, audit log and its locks, inotify, epoll, the keeper's pipe, metrics, the kill path's reserve (fdreserve.Size)
	ControlReserve  = 4  // descriptors kept for the control socket's accepts (connlimit.Options.Reserve)
	gatewayPerConns = 2  // an agent's connection and its upstream connection
)

// PerAgent is what one agent holds: in cgroup mode, or in process-group
// mode.
func PerAgent(cgroup bool) int {
	if cgroup {
		return perAgentCgroup
	}
	return perAgentPgroup
}

// Egress is what a network: allowlist agent holds beyond PerAgent with its
// egress proxy at its bounds of tunnels: the proxy's listener, the agent's
// connections to it (at most twice the tunnels) and each tunnel's
// upstream socket.
func Egress(tunnels int) int { return 1 + 3*tunnels }

// Budget is the daemon's descriptor accounting.
type Budget struct {
	// Limit is the soft RLIMIT_NOFILE (Limit reads it).
	Limit int
	// PerAgent is what each agent holds (PerAgent).
	PerAgent int
	// Reserved is what the daemon holds whatever its agents: its own,
	// the control socket's connections at their bound and its reserve,
	// the gateway's at its bound (Reserve).
	Reserved int
}

// Reserve is Budget.Reserved for a daemon whose control socket holds at
// most controlConns connections and whose gateway (gatewayConns 0: none)
// at most gatewayConns agent connections, each with its upstream one, and
// idleConns idle upstream ones beside them (counted when there are several
// upstreams: idle connections to one are not reused by another's requests).
func Reserve(controlConns, gatewayConns, idleConns, upstreams int) int {
	n := daemonOwn + controlConns + ControlReserve + gatewayPerConns*gatewayConns
	if upstreams > 1 {
		n += idleConns
	}
	return n
}

// Limit is the process's soft RLIMIT_NOFILE (1024 if it cannot be read,
// or is beyond an int).
func Limit() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 || rl.Cur > 1<<31 {
		if err == nil && rl.Cur > 1<<31 {
			return 1 << 31
		}
		return 1024
	}
	return int(rl.Cur)
}

// Need is what agents agents and the reserve hold.
func (b Budget) Need(agents int) int { return b.Reserved + agents*b.PerAgent }

// AdmitExtra is Admit for an agent that holds extra descriptors beyond
// PerAgent (Egress), beside running agents that hold inUse beyond theirs.
func (b Budget) AdmitExtra(running, inUse, extra int) error {
	if b.Need(running+1)+inUse+extra <= b.Limit {
		return nil
	}
	return &ExceededError{InUse: b.Need(running) + inUse, Limit: b.Limit, PerAgent: b.PerAgent + extra}
}

// Fits is the number of agents that fit under the limit.
func (b Budget) Fits() int {
	if b.PerAgent <= 0 || b.Limit <= b.Reserved {
		return 0
	}
	return (b.Limit - b.Reserved) / b.PerAgent
}

// Admit returns nil when one more agent fits beside running ones, else an
// *ExceededError with the figure.
func (b Budget) Admit(running int) error {
	if b.Need(running+1) <= b.Limit {
		return nil
	}
	return &ExceededError{InUse: b.Need(running), Limit: b.Limit, PerAgent: b.PerAgent}
}

// Near reports whether agents agents take the budget past WarnFraction of
// the limit.
func (b Budget) Near(agents int) bool {
	return float64(b.Need(agents)) > WarnFraction*float64(b.Limit)
}

// ExceededError is an agent refused for want of descriptors.
type ExceededError struct {
	InUse, Limit, PerAgent int
}

func (e *ExceededError) Error() string {
	return fmt.Sprintf("descriptor budget: %s of %s in use; an agent needs %d; raise LimitNOFILE= (the daemon's open-files limit)",
		thousands(e.InUse), thousands(e.Limit), e.PerAgent)
}

// thousands writes n with a comma every three digits (9,120).
func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	out := make([]byte, 0, len(s)+len(s)/3)
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, c)
	}
	return string(out)
}

// Where a shortage happened: the label values of the shortage metric.
const (
	ControlAccept = "control_accept" // the control socket could not accept (EMFILE, ENFILE)
	AgentRefused  = "agent_refused"  // an agent was refused by the budget
)

// Wheres are the shortage places, in the order they are exported.
var Wheres = []string{AgentRefused, ControlAccept}

var shortages [2]atomic.Uint64

// Shortage counts one shortage at where (one of Wheres).
func Shortage(where string) {
	for i, w := range Wheres {
		if w == where {
			shortages[i].Add(1)
			return
		}
	}
}

// Shortages is how many shortages were counted at where.
func Shortages(where string) uint64 {
	for i, w := range Wheres {
		if w == where {
			return shortages[i].Load()
		}
	}
	return 0
}
