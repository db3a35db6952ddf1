#!/bin/bash
# Copyright 2026 The hermeskill Authors
# SPDX-License-Identifier: Apache-2.0
# Figures for supervise: detection lateness (kill decision minus
# heartbeat deadline), SIGKILL-to-reaped time, and `supervise -- /bin/true`
# wall time beside `tini -s -- /bin/true`. Run from the repository root
# after `make build` (make bench does both). Figures, not a test: the
# machine's load shows in them.
set -euo pipefail
HK=${HK:-bin/hermeskilld}
N=${N:-16}
PY=${PYTHON:-python3}
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
cat >"$d/a.py" <<'PY'
import os, signal, socket, time
signal.signal(signal.SIGINT, signal.SIG_IGN); signal.signal(signal.SIGTERM, signal.SIG_IGN)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); a = os.environ["HERMESKILL_SOCKET"]
s.sendto(b"READY=1", a)
for i in range(5):
    time.sleep(0.05); s.sendto(b"WATCHDOG=1", a)
while True: pass
PY
echo "== detection lateness and SIGKILL->reaped: $N wedged agents (one at a time), heartbeat timeout 300ms"
for i in $(seq "$N"); do
  "$HK" supervise --id "b$i" --heartbeat-timeout 300ms --coop-grace 50ms --term-grace 50ms \
    --certs-dir "$d/certs" --log-level error -- "$PY" "$d/a.py" 2>/dev/null || true
done
"$PY" - "$d/certs" <<'PY'
import json, glob, sys, statistics
from datetime import datetime
def t(s):
    base, _, rest = s.partition(".")
    frac = rest.rstrip("Z")
    return datetime.fromisoformat(base + "." + (frac + "000000")[:6] + "+00:00")
late, reap = [], []
for f in glob.glob(sys.argv[1] + "/*.json"):
    c = json.load(open(f))
    late.append(((t(c["triggered_at"]) - t(c["final_state"]["last_heartbeat_at"])).total_seconds() - 0.300) * 1e3)
    st = {s["step"]: s for s in c["shutdown_log"]}
    reap.append((t(st["reaped"]["at"]) - t(st["sigkill_sent"]["at"])).total_seconds() * 1e3)
q = lambda xs, p: sorted(xs)[min(len(xs) - 1, int(p * len(xs)))]
print("lateness ms:       median %.3f  p90 %.3f  max %.3f  (n=%d)" % (statistics.median(late), q(late, .9), max(late), len(late)))
print("sigkill->reaped ms: median %.3f  p90 %.3f  max %.3f" % (statistics.median(reap), q(reap, .9), max(reap)))
PY
if command -v tini >/dev/null; then
  echo "== supervise -- /bin/true vs tini -s -- /bin/true (median of 60 interleaved runs)"
  "$PY" - "$HK" "$d" <<'PY'
import subprocess, sys, time, statistics
hk, d = sys.argv[1], sys.argv[2]
runs = {"hermeskilld supervise": [hk, "supervise", "--certs-dir", d, "--", "/bin/true"],
        "hermeskilld supervise --containment pgroup": [hk, "supervise", "--containment", "pgroup", "--certs-dir", d, "--", "/bin/true"],
        "tini -s": ["tini", "-s", "--", "/bin/true"], "/bin/true": ["/bin/true"]}
res = {k: [] for k in runs}
for i in range(60):
    for k, cmd in runs.items():
        t = time.perf_counter(); subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); res[k].append(time.perf_counter() - t)
m = {k: statistics.median(v) * 1e3 for k, v in res.items()}
for k, v in m.items():
    print("%-45s %7.2f ms" % (k, v))
print("ratio supervise/tini: %.2f" % (m["hermeskilld supervise"] / m["tini -s"]))
PY
else
  echo "(tini not installed: apt-get install tini)"
fi
