#!/usr/bin/env python3
# Copyright 2026 The hermeskill Authors
# SPDX-License-Identifier: Apache-2.0
"""An agent that stops cooperatively: on SIGINT (hermeskilld's default
cooperative signal) it saves its work and exits 3 within the grace period.

    hermeskilld supervise --heartbeat-timeout 500ms -- python3 examples/agents/cooperative_agent.py

READY, then it never beats again: killed by heartbeat_timeout, it exits by
itself in the cooperative stage (exit status 3, escalation reached
"cooperative").
"""
import os
import socket
import sys
import time

addr = os.environ.get("NOTIFY_SOCKET")
if addr:
    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"READY=1", addr)
try:
    time.sleep(3600)
except KeyboardInterrupt:
    print("agent: interrupted, saving work and exiting", file=sys.stderr)
    sys.exit(3)
