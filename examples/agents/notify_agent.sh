#!/bin/sh
# Copyright 2026 The hermeskill Authors
# SPDX-License-Identifier: Apache-2.0
# A shell agent using systemd-notify(1), unchanged, as it would under systemd.
# It beats every 0.2 s for --steps beats (default 10), then exits 0.
steps=${1:-10}
systemd-notify --ready --status="starting"
i=0
while [ "$i" -lt "$steps" ]; do
    sleep 0.2
    systemd-notify WATCHDOG=1 "STATUS=beat $i"
    i=$((i + 1))
done
exit 0
