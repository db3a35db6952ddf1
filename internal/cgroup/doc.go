// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package cgroup owns hermeskilld's cgroup v2 containment: finding a
// hierarchy it may write to, one cgroup per agent run, and the kernel
// interfaces that make "kill the whole tree" exact — cgroup.kill,
// cgroup.events and cgroup.freeze — as specified in the kernel's
// Documentation/admin-guide/cgroup-v2.rst and cgroups(7).
//
// A cgroup is the one containment boundary an agent cannot leave on its
// own: children are born in their parent's cgroup, and moving a process
// needs write access to cgroup.procs (cgroup-v2.rst "Processes"), whereas
// setsid(2) or setpgid(2) escape a process group. Agents are spawned straight
// into their group with CLONE_INTO_CGROUP (clone(2), Linux 5.7) through
// syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: g.FD()}, so not even
// the first instructions of the child run outside it.
//
// # How Detect chooses the base
//
// Agent cgroups are created under one parent directory, the base. Detect
// picks it with these rules, first match wins:
//
//  1. The hierarchy is the "cgroup2" entry of /proc/self/mountinfo
//     (proc(5)): /sys/fs/cgroup on a unified host, /sys/fs/cgroup/unified
//     on a hybrid one, where cgroup v1 owns the controllers and the v2
//     hierarchy has none — the core files (cgroup.kill, cgroup.events,
//     cgroup.freeze) still work there, and they are all containment needs.
//     No cgroup2 mount: ErrUnavailable. Options.Mount overrides this step
//     and is checked with statfs(2) for CGROUP2_SUPER_MAGIC.
//  2. Our own cgroup is the "0::/path" line of /proc/self/cgroup
//     (cgroups(7)), the only line that names a v2 cgroup.
//  3. If our own cgroup was delegated to us, it is the base. systemd
//     marks a cgroup it delegates (Delegate=yes) with the extended
//     attribute trusted.delegate=1, and user.delegate=1 where unprivileged
//     readers need to see it (systemd's docs/CGROUP_DELEGATION.md); a
//     non-root process whose own cgroup directory and cgroup.procs are
//     writable holds a delegation too ("A cgroup can be delegated to a less
//     privileged user by granting write access of the directory and its
//     cgroup.procs and cgroup.subtree_control files", cgroup-v2.rst
//     "Model of Delegation"). Because of the "no internal process"
//     constraint (cgroup-v2.rst: non-root cgroups "can distribute domain
//     resources to their children only when they don't have any processes
//     of their own"), Detect first moves every process of the base — this
//     one included, with all its threads — into the leaf base/supervisor,
//     as CGROUP_DELEGATION.md recommends, then enables the memory, pids and
//     cpu controllers the base offers in its cgroup.subtree_control. That
//     last step is best effort: its failures are returned by
//     Manager.Warnings for the caller to log.
//  4. Otherwise, as root with a writable mount root, the base is
//     <mount>/hermeskill, created 0755. systemd asks others not to create
//     cgroups in the root it owns; this rule is for hosts and containers
//     where hermeskilld does not run as a unit with Delegate=yes, and the
//     single directory keeps hermeskilld's cgroups in one place.
//  5. Otherwise: ErrUnavailable, and the caller falls back to process
//     groups plus /proc descendants.
//
// Options.Base skips rules 2 to 5 (tests create a temporary parent under
// the mount).
//
// # Names
//
// An agent's cgroup is named "<sanitised-id>.<pid>-<start>-<pidns>.<n>":
// the pid, start time (proc(5) stat field 22) and PID namespace (the inode
// of /proc/self/ns/pid) of the hermeskilld process that created it, and n a
// per-process counter. Pid and start time identify that process exactly,
// whatever its binary is called and even after its pid is reused; the
// namespace says where that pid means something — a hermeskilld in a
// container that shares the host's cgroup tree cannot look up the host's
// pids, nor the host the container's. A hermeskilld that died (SIGKILL,
// OOM, power loss in a container that kept its cgroups) leaves cgroups
// whose owner no longer exists; CleanupStale finds them by name, kills what
// runs in them and removes them — only for owners of its own PID
// namespace. Names of older versions ("<id>.<pid>.<n>") are judged by the
// owner's process name instead. A name that follows neither pattern is
// not ours and is left alone.
package cgroup
