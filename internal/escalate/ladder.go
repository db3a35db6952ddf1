// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package escalate owns how an agent dies: the escalation ladder as one
// bounded sequence — last words, the cooperative stage (directive and
// signal), grace, SIGTERM+SIGCONT to the tree, grace, SIGKILL to the tree,
// and the wait until everything is reaped. Each step leaves early when its
// goal is met and is recorded with its wall time and duration.
//
// The ladder never decides whether to kill (that is package symptoms) and
// never writes records (package certs); it only acts on a Target. Once
// started it cannot be cancelled — a kill stopped half way is worse than
// either outcome — but it can be hurried straight to SIGKILL.
package escalate

import (
	"syscall"
	"time"
)

// Stage is how far the ladder went before the tree was empty.
type Stage string

// Stages, in order.
const (
	StageNone        Stage = "none" // the agent was gone before anything was sent
	StageCooperative Stage = "cooperative"
	StageSIGTERM     Stage = "sigterm"
	StageSIGKILL     Stage = "sigkill"
)

// Step names recorded in the shutdown log.
const (
	StepRevoked     = "capabilities_revoked"
	StepDumpSignal  = "dump_signal_sent"
	StepDirective   = "directive_sent"
	StepCoopSignal  = "coop_signal_sent"
	StepCoopWait    = "coop_wait"
	StepSIGTERM     = "sigterm_sent"
	StepTermWait    = "term_wait"
	StepSIGKILL     = "sigkill_sent"
	StepReaped      = "reaped"
	StepMainExited  = "main_exited"
	StepReapTimeout = "reap_timeout"
)

// Target is the agent's process tree as the ladder sees it.
type Target interface {
	// SignalMain signals the main process; an exited main is not an error.
	SignalMain(sig syscall.Signal) error
	// SignalTree signals every process of the tree and reports how many.
	SignalTree(sig syscall.Signal) (int, error)
	// KillTree SIGKILLs every process of the tree (cgroup.kill where
	// available) and reports how many were signalled and how.
	KillTree() (n int, method string, err error)
	// MainExited is closed once the main process has been reaped.
	MainExited() <-chan struct{}
	// Empty reports whether the main process is reaped and no process of
	// the tree is left.
	Empty() bool
	// WaitEmpty returns a channel closed once Empty would report true;
	// stop releases the watcher early.
	WaitEmpty() (done <-chan struct{}, stop func())
}

// Plan is one run of the ladder.
type Plan struct {
	// Revoke, when set, withdraws what the agent may use before anything
	// is sent to it (its LLM gateway handle: from now on its requests are
	// refused); it returns the step's detail. It is the ladder's first
	// step, even when hurried.
	Revoke func() map[string]any
	// Hold, when set, runs right after the revocation, even when
	// hurried: it holds the tree as the decision found it (frozen) and
	// reports whether it could. Held, the tree takes no signal the ladder
	// sends until Release, so the ladder's first signal (or directive, or
	// last words) goes out at once and Examine follows it, before
	// Release; SIGKILL is the exception (a frozen process still dies of
	// it), so when SIGKILL is the first signal Examine precedes it. Not
	// held (or Hold nil), Examine runs at once, before anything is sent.
	Hold func() bool
	// Examine, when set, is the caller's autopsy, which must see the tree
	// as the decision found it: it runs once, before anything is sent to
	// a tree not held (Hold), and before the tree is released or killed
	// otherwise — before any signal can have reached the agent, even when
	// hurried, even for a tree already empty.
	Examine func()
	// Dump, when set, sends the agent's announced DUMP_SIGNAL (named by
	// DumpSignal, for the record) to the process that announced it, before
	// the cooperative stage; the ladder then waits DumpWait so the agent's
	// stack traces reach its stderr (the "last words").
	Dump       func() error
	DumpSignal syscall.Signal
	DumpWait   time.Duration
	// Directive sends the STOP directive to the agent's bound clients and
	// returns how many got it; nil when there is no one to send to.
	Directive func() int
	// Acked, when set, is closed once a client that got the directive
	// acknowledged it (STOPPING=1): the agent's own stop path is armed,
	// and the cooperative signal is withheld, so that it cannot cut the
	// agent's handler short (a KeyboardInterrupt raised inside the
	// handler that saves the work). The ladder waits for it up to AckWait
	// after the directive; without an acknowledgement by then the signal
	// is sent as usual. The wait is part of CoopGrace, which counts from
	// the directive: SIGTERM comes when it would have.
	Acked   <-chan struct{}
	AckWait time.Duration
	// CoopSignal is sent to the main process at the cooperative stage; 0
	// means none. CoopGrace counts from the directive (or the signal),
	// or, for a held tree, from its release: when the agent can act on it.
	CoopSignal syscall.Signal
	CoopGrace  time.Duration
	TermGrace  time.Duration
	// ReapTimeout bounds the wait after SIGKILL; processes still present
	// then (D state) are survivors.
	ReapTimeout time.Duration
	// Hurry, when closed, skips the remaining graces straight to SIGKILL
	// (a second Ctrl-C).
	Hurry <-chan struct{}
	// OnStep is called after each step is recorded (audit log, events).
	OnStep func(Step)
	// Release, when set, lets a tree held frozen for the autopsy run
	// again. The ladder calls it once, after Examine: right after its
	// first signal (or directive), so that signal is already pending when
	// the tree thaws, and at the latest before its first wait. A signal sent just after a
	// thaw can run the agent's handler without interrupting the blocking
	// call it was thawed in (see procsup.Tree.Snapshot).
	Release func()
}

// Step is one recorded action of the ladder.
type Step struct {
	Name     string
	At       time.Time
	Duration time.Duration
	Detail   map[string]any
}

// Result is what the ladder did.
type Result struct {
	Reached Stage
	Steps   []Step
	// Empty is false when processes survived the bounded wait after SIGKILL.
	Empty bool
}
