#!/usr/bin/env python3
# Copyright 2026 The hermeskill Authors
# SPDX-License-Identifier: Apache-2.0
"""A wedged agent: it says READY and beats once, then spins in pure CPU code
ignoring SIGINT and SIGTERM -- the case an in-process watchdog cannot stop.

    hermeskilld supervise --heartbeat-timeout 1s --coop-grace 300ms \
        --term-grace 300ms -- python3 examples/agents/wedged_agent.py

dies by SIGKILL about 1.6 s after its last heartbeat, with a certificate.
Only the standard library: the raw sd_notify protocol is one sendto().
"""
import os
import signal
import socket
import sys

signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)

addr = os.environ.get("NOTIFY_SOCKET")
if addr:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.sendto(b"READY=1\nSTATUS=planning\nWATCHDOG=1", addr)
print("agent: planning the next step...", file=sys.stderr, flush=True)


def plan_next_step_forever():
    while True:  # wedged: no heartbeat, no progress, no signal handling
        pass


plan_next_step_forever()
