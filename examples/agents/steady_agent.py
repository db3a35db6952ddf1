#!/usr/bin/env python3
# Copyright 2026 The hermeskill Authors
# SPDX-License-Identifier: Apache-2.0
"""A well-behaved agent: READY, then a heartbeat and a PROGRESS step every
--interval seconds, for --steps steps, then exit 0 (or --exit CODE).
Talks the raw sd_notify protocol, so it needs nothing but Python.

    hermeskilld supervise --heartbeat-timeout 2s -- python3 examples/agents/steady_agent.py
"""
import argparse
import os
import socket
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=10)
p.add_argument("--interval", type=float, default=0.2)
p.add_argument("--exit", type=int, default=0)
args = p.parse_args()

addr = os.environ.get("HERMESKILL_SOCKET") or os.environ.get("NOTIFY_SOCKET")
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) if addr else None


def notify(msg):
    if sock:
        sock.sendto(msg.encode(), addr)


notify("READY=1")
for step in range(1, args.steps + 1):
    time.sleep(args.interval)
    notify("WATCHDOG=1\nPROGRESS=%d\nSTATUS=step %d/%d" % (step, step, args.steps))
print("agent: done after %d steps" % args.steps, file=sys.stderr)
notify("STOPPING=1")
sys.exit(args.exit)
