// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package procsup owns the agent's processes: starting the command (in its
// own process group, straight into its cgroup when there is one, with
// PR_SET_PDEATHSIG so it dies with us), observing its exit through a pidfd,
// reaping every orphan reparented to us as child subreaper, and the agent's
// process tree: which pids belong to it, signalling all of them, and knowing
// when none is left.
//
// All children of this process must be started through Runtime.Start: the
// orphan reaper reaps any child it was not told about, so an os/exec child
// started elsewhere in the process would lose its exit status (a child is
// reaped once: when the reaper gets it first, exec.Cmd.Wait gets ECHILD).
//
// References: prctl(2) PR_SET_CHILD_SUBREAPER and PR_SET_PDEATHSIG,
// pidfd_open(2), pidfd_send_signal(2), waitid(2), clone(2) CLONE_INTO_CGROUP.
package procsup
