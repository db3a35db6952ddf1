# Copyright 2026 The hermeskill Authors
# SPDX-License-Identifier: Apache-2.0

"""Tests of the surface shared with the in-process hermeskill SDK (0.1.0a1): the module's
checkpoint() and default client, HermeskillTerminated(reason, kill_event_id=...),
HermeskillError, __version__.

Run from the repository root: python3 -m unittest discover -s clients/python -v
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
import threading
import unittest
from unittest import mock

import hermeskill
from test_hermeskill import HERE, FakeSupervisor, wait_until

STOP = "STOP=1\nCHECK=tokens\nREASON=budget exceeded\nGRACE_USEC=3000000\nKILL_EVENT_ID=k-1"


def unsupervised_environ():
    return {k: v for k, v in os.environ.items() if k not in ("HERMESKILL_SOCKET", "NOTIFY_SOCKET")}


class SurfaceTest(unittest.TestCase):
    def test_terminated_takes_the_sdk_signature(self):
        e = hermeskill.HermeskillTerminated("budget exceeded", kill_event_id="k-1")
        self.assertEqual((e.reason, e.kill_event_id, e.check, e.grace), ("budget exceeded", "k-1", "", None))
        self.assertEqual(e.args, ("budget exceeded",))
        self.assertEqual(str(e), "hermeskilld stopped the agent: budget exceeded; kill event k-1")
        self.assertIsNone(hermeskill.HermeskillTerminated("r").kill_event_id)
        with self.assertRaises(TypeError):
            hermeskill.HermeskillTerminated("r", "k-1")  # kill_event_id is keyword-only, as there

    def test_terminated_is_not_swallowed_by_except_exception(self):
        self.assertTrue(issubclass(hermeskill.HermeskillTerminated, BaseException))
        self.assertFalse(issubclass(hermeskill.HermeskillTerminated, Exception))
        self.assertFalse(issubclass(hermeskill.HermeskillTerminated, hermeskill.HermeskillError))
        with self.assertRaises(hermeskill.HermeskillTerminated):
            try:
                raise hermeskill.HermeskillTerminated("stop")
            except Exception:
                self.fail("except Exception caught the stop")

    def test_client_errors_are_hermeskill_errors(self):
        self.assertTrue(issubclass(hermeskill.HermeskillError, Exception))
        with self.assertRaises(hermeskill.HermeskillError) as cm:
            hermeskill.Client("relative.sock", environ={})
        self.assertIsInstance(cm.exception, hermeskill.ConfigError)
        self.assertIsInstance(cm.exception, ValueError)

    def test_terminated_pickles_with_its_fields(self):
        e = hermeskill.HermeskillTerminated("over", check="cost", grace=1.5, kill_event_id="k-2")
        back = pickle.loads(pickle.dumps(e))
        self.assertEqual((back.reason, back.check, back.grace, back.kill_event_id), ("over", "cost", 1.5, "k-2"))

    def test_version_and_all(self):
        self.assertRegex(hermeskill.__version__, r"^\d+\.\d+\.\d+")
        for name in hermeskill.__all__:
            self.assertTrue(hasattr(hermeskill, name), name)
        for name in ("checkpoint", "HermeskillError", "HermeskillTerminated"):
            self.assertIn(name, hermeskill.__all__)


class DefaultClientTest(unittest.TestCase):
    def setUp(self):
        saved = hermeskill._default
        hermeskill._default = None

        def restore():
            if hermeskill._default is not None:
                hermeskill._default.close()
            hermeskill._default = saved

        self.addCleanup(restore)

    def test_first_client_from_the_environment_is_the_default(self):
        with mock.patch.dict(os.environ, unsupervised_environ(), clear=True):
            explicit = hermeskill.Client.from_env({})  # an environ of its own: not the process's
            first = hermeskill.Client.from_env()
            second = hermeskill.Client()
        self.assertIsNot(hermeskill.default_client(), explicit)
        self.assertIs(hermeskill.default_client(), first)
        self.assertIsNot(second, first)

    def test_checkpoint_unsupervised_is_a_no_op(self):
        threads = threading.active_count()
        with mock.patch.dict(os.environ, unsupervised_environ(), clear=True):
            hermeskill.checkpoint()
            hermeskill.checkpoint()
        self.assertFalse(hermeskill.default_client().supervised)
        self.assertEqual(threading.active_count(), threads)

    def test_checkpoint_raises_once_the_default_client_got_stop(self):
        sup = FakeSupervisor()
        self.addCleanup(sup.close)
        with mock.patch.dict(os.environ, {"HERMESKILL_SOCKET": sup.path}):
            hk = hermeskill.Client.from_env(dump_signal=None, interrupt_main=False)
        self.assertIs(hermeskill.default_client(), hk)
        hk.ready()
        sup.recv()
        hermeskill.checkpoint()
        sup.send(STOP)
        wait_until(lambda: hk.stop_requested)
        with self.assertRaises(hermeskill.HermeskillTerminated) as cm:
            hermeskill.checkpoint()
        e = cm.exception
        self.assertEqual((e.reason, e.kill_event_id, e.check, e.grace), ("budget exceeded", "k-1", "tokens", 3.0))


# An agent written against the SDK: the module's checkpoint() and nothing else.
SDK_AGENT = textwrap.dedent(
    """
    import sys, time
    import hermeskill

    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            hermeskill.checkpoint()
            time.sleep(0.01)
    except hermeskill.HermeskillTerminated as e:
        print("stopped: %s (%s)" % (e.reason, e.kill_event_id))
        sys.exit(4)
    sys.exit(1)
    """
)


class SDKAgentTest(unittest.TestCase):
    def test_module_checkpoint_makes_a_client_that_hears_stop(self):
        sup = FakeSupervisor()
        self.addCleanup(sup.close)
        env = dict(unsupervised_environ(), PYTHONPATH=HERE, HERMESKILL_SOCKET=sup.path)
        proc = subprocess.Popen([sys.executable, "-c", SDK_AGENT], env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(proc.stderr.close)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        # The default client announces its dump signal: hermeskilld now knows where to answer.
        self.assertEqual(sup.recv(), "DUMP_SIGNAL=SIGUSR2")
        sup.send(STOP)
        self.assertEqual(proc.wait(timeout=20), 4, proc.stderr.read())
        self.assertEqual(proc.stdout.read().decode(), "stopped: budget exceeded (k-1)\n")

    def test_module_checkpoint_unsupervised(self):
        out = subprocess.run([sys.executable, "-c", "import hermeskill, threading\n"
                              "hermeskill.checkpoint()\nprint(threading.active_count())"],
                             env=dict(unsupervised_environ(), PYTHONPATH=HERE), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, check=True, timeout=20)
        self.assertEqual(out.stdout.strip(), b"1", "no thread started")


if __name__ == "__main__":
    unittest.main()
