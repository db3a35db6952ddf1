# Copyright 2026 The hermeskill Authors
# SPDX-License-Identifier: Apache-2.0

"""Tests of the asyncio helpers (Client.supervised_task, Client.run_heartbeat) on a real
AF_UNIX SOCK_DGRAM socket, against the fake supervisor of test_hermeskill.

Run from the repository root: python3 -m unittest discover -s clients/python -v
"""

from __future__ import annotations

import asyncio
import sys
import time
import unittest

import hermeskill
from test_hermeskill import StampedSupervisor, SupervisedTestCase, wait_until

STOP = "STOP=1\nCHECK=cost\nREASON=spent 5.10 USD, limit 5\nGRACE_USEC=2000000\nKILL_EVENT_ID=k-9"


async def until(predicate, timeout=10.0):
    """Await until ``predicate`` is true, without blocking the loop."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.005)


class SupervisedTaskTest(SupervisedTestCase):
    def test_stop_cancels_the_task_and_raises_terminated(self):
        hk = self.connected_client()
        events = []

        async def main():
            async with hk.supervised_task(heartbeat=False):
                try:
                    events.append("working")
                    self.sup.send(STOP)
                    await asyncio.sleep(30)
                    events.append("not cancelled")
                finally:
                    events.append("cleanup")

        start = time.monotonic()
        with self.assertRaises(hermeskill.HermeskillTerminated) as cm:
            asyncio.run(main())
        self.assertLess(time.monotonic() - start, 10.0)
        stop = cm.exception
        self.assertEqual((stop.check, stop.reason, stop.grace, stop.kill_event_id),
                         ("cost", "spent 5.10 USD, limit 5", 2.0, "k-9"))
        self.assertIsInstance(stop.__cause__, asyncio.CancelledError)
        self.assertEqual(events, ["working", "cleanup"])

    def test_stop_cancels_what_the_task_awaits(self):
        hk = self.connected_client()
        children = []

        async def main():
            async with hk.supervised_task(heartbeat=False):
                children.extend(asyncio.ensure_future(asyncio.sleep(30)) for _ in range(2))
                self.sup.send(STOP)
                await asyncio.gather(*children)

        with self.assertRaises(hermeskill.HermeskillTerminated):
            asyncio.run(main())
        self.assertTrue(all(c.cancelled() for c in children))

    def test_work_that_catches_the_cancellation_still_ends_terminated(self):
        hk = self.connected_client()
        caught = []

        async def main():
            async with hk.supervised_task(heartbeat=False):
                try:
                    self.sup.send(STOP)
                    await asyncio.sleep(30)
                except asyncio.CancelledError:
                    caught.append(True)  # saves its work and returns
            return "returned"

        with self.assertRaises(hermeskill.HermeskillTerminated) as cm:
            asyncio.run(main())
        self.assertEqual(caught, [True])
        self.assertIsNone(cm.exception.__cause__)

    def test_stop_before_the_block_raises_at_once(self):
        hk = self.connected_client()
        self.sup.send(STOP)
        wait_until(lambda: hk.stop_requested)
        entered = []

        async def main():
            async with hk.supervised_task():
                entered.append(True)

        with self.assertRaises(hermeskill.HermeskillTerminated):
            asyncio.run(main())
        self.assertEqual(entered, [])

    def test_other_cancellations_stay_cancellations(self):
        hk = self.connected_client()

        async def work():
            async with hk.supervised_task(heartbeat=False):
                await asyncio.sleep(30)

        async def main():
            await asyncio.wait_for(work(), 0.05)

        with self.assertRaises(asyncio.TimeoutError):
            asyncio.run(main())
        self.assertFalse(hk.stop_requested)

    @unittest.skipIf(sys.version_info < (3, 11), "cancellation requests are counted from Python 3.11")
    def test_a_stop_and_another_cancellation_stay_a_cancellation(self):
        hk = self.connected_client()

        async def main():
            task = asyncio.current_task()
            async with hk.supervised_task():
                try:
                    self.sup.send(STOP)
                    await asyncio.sleep(30)
                except asyncio.CancelledError:
                    task.cancel()  # another request arrives while the stop's is handled
                    raise

        with self.assertRaises(asyncio.CancelledError):
            asyncio.run(main())
        self.assertTrue(hk.stop_requested)

    def test_an_error_in_the_cleanup_goes_through(self):
        hk = self.connected_client()

        async def main():
            async with hk.supervised_task(heartbeat=False):
                try:
                    self.sup.send(STOP)
                    await asyncio.sleep(30)
                finally:
                    raise OSError("disk full while saving")

        with self.assertRaises(OSError):
            asyncio.run(main())

    def test_a_block_left_is_not_cancelled_by_a_later_stop(self):
        hk = self.connected_client()

        async def main():
            async with hk.supervised_task(heartbeat=False):
                await asyncio.sleep(0)
            self.sup.send(STOP)
            await until(lambda: hk.stop_requested)
            await asyncio.sleep(0.05)  # no CancelledError here
            return "after"

        self.assertEqual(asyncio.run(main()), "after")
        with self.assertRaises(hermeskill.HermeskillTerminated):
            hk.checkpoint()

    def test_each_task_has_its_block(self):
        hk = self.connected_client()
        results = {}

        async def agent(name):
            try:
                async with hk.supervised_task(heartbeat=False):
                    await asyncio.sleep(30)
            except hermeskill.HermeskillTerminated as stop:
                results[name] = stop.check

        async def main():
            tasks = [asyncio.ensure_future(agent(n)) for n in ("a", "b")]
            await asyncio.sleep(0)  # the tasks' first steps run first: both are inside
            self.sup.send(STOP)
            await asyncio.gather(*tasks)

        asyncio.run(main())
        self.assertEqual(results, {"a": "cost", "b": "cost"})

    def test_a_block_is_entered_once(self):
        hk = self.connected_client()
        block = hk.supervised_task(heartbeat=False)

        async def main():
            async with block:
                pass
            async with block:
                pass

        with self.assertRaises(RuntimeError):
            asyncio.run(main())

    def test_unsupervised_block_does_nothing(self):
        hk = hermeskill.Client.from_env({})

        async def main():
            async with hk.supervised_task():
                return len(asyncio.all_tasks())

        self.assertEqual(asyncio.run(main()), 1, "no heartbeat task")


class AsyncHeartbeatTest(SupervisedTestCase):
    def test_beats_on_the_loop_inside_the_block_only(self):
        # A heartbeat timeout of a minute: the client's creation vouches for the whole test.
        hk = self.client(heartbeat_interval=0.04, environ={"WATCHDOG_USEC": "60000000"})

        async def main():
            async with hk.supervised_task():
                tasks = len(asyncio.all_tasks())
                await asyncio.sleep(0.2)
            return tasks, len(asyncio.all_tasks())

        self.assertEqual(asyncio.run(main()), (2, 1), "the heartbeat task is there, then gone")
        beats = self.sup.pending()
        self.assertGreaterEqual(len(beats), 3, beats)
        self.assertEqual(set(beats), {"WATCHDOG=1"})
        self.sup.assert_silent(self, within=0.15)

    def test_no_second_heartbeat_beside_the_thread(self):
        hk = self.client(heartbeat_interval=0.04, environ={"WATCHDOG_USEC": "60000000"})
        hk.start_heartbeat()

        async def main():
            async with hk.supervised_task():
                return len(asyncio.all_tasks())

        self.assertEqual(asyncio.run(main()), 1)

    def test_run_heartbeat_ends_on_close(self):
        hk = self.client(heartbeat_interval=0.02, environ={"WATCHDOG_USEC": "60000000"})

        async def main():
            beat = asyncio.ensure_future(hk.run_heartbeat())
            await asyncio.sleep(0.05)
            hk.close()
            await asyncio.wait_for(beat, 1.0)

        asyncio.run(main())
        self.assertIn("WATCHDOG=1", self.sup.pending())

    def test_unsupervised_run_heartbeat_returns_at_once(self):
        hk = hermeskill.Client.from_env({})
        asyncio.run(asyncio.wait_for(hk.run_heartbeat(0.01), 1.0))
        with self.assertRaises(ValueError):
            asyncio.run(hk.run_heartbeat(0))


class BlockedLoopTest(unittest.TestCase):
    def test_a_blocked_loop_is_not_vouched_for_even_in_a_declared_wait(self):
        # A thread would go on vouching for the declared wait; the loop's own heartbeat
        # cannot run while a coroutine blocks the loop.
        sup = StampedSupervisor()
        self.addCleanup(sup.close)
        hk = hermeskill.Client(sup.path, dump_signal=None, heartbeat_interval=0.02,
                               environ={"WATCHDOG_USEC": "60000000"})
        self.addCleanup(hk.close)

        async def main():
            async with hk.supervised_task():
                await asyncio.sleep(0.1)
                with hk.extend(60):
                    blocked = time.time()
                    time.sleep(0.4)  # synchronous: the loop stands still
                    unblocked = time.time()
                await asyncio.sleep(0.1)
            return blocked, unblocked

        blocked, unblocked = asyncio.run(main())
        got = sup.until_quiet(quiet=0.2)
        during = [t for at, t in got if blocked + 0.01 < at < unblocked - 0.01]
        self.assertEqual(during, [])
        self.assertIn("EXTEND_TIMEOUT_USEC=60000000", [t for _, t in got])
        self.assertTrue(any(at > unblocked and t == "WATCHDOG=1" for at, t in got), "beats again after")


if __name__ == "__main__":
    unittest.main()
