# Copyright 2026 The hermeskill Authors
# SPDX-License-Identifier: Apache-2.0

"""End-to-end tests of examples/agents/research_agent.py against a fake supervisor.

Each failure mode is checked for what hermeskilld would see on the wire (or on stderr),
and the cooperative stop for what the agent leaves behind.

The kernel queues only 10 datagrams for the supervisor and the client drops rather than
block, so on a loaded machine some messages may be lost. The agent prints the client's own
count of sent and dropped messages; the tests check that every sent message arrived and
hold the agent to the exact sequence whenever nothing was dropped.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest

from test_hermeskill import HERE, FakeSupervisor, quiet_for, read_until

AGENT = os.path.join(HERE, "..", "..", "examples", "agents", "research_agent.py")
TIMEOUT = 20.0  # only reached on failure; generous for loaded CI machines


def fields(datagram):
    return dict(line.split("=", 1) for line in datagram.split("\n"))


def values(seen, key, convert=str):
    return [convert(fields(d)[key]) for d in seen if key + "=" in d]


def is_subsequence(short, full):
    it = iter(full)
    return all(x in it for x in short)


class ResearchAgentTest(unittest.TestCase):
    def setUp(self):
        self.sup = FakeSupervisor()
        self.addCleanup(self.sup.close)
        self.sup.start_reader()
        self.out = os.path.join(self.sup.dir, "out.json")

    def start(self, *flags, supervised=True, **popen):
        env = {k: v for k, v in os.environ.items() if k not in ("HERMESKILL_SOCKET", "NOTIFY_SOCKET")}
        if supervised:
            env.update(HERMESKILL_SOCKET=self.sup.path, WATCHDOG_USEC="150000")  # beat every 50ms
        popen.setdefault("stdout", subprocess.DEVNULL)
        proc = subprocess.Popen(
            [sys.executable, AGENT] + list(flags), env=env, stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE, **popen
        )
        self.addCleanup(proc.stderr.close)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        return proc

    def finish(self, proc):
        """Wait for the agent; return its exit code, stderr, every datagram and the drop count."""
        _, stderr = proc.communicate(timeout=TIMEOUT)
        stderr = stderr.decode()
        seen = self.sup.collect()
        m = re.search(r"hermeskill sent (\d+) messages, dropped (\d+)", stderr)
        self.assertIsNotNone(m, stderr)
        sent, dropped = int(m.group(1)), int(m.group(2))
        # The acknowledgement of a STOP goes from the client's receiver thread right after
        # the stop is set: an agent that sees the stop at checkpoint() may print its count
        # before the acknowledgement is counted.
        late_ack = 1 if "STOPPING=1" in seen and len(seen) == sent + 1 else 0
        self.assertEqual(len(seen) - late_ack, sent, "every message the client sent arrived")
        return proc.returncode, stderr, seen, dropped

    def test_unsupervised_run_completes(self):
        proc = self.start("--steps", "4", "--delay", "0", "--out", self.out, supervised=False, stdout=subprocess.PIPE)
        stdout, stderr = proc.communicate(timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 0, stderr)
        self.assertIn(b"research_agent: done: 4 steps", stdout)
        self.assertNotIn(b"hermeskill sent", stderr)
        with open(self.out) as f:
            result = json.load(f)
        self.assertTrue(result["finished"])
        self.assertEqual(result["steps_completed"], 4)

    def test_supervised_run_reports_everything(self):
        code, stderr, seen, dropped = self.finish(self.start("--steps", "6", "--delay", "0.01"))
        self.assertEqual(code, 0, stderr)
        self.assertEqual(seen[0], "DUMP_SIGNAL=SIGUSR2")  # into an empty queue: never dropped
        progress = values(seen, "PROGRESS", int)
        tokens = values(seen, "TOKENS", int)
        self.assertEqual(tokens, sorted(tokens))  # cumulative
        self.assertTrue(all(len(h) == 64 for h in values(seen, "TOOL_ARGS_SHA256")))
        if dropped:
            self.assertTrue(is_subsequence(progress, range(1, 7)), progress)
            return
        self.assertIn("READY=1\nDUMP_SIGNAL=SIGUSR2", seen)
        self.assertEqual(progress, [1, 2, 3, 4, 5, 6])
        self.assertEqual(len(values(seen, "TOOL")), 6)
        self.assertTrue(any(d.startswith("ERROR=ToolError: fetch_page: timeout") for d in seen), seen)
        self.assertTrue(any(d.startswith("STATUS=step 6/6") for d in seen))
        self.assertIn("STOPPING=1", seen)

    def test_stop_directive_saves_partial_results(self):
        proc = self.start("--steps", "100", "--delay", "0.02", "--out", self.out)
        self.sup.recv_until(lambda d: d.startswith("PROGRESS=") and int(d[9:]) >= 2, timeout=TIMEOUT)
        self.sup.send("STOP=1\nCHECK=cost\nREASON=spent 5.10 USD, limit 5.00\nGRACE_USEC=10000000")
        code, stderr, seen, dropped = self.finish(proc)
        self.assertEqual(code, 0, stderr)
        self.assertIn("stopped by hermeskilld (check cost: spent 5.10 USD, limit 5.00)", stderr)
        if not dropped:
            self.assertIn("STOPPING=1", seen)
        with open(self.out) as f:
            result = json.load(f)
        self.assertFalse(result["finished"])
        self.assertEqual(result["stopped_by"], {"check": "cost", "reason": "spent 5.10 USD, limit 5.00"})
        self.assertGreaterEqual(result["steps_completed"], 2)
        self.assertLess(result["steps_completed"], 100)

    def test_loop_repeats_one_tool_call(self):
        code, stderr, seen, dropped = self.finish(self.start("--loop", "--steps", "8", "--delay", "0.01"))
        self.assertEqual(code, 0, stderr)
        calls = [(fields(d)["TOOL"], fields(d)["TOOL_ARGS_SHA256"]) for d in seen if d.startswith("TOOL=")]
        looped = calls[-1]
        self.assertEqual(looped[0], "web_search")
        repeats = len(calls) - next(i for i in range(len(calls) - 1, -1, -1) if calls[i] != looped) - 1
        self.assertGreaterEqual(repeats, 3 if dropped else 6, calls)  # steps 3..8: the same call
        if not dropped:
            self.assertEqual(len(calls), 8)

    def test_overspend_multiplies_cost(self):
        def costs(*flags):
            code, stderr, seen, _ = self.finish(self.start("--steps", "4", "--delay", "0.01", *flags))
            self.assertEqual(code, 0, stderr)
            return values(seen, "COST_USD", float)

        normal = costs()
        self.sup = FakeSupervisor()
        self.addCleanup(self.sup.close)
        self.sup.start_reader()
        over = costs("--overspend")
        self.assertGreater(max(over), 10 * max(normal))

    def test_stall_falls_silent_then_stops_cooperatively(self):
        proc = self.start("--stall", "--delay", "0.01", "--out", self.out, stdout=subprocess.PIPE)
        self.addCleanup(proc.stdout.close)
        # Handshake on stdout (a pipe loses nothing): step 3 began; a dump shows the main
        # thread in wait_for_upstream.
        self.assertIn(b"step 3: thinking", read_until(proc.stdout, b"step 3: thinking", TIMEOUT))
        self.assertIn(b"wait_for_upstream", dump_until(proc, "wait_for_upstream", AGENT_LINES["upstream"]))
        # Blocked in the main thread, which no longer calls the client, the agent is not
        # vouched for: its heartbeat thread falls silent within the heartbeat timeout
        # (150ms), and hermeskilld's heartbeat_timeout would fire.
        quiet_for(self, self.sup, 1.0, limit=TIMEOUT)
        self.assertLessEqual(max(values(self.sup.log, "PROGRESS", int) or [0]), 2)
        # hermeskilld's cooperative stage: the STOP directive and SIGINT.
        self.sup.send("STOP=1\nCHECK=progress_timeout\nREASON=no progress for 5s")
        proc.send_signal(signal.SIGINT)
        code, stderr, _, _ = self.finish(proc)
        self.assertEqual(code, 0, stderr)
        self.assertIn("check progress_timeout: no progress for 5s", stderr)
        with open(self.out) as f:
            self.assertEqual(json.load(f)["steps_completed"], 2)

    def test_wedge_ignores_polite_signals_and_dumps_where_it_spins(self):
        proc = self.start("--wedge", "--delay", "0.01", stdout=subprocess.PIPE)
        self.addCleanup(proc.stdout.close)
        self.assertIn(b"step 3: thinking", read_until(proc.stdout, b"step 3: thinking", TIMEOUT))
        # Once a dump shows the spin loop itself, SIGINT and SIGTERM are ignored.
        dump_until(proc, "plan_next_step_forever", AGENT_LINES["spin"])
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGTERM)
        # Still alive and still spinning: a later dump shows the same place.
        dump_until(proc, "plan_next_step_forever", AGENT_LINES["spin"])
        self.assertIsNone(proc.poll())
        # The heartbeat thread does not vouch for a main thread that spins: it is silent.
        quiet_for(self, self.sup, 1.0, limit=TIMEOUT)
        proc.kill()
        self.assertEqual(proc.wait(timeout=TIMEOUT), -signal.SIGKILL)


def _agent_lines():
    """Line numbers of the blocking call and of the spin loop in the agent's source."""
    with open(AGENT) as f:
        src = f.read().split("\n")
    upstream = {i + 1 for i, line in enumerate(src) if "return ours.recv(1)" in line}
    first = src.index("def plan_next_step_forever() -> None:")
    loop = src.index("    while True:", first)
    return {"upstream": upstream, "spin": {loop + 1, loop + 2}}


AGENT_LINES = _agent_lines()


def dump_until(proc, function, lines, timeout=TIMEOUT):
    """Send SIGUSR2 until a faulthandler dump shows ``function`` at one of ``lines``.

    The main thread gets there on its own schedule: retry rather than guess a delay.
    Call it only once the agent has started its threads: faulthandler reads other
    threads' state without the GIL, and a dump taken while a thread is being created
    can crash the agent (SIGSEGV).
    """
    deadline = time.monotonic() + timeout
    wanted = re.compile(rb"line (\d+) in " + function.encode())
    reads = []
    while time.monotonic() < deadline and proc.poll() is None:
        proc.send_signal(signal.SIGUSR2)
        # The main thread is dumped last, and its outermost frame is <module>.
        reads.append(read_until(proc.stderr, b"<module>", timeout=1.0))
        if any(int(m) in lines for m in wanted.findall(reads[-1])):
            return reads[-1]
        time.sleep(0.05)  # not there yet: let it run before the next dump
    raise AssertionError(
        "no dump showed %s at lines %s; agent exit status %s; %d dumps read, the last two:\n%s"
        % (function, sorted(lines), proc.poll(), len(reads), b"\n----\n".join(reads[-2:]).decode())
    )


if __name__ == "__main__":
    unittest.main()
