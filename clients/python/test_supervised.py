# Copyright 2026 The hermeskill Authors
# SPDX-License-Identifier: Apache-2.0

"""End to end: Python agents on the client under the real `hermeskilld supervise`.

The documented pattern (hk.ready(); hk.start_heartbeat()) with a main thread that wedges is
killed with no extra flag; a declared wait is honoured for its declared time, and no longer.
The binary is $HERMESKILLD, or built from this repository (skipped without the go command).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

from test_hermeskill import HERE

ROOT = os.path.dirname(os.path.dirname(HERE))
TIMEOUT = 60.0  # only reached on failure


def setUpModule():
    global HERMESKILLD, BUILD_DIR
    HERMESKILLD = os.environ.get("HERMESKILLD", "")
    if HERMESKILLD:
        return
    go = shutil.which("go")
    if go is None:
        raise unittest.SkipTest("no go command to build hermeskilld (or set HERMESKILLD)")
    BUILD_DIR = tempfile.mkdtemp(prefix="hk-e2e")
    HERMESKILLD = os.path.join(BUILD_DIR, "hermeskilld")
    subprocess.run([go, "build", "-o", HERMESKILLD, "./cmd/hermeskilld"], cwd=ROOT, check=True,
                   timeout=300)


def tearDownModule():
    if not os.environ.get("HERMESKILLD"):
        shutil.rmtree(BUILD_DIR, ignore_errors=True)


PRELUDE = """
import time
import hermeskill

hk = hermeskill.Client.from_env()
hk.ready()
hk.start_heartbeat()
"""


class SupervisedTest(unittest.TestCase):
    def supervise(self, agent, *flags):
        """Run ``agent`` (the body after PRELUDE) under supervise with a 1s heartbeat timeout;
        return (exit status, seconds it took, the certificates written)."""
        certs = tempfile.mkdtemp(prefix="hk-certs")
        self.addCleanup(shutil.rmtree, certs, ignore_errors=True)
        env = {k: v for k, v in os.environ.items() if k not in ("HERMESKILL_SOCKET", "NOTIFY_SOCKET")}
        env["PYTHONPATH"] = HERE
        argv = [HERMESKILLD, "supervise", "--id", "e2e", "--heartbeat-timeout", "1s",
                "--coop-grace", "200ms", "--term-grace", "200ms", "--certs-dir", certs]
        argv += list(flags) + ["--", sys.executable, "-c", PRELUDE + textwrap.dedent(agent)]
        start = time.monotonic()
        proc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=TIMEOUT)
        took = time.monotonic() - start
        found = []
        for path in sorted(glob.glob(os.path.join(certs, "*.json"))):
            with open(path) as f:
                found.append(json.load(f))
        return proc.returncode, took, found, proc.stderr.decode(errors="replace")

    def test_wedged_main_thread_is_killed(self):
        code, took, found, stderr = self.supervise("""
            while True:  # wedged: the heartbeat thread still runs, but vouches for nothing
                pass
            """)
        self.assertNotEqual(code, 0, stderr)
        self.assertEqual(len(found), 1, stderr)
        self.assertEqual(found[0]["trigger_check"], "heartbeat_timeout", stderr)
        # Silent one timeout after its last call, killed one timeout later, plus the ladder.
        self.assertLess(took, 10, stderr)

    def test_declared_wait_lives(self):
        code, _, found, stderr = self.supervise("""
            with hk.extend(5):
                time.sleep(2.5)  # a model call of more than two heartbeat timeouts
            hk.progress(1)
            hk.stopping()
            """)
        self.assertEqual(code, 0, stderr)
        self.assertEqual(found, [], stderr)

    def test_wait_past_its_declared_time_is_killed(self):
        code, took, found, stderr = self.supervise("""
            with hk.extend(2):
                while True:  # the call never returns
                    pass
            """)
        self.assertNotEqual(code, 0, stderr)
        self.assertEqual([c["trigger_check"] for c in found], ["heartbeat_timeout"], stderr)
        self.assertGreater(took, 2, "vouched for during the declared time")
        self.assertLess(took, 12, stderr)


if __name__ == "__main__":
    unittest.main()
