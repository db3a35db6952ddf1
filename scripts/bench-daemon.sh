#!/bin/bash
# Copyright 2026 The hermeskill Authors
# SPDX-License-Identifier: Apache-2.0
# Figures for the daemon: RSS and CPU of the daemon with N idle
# agents heartbeating at 1 Hz (examples/agents/tinyagent), and the time to
# start N agents (agent files written -> all running with a heartbeat).
# Run from the repository root: N=1000 scripts/bench-daemon.sh
# CHECKS=", memory: {kill: 1GiB}" adds checks to every agent (a kernel
# check makes the daemon sample each agent's tree every second).
set -euo pipefail
N=${N:-1000}
SAMPLE=${SAMPLE:-30}
HK=${HK:-bin/hermeskilld}
d=$(mktemp -d /tmp/hkbd.XXXX); chmod 755 "$d"
mkdir -p "$d/agents"
go build -o "$d/tinyagent" ./examples/agents/tinyagent
[ -x "$HK" ] || go build -o "$HK" ./cmd/hermeskilld
cat >"$d/hk.yaml" <<Y
state_dir: $d/state
runtime_dir: $d/run
agents_dir: $d/agents
Y
${DAEMON_ENV:-} "$HK" daemon --config "$d/hk.yaml" --log-level warn >"$d/daemon.log" 2>&1 &
dp=$!
cleanup() { kill -TERM $dp 2>/dev/null; wait $dp 2>/dev/null; rm -rf "$d"; }
trap cleanup EXIT
while [ ! -S "$d/run/control.sock" ]; do sleep 0.05; done
export HERMESKILL_CONTROL_SOCKET=$d/run/control.sock
t0=$(date +%s%N)
python3 - "$d" "$N" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(1, n + 1):
    tmp = "%s/agents/.a%d.tmp" % (d, i)
    with open(tmp, "w") as f:
        f.write("id: a%d\ncommand: [%s/tinyagent]\nchecks: {heartbeat_timeout: 10s%s}\n" % (i, d, os.environ.get("CHECKS", "")))
    os.rename(tmp, "%s/agents/a%d.yaml" % (d, i))
PY
echo "== $N agent files written in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
while :; do
  up=$("$HK" ps --json | python3 -c 'import json,sys; a=json.load(sys.stdin); print(sum(1 for x in a if x["state"]=="running" and not x.get("last_heartbeat_at","0001").startswith("0001")))')
  [ "$up" -ge "$N" ] && break
  sleep 0.2
done
echo "== all $N agents running with a heartbeat after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
sleep 5
read -r u1 s1 < <(awk '{print $14, $15}' /proc/$dp/stat)
sleep "$SAMPLE"
read -r u2 s2 < <(awk '{print $14, $15}' /proc/$dp/stat)
rss=$(awk '/VmRSS/ {print $2}' /proc/$dp/status)
thr=$(awk '/Threads/ {print $2}' /proc/$dp/status)
cpu=$(python3 -c "print('%.2f' % (($u2+$s2-$u1-$s1)/100/$SAMPLE*100))")
echo "== daemon with $N idle agents at 1 Hz: RSS $((rss/1024)) MiB, CPU $cpu% of one core over ${SAMPLE}s, $thr threads"
t1=$(date +%s%N)
kill -TERM $dp; wait $dp || true
echo "== SIGTERM: every agent stopped through its ladder, certificates written, in $(( ($(date +%s%N) - t1) / 1000000 )) ms ($(ls "$d/state/certs" | wc -l) certificates)"
