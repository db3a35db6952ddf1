// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package procfs reads the Linux proc filesystem for hermeskilld: the stat,
// status, cmdline, cgroup, environ and fd entries of processes, and snapshots
// of the whole process table from which an agent's process tree is derived.
//
// It owns nothing else: it never signals, never decides and never stores what
// it reads. The parsers (ParseStat, ParseStatus, ParseCgroup2) are pure
// functions of bytes; the methods of FS do the I/O, relative to an injectable
// root so that tests can point them at the fake tree in testdata/proc.
//
// The file formats are specified by proc(5):
// https://man7.org/linux/man-pages/man5/proc.5.html
package procfs
