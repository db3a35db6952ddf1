// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package keeper makes hermeskilld fail closed: if hermeskilld dies, even
// by SIGKILL, every process of every agent it supervised dies within a
// second.
//
// PR_SET_PDEATHSIG (prctl(2)) reaches only the agent's main process, the
// direct child; its children and anything that called setsid(2) would be
// reparented to init and live on, unsupervised. So before it starts any
// agent, hermeskilld starts a keeper: its own binary again, in a session of
// its own, without a parent-death signal, holding the read end of a pipe
// whose write end only hermeskilld holds. hermeskilld tells it, over that
// pipe, what to kill should it die; the pipe reaches end of file when
// hermeskilld's last file descriptor on it closes, which the kernel does
// when it dies, however it dies. What the keeper must kill (the cgroups,
// the runs) is in the pipe before each agent's fork, so hermeskilld need
// not wait for the keeper's own start before it starts a confined agent:
// should hermeskilld die before the keeper even runs, the keeper reads it
// all once it does, then end of file. An unconfined agent waits for the
// keeper to be ready (undumpable: from its execve(2) to then, an agent of
// our user could open its pipe through /proc; a Landlock domain refuses
// that), and a keeper that fails to start after a confined agent did
// stops that agent. Then the keeper:
//
//   - kills every agent cgroup hermeskilld created (their names carry its
//     pid and start time) with cgroup.kill, and removes them — nothing in
//     a cgroup can escape it;
//   - without cgroups, kills each agent's process group in one call, every
//     process hermeskilld had seen in an agent's tree, every process whose
//     environment still carries the agent's heartbeat socket (the one
//     variable every agent process inherits), and every descendant of
//     those, in passes until one finds nothing left (a fork bomb's last
//     children are found by the next pass).
//
// A clean exit of hermeskilld disarms the keeper first, so it exits
// without killing anything. If the keeper itself dies while hermeskilld
// runs, hermeskilld starts another and tells it everything again.
//
// Limits. A keeper is a process: if every process of hermeskilld's is
// SIGKILLed at once (kill -9 of the keeper and of hermeskilld together,
// the OOM killer taking both, a container runtime killing the whole
// cgroup of hermeskilld itself), the main processes still die by their
// parent-death signal, agent cgroups are left populated until the next
// hermeskilld start removes them (cgroup.CleanupStale), and without
// cgroups a process that left the agent's process group and cleared its
// environment survives. When hermeskilld is the init of a PID namespace
// (a container's entrypoint) no keeper is needed: the kernel kills every
// process of the namespace when its init dies (pid_namespaces(7)).
//
// # Wire format
//
// One line per message, fields separated by one space, strings quoted
// as Go string literals:
//
//	cgroup "BASE" PID START PIDNS   reap the agent cgroups under BASE that
//	                                the process (PID, START, PIDNS) created
//	run N "KEY=VALUE"               run N began; its processes carry KEY=VALUE
//	                                in their environment
//	group N PGID START              run N's process group: its main process
//	                                (pid PGID, start time START)
//	pid N PID START                 a process seen in run N's tree
//	end N                           run N is over: forget it
//	journal "DIR"                   after a kill, write what was killed and
//	                                when into DIR (package runjournal)
//	disarm                          exit without killing anything
//
// START values are proc(5) stat field 22, clock ticks since boot.
package keeper
