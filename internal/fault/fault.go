// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package fault turns a panic in code that serves one agent's run into
// that run's failure instead of the process's end. A daemon supervises
// many agents, and the keeper kills every agent of the host when the
// daemon dies: one panic on agent-controlled input (a datagram, an SSE
// event, a JSON body, an agent file) must not take them all down.
//
// Where a goroutine serves one run — its loop, its ladder, its slot in the
// daemon, the gateway's metering of its requests — it recovers a panic
// with Recovered, which counts it (Counts, the metric
// hermeskill_internal_errors_total) and keeps the stack for the run's
// certificate; the run is then killed for the check internal_error (fail
// closed).
package fault

import (
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// The components whose panics are recovered (the metric's label).
const (
	RunLoop      = "run_loop"      // a run's loop: heartbeats, samples, decisions
	Ladder       = "ladder"        // a run's escalation ladder
	Slot         = "slot"          // the daemon's goroutine of one agent
	GatewayMeter = "gateway_meter" // the gateway's handling and metering of one request
)

// Components lists every component, in the metric's order.
var Components = []string{RunLoop, Ladder, Slot, GatewayMeter}

// MaxStack bounds the stack kept of a panic (its top: the panic's site).
const MaxStack = 8 << 10

// Error is a recovered panic.
type Error struct {
	Component string
	Panic     string // the value, as %v prints it
	Stack     string // the panicking goroutine's, at most MaxStack bytes
}

func (e *Error) Error() string { return "internal error in " + e.Component + ": " + e.Panic }

var counts sync.Map // component -> *atomic.Uint64

// Recovered records the panic v, just recovered in component: it counts
// it and returns it with the stack. Call it from the deferred function
// that recovered, so that the stack is the panicking goroutine's.
func Recovered(component string, v any) *Error {
	c, _ := counts.LoadOrStore(component, new(atomic.Uint64))
	c.(*atomic.Uint64).Add(1)
	stack := debug.Stack()
	if len(stack) > MaxStack {
		stack = append(stack[:MaxStack:MaxStack], "\n… (stack trimmed)"...)
	}
	return &Error{Component: component, Panic: truncate(fmt.Sprint(v), 1024), Stack: string(stack)}
}

// Count is how many panics component recovered in this process.
func Count(component string) uint64 {
	if c, ok := counts.Load(component); ok {
		return c.(*atomic.Uint64).Load()
	}
	return 0
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// hook is the tests' injection (SetTestHook); nil in production.
var hook atomic.Pointer[func(component, agentID string)]

// Inject calls the tests' hook at a point of component serving agentID: a
// test makes it panic there. Without a hook it does nothing.
func Inject(component, agentID string) {
	if h := hook.Load(); h != nil {
		(*h)(component, agentID)
	}
}

// SetTestHook sets the function Inject calls (nil: none). For tests only:
// hermeskilld's own test binary sets it from its environment.
func SetTestHook(f func(component, agentID string)) {
	if f == nil {
		hook.Store(nil)
		return
	}
	hook.Store(&f)
}
