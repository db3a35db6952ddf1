// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package denials counts what the kernel's Landlock refused an agent: a
// write outside its `writable:` paths, a signal to a process outside its
// domain (its supervisor, its keeper, anyone else). Landlock keeps no
// count a process could read; since Linux 6.15 (Landlock ABI 7) it logs
// each denial through the audit subsystem, for a domain created with
// LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON (the agent is executed after the
// restriction, and denials after an execve(2) are not logged without it).
//
// The records are read from the audit netlink socket's read-only
// multicast group (AUDIT_NLGRP_READLOG, which needs CAP_AUDIT_READ): no
// audit daemon is displaced, none is needed, and the audit configuration
// is never changed. The kernel logs only while auditing is enabled
// (`auditctl -e 1`, or audit=1 at boot); Open says when it is not.
//
// Records of one event share its serial: a denial is an
// AUDIT_LANDLOCK_ACCESS record (the domain, what blocked it, the path or
// the target) followed by the AUDIT_SYSCALL record of the call (its pid).
// The pid attributes the domain to a tracked agent once; later denials of
// that domain count for it by the domain alone. When a domain's last
// process exits the kernel logs its own total (AUDIT_LANDLOCK_DOMAIN
// status=deallocated denials=N), which is the count from then on: the
// multicast group is lossy under load, the kernel's total is not.
//
// References: https://docs.kernel.org/userspace-api/landlock.html
// ("Logging"), https://docs.kernel.org/admin-guide/LSM/landlock.html,
// netlink(7), linux/audit.h.
package denials
